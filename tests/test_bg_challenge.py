"""The official Background Challenge test images, read as released: stores, bias labels,
skipped entries, and the config checks that tie them to the evaluation dataset."""

import copy
import json
from pathlib import Path

import pytest
import zarr

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.workflow.config import ConfigError, resolve_config

from .conftest import CLASSES
from .standins import make_official_folder, official_cfg


def test_released_images_become_a_store_with_their_background_labels(tmp_path):
    make_official_folder(tmp_path / "bg")
    family = get_family("bg_challenge")
    for variant in ("original", "mixed_next"):
        family.run_step("variant", official_cfg(tmp_path / "bg"), 0, tmp_path / f"{variant}.zarr", [], variant=variant)
    val = zarr.open_group(str(tmp_path / "original.zarr"), mode="r")["val"]
    assert val["images"].shape == (6, 32, 32, 3) and val["labels"][:].tolist() == [0, 0, 0, 1, 1, 1]
    assert val["bias_labels"][:].tolist() == [0, 0, 0, 1, 1, 1]  # object and background from one image
    nxt = zarr.open_group(str(tmp_path / "mixed_next.zarr"), mode="r")["val"]
    assert nxt["bias_labels"][:].tolist() == [1, 1, 1, 2, 2]  # (y + 1) mod 9
    manifest = json.loads((tmp_path / "mixed_next.manifest.json").read_text())["val"]
    assert manifest["inputs"] == 6 == manifest["outputs"] + len(manifest["skipped"])
    assert "broken symbolic link" in manifest["skipped"][0]["reason"]


def test_official_dataset_must_match_the_evaluation_dataset(default_config, tmp_path):
    cfg = copy.deepcopy(default_config)
    cfg["datasets"]["official"] = official_cfg(tmp_path, size=224)
    cfg["evaluation"]["official_dataset"] = "official"
    with pytest.raises(ConfigError, match=r"datasets\.official\.image_size"):
        resolve_config(cfg)
    cfg["datasets"]["official"]["image_size"] = 32
    resolve_config(cfg)
    cfg["evaluation"]["official_dataset"] = "in9"
    with pytest.raises(ConfigError, match=r"evaluation\.official_dataset"):
        resolve_config(cfg)
