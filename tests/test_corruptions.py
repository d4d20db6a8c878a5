"""IN-9-C: ImageNet-C corruptions of the val images, one balanced (corruption, severity) pair each."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import zarr

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.corruptions import assign_pairs, check_work_size, corrupt_image, corruption_names
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.evaluation import severity_rows

from .conftest import tiny_stores_config
from .test_stylized_texture import _tree_digest


def _build(tiny_stores: dict[str, Path], out: Path, workers: int, **corrupted) -> Path:
    cfg = tiny_stores_config()
    cfg["corrupted"] = {**cfg["corrupted"], **corrupted}
    root = tiny_stores["original"].parent
    get_family("in9").run_step("variant", cfg, 0, out, [root / "seg.zarr", root / "segmented.manifest.json"],
                               workers, "corrupted")
    return out


def test_pairs_are_balanced_within_every_class():
    labels = np.repeat([0, 1, 2], [40, 43, 7])
    ids = np.array([f"img{k}" for k in range(len(labels))])
    pair = assign_pairs(labels, ids, 10, seed=0)
    for label in (0, 1, 2):
        counts = Counter(pair[labels == label].tolist())
        per_pair = [counts.get(p, 0) for p in range(10)]
        assert max(per_pair) - min(per_pair) <= 1, (label, per_pair)
    # the assignment follows the ids, not their order in the arrays
    perm = np.random.default_rng(1).permutation(len(ids))
    assert np.array_equal(assign_pairs(labels[perm], ids[perm], 10, seed=0), pair[perm])
    assert not np.array_equal(assign_pairs(labels, ids, 10, seed=1), pair)


def test_corruption_is_seeded_by_the_image_id():
    image = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    for name in ("gaussian_noise", "impulse_noise", "glass_blur", "frost"):
        a = corrupt_image(image, name, 3, "id-a", 0, None)
        assert a.shape == image.shape and a.dtype == np.uint8 and not np.array_equal(a, image)
        np.random.seed(12345)  # the global state before the call does not matter
        assert np.array_equal(corrupt_image(image, name, 3, "id-a", 0, None), a), name
        assert not np.array_equal(corrupt_image(image, name, 3, "id-b", 0, None), a), name
    # severity 5 moves the pixels further than severity 1
    mild, strong = (corrupt_image(image, "gaussian_noise", s, "id-a", 0, None) for s in (1, 5))
    assert np.abs(strong.astype(int) - image).mean() > np.abs(mild.astype(int) - image).mean()
    assert len(corruption_names("all")) == 19 and len(corruption_names("common")) == 15


def test_too_small_images_stop_with_the_setting_to_change():
    with pytest.raises(PipelineError, match="corrupted.work_size"):
        check_work_size(16, None)
    check_work_size(16, 32)


def test_corrupted_store_covers_val_and_rebuilds_identically(tmp_path, tiny_stores):
    store = _build(tiny_stores, tmp_path / "a" / "corrupted.zarr", 1)
    group = zarr.open_group(str(store), mode="r")
    assert list(group.group_keys()) == ["val"] and len(group.attrs["corruptions"]) == 19
    val, original = group["val"], zarr.open_group(str(tiny_stores["original"]), mode="r")["val"]
    assert np.array_equal(val["ids"][:], original["ids"][:]) and np.array_equal(val["labels"][:], original["labels"][:])
    assert np.array_equal(val["bias_labels"][:], val["labels"][:])
    assert set(val["severity"][:]) <= {1, 2, 3, 4, 5} and (val["corruption"][:] >= 0).all()
    assert not np.array_equal(val["images"][:], original["images"][:])
    manifest = json.loads((store.parent / "corrupted.manifest.json").read_text())
    assert manifest["val"]["inputs"] == manifest["val"]["outputs"] == 18 and not manifest["val"]["skipped"]
    rebuilt = _build(tiny_stores, tmp_path / "b" / "corrupted.zarr", 2)
    assert _tree_digest(rebuilt) == _tree_digest(store)


def test_a_failing_corruption_is_a_skipped_item(tmp_path, tiny_stores, monkeypatch):
    import imagecorruptions

    def fail(image, severity, corruption_name, **kwargs):
        raise ValueError("broken kernel")

    monkeypatch.setattr(imagecorruptions, "corrupt", fail)
    store = _build(tiny_stores, tmp_path / "corrupted.zarr", 1, corruptions=["gaussian_noise"], severities=[2])
    manifest = json.loads((store.parent / "corrupted.manifest.json").read_text())["val"]
    assert manifest["outputs"] == 0 and len(manifest["skipped"]) == manifest["inputs"] == 18
    assert "gaussian_noise (severity 2) failed: ValueError: broken kernel" in manifest["skipped"][0]["reason"]
    assert manifest["skipped"][0]["id"]


def test_severity_rows_average_within_each_severity(tmp_path):
    group = zarr.open_group(str(tmp_path / "c.zarr"), mode="w")
    group.create_group("val").create_array("severity", data=np.array([1, 1, 2, 2, 2]))
    result = {"pred": np.array([0, 1, 1, 1, 0]), "labels": np.array([0, 0, 1, 1, 1])}
    rows = severity_rows(result, tmp_path / "c.zarr", "val", {"variant": "corrupted"})
    assert [(r["severity"], r["value"], r["n"]) for r in rows] == [(1, 50.0, 2), (2, pytest.approx(200 / 3), 3)]
