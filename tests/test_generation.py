"""Generation end to end on tiny data: determinism across core counts, atomic outputs,
and images in = images out + skipped."""

import json
from pathlib import Path

import numpy as np
import zarr

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.fingerprint import FILE, compute
from debias_workbench.pipeline.variants import HELDOUT, VARIANTS

from .conftest import needs_shared


def build_all(root: Path, ds_cfg: dict, workers: int, variants=VARIANTS) -> None:
    family = get_family("in9")
    family.run_step("source", ds_cfg, 0, root / "src", [], workers, None)
    seg = root / "seg" / "segmented.zarr"
    family.run_step("segment", ds_cfg, 0, seg, [root / "src"], workers, None)
    for v in variants:
        family.run_step("variant", ds_cfg, 0, root / "ds" / f"{v}.zarr", [seg, seg.parent / "segmented.manifest.json"],
                        workers, v)


def store_digest(store: Path) -> str:
    """The store's content fingerprint recomputed from its values (`pipeline.fingerprint`: every
    array's decoded values and every group's attributes but provenance); it must equal the one
    the store was written with."""
    fingerprint = compute(store)
    assert fingerprint == json.loads((store / FILE).read_text()), f"{store} differs from its fingerprint.json"
    return fingerprint["digest"]


def test_builds_are_identical_for_1_and_2_workers(tmp_path, tiny_ds_cfg):
    """Same config and seed on 1 and 2 workers: the same fingerprint for every variant store."""
    build_all(tmp_path / "one", tiny_ds_cfg, workers=1)
    build_all(tmp_path / "two", tiny_ds_cfg, workers=2)
    for v in VARIANTS:
        assert store_digest(tmp_path / "one" / "ds" / f"{v}.zarr") == store_digest(tmp_path / "two" / "ds" / f"{v}.zarr"), v
    # the source JPEGs are byte-identical too
    a = sorted((tmp_path / "one" / "src").rglob("*.JPEG"))
    b = sorted((tmp_path / "two" / "src").rglob("*.JPEG"))
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def test_store_format_and_manifest(tmp_path, tiny_ds_cfg):
    build_all(tmp_path, tiny_ds_cfg, workers=1, variants=["original", "mixed_rand"])
    g = zarr.open_group(str(tmp_path / "ds" / "mixed_rand.zarr"), mode="r")
    assert set(g.group_keys()) == {"train", "val"}
    val = g["val"]
    assert val["images"].shape == (18, 32, 32, 3) and val["images"].dtype == np.uint8
    assert val["labels"].dtype == np.int64 and val["bias_labels"].dtype == np.int64
    assert val["masks"].shape == (18, 32, 32)
    assert g.attrs["classes"] == tiny_ds_cfg["classes"] and g.attrs["bias_classes"] == tiny_ds_cfg["classes"]
    assert set(g.attrs["provenance"]) == {"config_hash", "seed", "code_version", "config"}
    manifest = json.loads((tmp_path / "ds" / "mixed_rand.manifest.json").read_text())
    for split, n in (("train", 27), ("val", 18)):
        assert manifest[split]["inputs"] == n == manifest[split]["outputs"] + len(manifest[split]["skipped"])
    assert not list((tmp_path / "ds").glob("*.tmp-*"))  # nothing half-written left behind


def test_real_photos_without_boxes_lose_no_image(tmp_path, tiny_ds_cfg):
    photos = needs_shared("data/in9-photos-dev")
    cfg = dict(tiny_ds_cfg, image_size=48)
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(photos), "val_fraction": 0.3}}
    family = get_family("in9")
    seg = tmp_path / "segmented.zarr"
    family.run_step("segment", cfg, 0, seg, [], 2, None)
    quality = [json.loads(line) for line in (tmp_path / "segmentation_quality.jsonl").read_text().splitlines()]
    n_files = sum(1 for _ in photos.rglob("*.JPEG"))
    assert len(quality) == n_files == 186
    assert all("skipped" not in q and q["box_source"] == "fallback" for q in quality)
    outputs = {}
    for v in VARIANTS:
        family.run_step("variant", cfg, 0, tmp_path / f"{v}.zarr", [seg, tmp_path / "segmented.manifest.json"], 2, v)
        outputs[v] = json.loads((tmp_path / f"{v}.manifest.json").read_text())
    val_photos = outputs["original"]["val"]["outputs"]
    for v, manifest in outputs.items():
        # a held-out variant leaves the dataset's val photos out by design: its val split is held out of train
        expected = 186 - val_photos if v.endswith(HELDOUT) else 186
        assert sum(m["outputs"] for m in manifest.values()) == expected, v


def test_per_shard_jobs_give_the_same_store_as_one_process(tmp_path, tiny_ds_cfg):
    """The workflow's list -> segment-shard (one job each, any order) -> segment-gather path
    writes the same bytes as the in-process stage."""
    family = get_family("in9")
    family.run_step("source", tiny_ds_cfg, 0, tmp_path / "src", [])
    family.run_step("segment", tiny_ds_cfg, 0, tmp_path / "one" / "segmented.zarr", [tmp_path / "src"], 2)
    listing = tmp_path / "jobs" / "listing.json"
    family.run_step("list", tiny_ds_cfg, 0, listing, [tmp_path / "src"])
    n_shards = -(-45 // tiny_ds_cfg["block_images"])
    shards = [tmp_path / "jobs" / f"{k:05d}.npz" for k in range(n_shards)]
    for k in reversed(range(n_shards)):
        family.run_step("segment-shard", tiny_ds_cfg, 0, shards[k], [listing], shard=k)
    family.run_step("segment-gather", tiny_ds_cfg, 0, tmp_path / "jobs" / "segmented.zarr", [listing, *shards])
    assert store_digest(tmp_path / "jobs" / "segmented.zarr") == store_digest(tmp_path / "one" / "segmented.zarr")
    for name in ("segmentation_quality.jsonl", "segmented.manifest.json"):
        assert (tmp_path / "jobs" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
