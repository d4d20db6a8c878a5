"""BFFHQ / BAR read from their released folder layout: labels from names, square crops, skips."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import zarr

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.datasets import get_family


def _release(root: Path) -> dict:
    def write(path: Path, value: int, shape=(40, 60)) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), np.full((*shape, 3), value, np.uint8))

    for label in (0, 1):
        for k in range(5):
            write(root / "1pct" / "align" / str(label) / f"{k}_{label}_{label}.png", 10 + k)
        write(root / "1pct" / "conflict" / str(label) / f"9_{label}_{1 - label}.png", 200)
        write(root / "valid" / f"v{label}_{label}_{1 - label}.png", 50)
        write(root / "test" / f"t{label}_{label}_{label}.png", 60)
    (root / "1pct" / "align" / "0" / "broken_0_0.png").write_bytes(b"not a png")
    write(root / "1pct" / "align" / "0" / "noname.png", 1)
    return {"family": "released_bias_folders", "root": str(root), "conflict_percents": [1], "classes": ["a", "b"],
            "bias_classes": ["x", "y"], "image_size": 16, "geometry": "squash", "crop_fraction": 1.0, "chunk_images": 8}


def test_release_is_read_as_is_and_bad_files_are_listed(tmp_path):
    cfg = _release(tmp_path / "bffhq")
    family = get_family("released_bias_folders")
    assert family.variants(cfg) == ["conflict_1", "unbiased"]
    family.run_step("variant", cfg, 0, tmp_path / "out" / "conflict_1.zarr", [], 1, "conflict_1")
    group = zarr.open_group(str(tmp_path / "out" / "conflict_1.zarr"), mode="r")
    train = group["train"]
    assert train["images"].shape == (12, 16, 16, 3) and group.attrs["classes"] == ["a", "b"]
    assert int((train["labels"][:] != train["bias_labels"][:]).sum()) == 2          # the conflict folder's two
    assert "conflict/1/9_1_0.png" in list(train["ids"][:])
    manifest = json.loads((tmp_path / "out" / "conflict_1.manifest.json").read_text())
    assert manifest["train"]["inputs"] == 14 == manifest["train"]["outputs"] + len(manifest["train"]["skipped"])
    reasons = sorted(s["reason"] for s in manifest["train"]["skipped"])
    assert reasons[0].startswith("cannot decode image") and "does not end in _<label>_<bias>" in reasons[1]
    assert manifest["val"]["outputs"] == 2


def test_a_missing_release_folder_says_what_to_point_at(tmp_path):
    cfg = _release(tmp_path / "bffhq")
    with pytest.raises(PipelineError, match="5pct/align is missing: point `root` at the released folder"):
        get_family("released_bias_folders").run_step("variant", {**cfg, "conflict_percents": [5]}, 0,
                                                     tmp_path / "x.zarr", [], 1, "conflict_5")
