"""Waterbirds from (fake) CUB-200-2011 and Places folders: labels, exact place counts, the
composite, skipped items and the errors that say what to place where."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import zarr

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.bird_composites import is_waterbird

from .standins import make_places

SPECIES = ["045.Northern_Fulmar", "059.California_Gull", "118.House_Sparrow", "160.Black_throated_Blue_Warbler"]


def _fake_folders(root: Path) -> dict:
    rng = np.random.default_rng(0)
    cub, seg, places = root / "CUB_200_2011", root / "segmentations", root / "places"
    lines, split = [], []
    for s, species in enumerate(SPECIES):
        for k in range(10):
            rel = f"{species}/{species.split('.')[1]}_{k:04d}.jpg"
            (cub / "images" / species).mkdir(parents=True, exist_ok=True)
            (seg / species).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(cub / "images" / rel), np.full((30, 40, 3), 40 * s + 10, np.uint8))
            mask = np.zeros((30, 40), np.uint8)
            mask[10:20, 15:25] = 255
            if not (s == 0 and k == 0):                    # one bird without its segmentation
                cv2.imwrite(str(seg / rel).replace(".jpg", ".png"), mask)
            idx = len(lines) + 1
            lines.append(f"{idx} {rel}")
            split.append(f"{idx} {int(k < 7)}")
    (cub / "images.txt").write_text("\n".join(lines) + "\n")
    (cub / "train_test_split.txt").write_text("\n".join(split) + "\n")
    make_places(places, rng)
    return {"family": "waterbirds", "cub_root": str(cub), "segmentations": str(seg), "places_root": str(places),
            "conflict_percents": [50], "val_fraction": 0.2, "image_size": 32, "geometry": "squash", "crop_fraction": 1.0, "chunk_images": 16}


def test_waterbird_species_follow_the_recipe():
    assert is_waterbird("045.Northern_Fulmar") and is_waterbird("059.California_Gull")
    assert not is_waterbird("118.House_Sparrow")


def test_waterbirds_store_counts_places_exactly_and_lists_skipped_birds(tmp_path):
    cfg = _fake_folders(tmp_path)
    family = get_family("waterbirds")
    out = tmp_path / "out" / "conflict_50.zarr"
    family.run_step("variant", cfg, 0, out, [], 1, "conflict_50")
    manifest = json.loads((out.parent / "conflict_50.manifest.json").read_text())
    train = zarr.open_group(str(out), mode="r")["train"]
    labels, places = train["labels"][:], train["bias_labels"][:]
    assert manifest["train"]["inputs"] == manifest["train"]["outputs"] + len(manifest["train"]["skipped"])
    assert [s["reason"] for s in manifest["train"]["skipped"] + manifest["val"]["skipped"]][0].startswith("no segmentation")
    waterbird_ids = [i for i in train["ids"][:] if is_waterbird(i.split("/")[0])]
    assert sorted(waterbird_ids) == sorted(train["ids"][:][labels == 1])
    for y in (0, 1):  # 50 %: round(0.5 n) on the other place type (of those planned; one bird was skipped)
        assert abs((places[labels == y] != y).sum() - (labels == y).sum() / 2) <= 1
    image = train["images"][0]
    assert image.shape == (32, 32, 3) and image[16, 16].tolist() != image[0, 0].tolist()   # bird over background
    family.run_step("variant", cfg, 0, tmp_path / "again" / "conflict_50.zarr", [], 1, "conflict_50")
    assert np.array_equal(zarr.open_group(str(tmp_path / "again" / "conflict_50.zarr"), mode="r")["train"]["images"][:],
                          train["images"][:])


def test_missing_folders_say_what_to_place_where(tmp_path):
    cfg = _fake_folders(tmp_path)
    family = get_family("waterbirds")
    import shutil

    shutil.rmtree(tmp_path / "places" / "l")
    with pytest.raises(PipelineError, match="l/lake/natural is missing: point `places_root` at a Places365 folder"):
        family.run_step("variant", cfg, 0, tmp_path / "x.zarr", [], 1, "unbiased")
    with pytest.raises(PipelineError, match="images.txt is missing"):
        family.run_step("variant", {**cfg, "cub_root": str(tmp_path)}, 0, tmp_path / "y.zarr", [], 1, "unbiased")
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "y.zarr").exists()
