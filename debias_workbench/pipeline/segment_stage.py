"""Stage 1 of IN-9 generation: decode, square (the dataset's `geometry`) and segment every source image.

The work is split into blocks of `block_images` source items (in id order), and whole consecutive
blocks into jobs (`segment_jobs`, `shards.job_blocks`): each job's items are segmented on their own
(`segment_shard`, one workflow job each, so a cluster spreads them over nodes) and `gather_shards`
assembles the intermediate zarr store with one row per
source item (rows of skipped items stay zero and `ok` = 0): `images`, `masks` (foreground),
`box_masks`, `bg_t` (the ONLY_BG_T image, needed as the background of other images' MIXED_*
variants), `labels`, `ok`, `source_sides`, `ids`, `splits`; plus a JSON-lines segmentation quality record per
item and the manifest of skipped items. Under `train_views: photo` (`imageio.TrainPhotos`) the store also
holds each training photo whole, squashed to `view_source_size` (`photos`; zero on the other rows), and every
photo's (height, width) (`photo_shapes`): the original variant's training split and the texture negatives'
example patches are cut from them. Blocks are fixed by the data, never by the number of
jobs or workers, so the store's bytes are the same however the work was spread.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import zarr
from PIL import Image

from debias_workbench.core.atomic import atomic_path, write_json
from debias_workbench.core.errors import SkipItem
from debias_workbench.core.provenance import store_provenance
from debias_workbench.core.seeding import name_seed

from . import variants
from .annotations import read_voc_boxes
from .imageio import Geometry, TrainPhotos, load_rgb, resize_square
from .parallel import run_blocks, worker_setup
from .segmentation import boxes_mask, fallback_box, make_segmenter
from .shards import ALL_SPLITS, job_blocks
from .sources import SourceItem
from .store import atomic_store, create_array

#: {field: title} of the segmentation-quality record's fields whose values the report counts (its segmentation
#: section): how each mask was made, where its box came from, how ONLY_BG_T filled the box
QUALITY_COUNTS = {"mask_status": "mask status", "box_source": "box source", "bg_t_status": "ONLY_BG_T status"}

IMAGE_ARRAYS = ("images", "bg_t", "masks", "box_masks")
#: per-row arrays beside the images; `source_sides` is how many of the photo's pixels the stored
#: image's side spans (the texture variant sizes its example patches by it, as the authors cut them
#: from the photo)
ROW_ARRAYS = {"labels": np.int64, "ok": np.uint8, "source_sides": np.int64}


def segment_jobs(items: list[SourceItem], ds_cfg: dict[str, Any], min_images: int = 1) -> list[range]:
    """The block ranges of the segmentation's jobs (`shards.job_blocks`: every split, `min_images` a job;
    1: one job per block)."""
    return job_blocks([it.split for it in items], int(ds_cfg["block_images"]), ALL_SPLITS, min_images)


def job_items(items: list[SourceItem], ds_cfg: dict[str, Any], blocks: range) -> list[SourceItem]:
    """The items of the blocks `blocks` (one job's)."""
    size = int(ds_cfg["block_images"])
    return items[blocks.start * size : blocks.stop * size]


def array_layout(n: int, ds_cfg: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], type]]:
    """{name: (shape, dtype)} of the intermediate store's per-row arrays for n items, in the order they
    are created: `IMAGE_ARRAYS`, `ROW_ARRAYS`, and under `train_views: photo` each training photo
    squashed whole (`photos`, zero on the other rows) and every photo's (height, width) (`photo_shapes`)."""
    size, photos = int(ds_cfg["image_size"]), TrainPhotos.of(ds_cfg)
    layout: dict[str, tuple[tuple[int, ...], type]] = {
        name: ((n, size, size, 3) if name in ("images", "bg_t") else (n, size, size), np.uint8) for name in IMAGE_ARRAYS
    }
    layout |= {name: ((n,), dtype) for name, dtype in ROW_ARRAYS.items()}
    if photos is not None:
        layout |= {"photos": ((n, photos.side, photos.side, 3), np.uint8), "photo_shapes": ((n, 2), np.int64)}
    return layout


def segment_shard(items: list[SourceItem], ds_cfg: dict[str, Any], seed: int, out: Path) -> None:
    """Segment one shard's items and write its arrays and quality records to `out` (.npz)."""
    worker_setup()
    segmenter, photos = make_segmenter(ds_cfg["segmentation"]), TrainPhotos.of(ds_cfg)
    arrays: dict[str, np.ndarray] = {
        name: np.zeros(shape, dtype) for name, (shape, dtype) in array_layout(len(items), ds_cfg).items()
    }
    arrays["labels"][:] = [it.label for it in items]
    records = []
    for k, item in enumerate(items):
        record: dict[str, Any] = {"id": item.id, "path": str(item.path), "split": item.split, "label": item.label}
        try:
            raw = decoded(item, ds_cfg)
            image, mask, box, quality = segment_item(item, ds_cfg, segmenter, seed, raw)
        except SkipItem as exc:
            record["skipped"] = exc.reason
        else:
            bg_t, bg_status = variants.only_bg_t(image, box)
            arrays["images"][k], arrays["masks"][k], arrays["box_masks"][k], arrays["bg_t"][k] = image, mask, box, bg_t
            arrays["ok"][k], arrays["source_sides"][k] = 1, quality["source_side"]
            if photos is not None:
                arrays["photo_shapes"][k] = raw.shape[:2]
                if item.split == "train":
                    arrays["photos"][k] = photos.photo(raw)[0]
                    quality["released_square"] = raw.shape[:2] == image.shape[:2]  # no more of the photo to give
            record.update(quality, bg_t_status=bg_status)
        records.append(record)
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            # numpy's stub types **arrays as allow_pickle (as in training/cli.py)
            np.savez(fh, records=np.array(json.dumps(records)), **arrays)  # type: ignore[arg-type]


def gather_shards(
    items: list[SourceItem],
    shard_files: list[Path],
    ds_cfg: dict[str, Any],
    seed: int,
    out_store: Path,
    quality_path: Path,
    manifest_path: Path,
) -> None:
    """The intermediate store, quality records and manifest from every segmentation job's `.npz` (whole
    blocks of items each, `segment_jobs`), in order."""
    size, n, shard = int(ds_cfg["image_size"]), len(items), int(ds_cfg["block_images"])
    records: list[dict[str, Any]] = []
    with atomic_store(out_store) as tmp:
        group = zarr.open_group(tmp, mode="w")
        # One image per chunk: MIXED_* read other images' backgrounds at random rows, and
        # sharding keeps that to one small read per image instead of a whole chunk.
        layout = array_layout(n, ds_cfg)
        for name, (shape, dtype) in layout.items():
            create_array(group, name, shape, dtype, chunk_rows=1, shard_rows=shard)
        for name, values in (("ids", [it.id for it in items]), ("splits", [it.split for it in items])):
            create_array(group, name, (n,), str, chunk_rows=max(n, 1), shard_rows=max(n, 1))[:] = np.array(
                values, dtype=str
            )
        group.attrs.update(
            {"classes": list(ds_cfg["classes"]), "image_size": size, "provenance": store_provenance(ds_cfg, seed)}
        )
        for path in shard_files:  # each job's items follow the last one's
            with np.load(path) as data:
                job_records = json.loads(str(data["records"]))
                lo = len(records)
                expected = [it.id for it in items[lo : lo + len(job_records)]]
                if lo % shard or not job_records or [r["id"] for r in job_records] != expected:
                    raise ValueError(f"{path} does not hold the blocks from item {lo} of the listing: rerun it")
                for name in layout:
                    group[name][lo : lo + len(expected)] = data[name]
            records += job_records
        if len(records) != n:
            raise ValueError(f"{len(shard_files)} segmentation files hold {len(records)} of the listing's {n} items")
    if squares := sum(bool(r.get("released_square")) for r in records):
        print(
            f"note: {squares} training images are already squares of {size} px (released images, cut from their "
            "photos so): train_views: photo cuts their views from that square",
            file=sys.stderr,
        )
    with atomic_path(quality_path) as tmp_q:
        tmp_q.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))
    write_json(manifest_path, stage_manifest(items, records))


def run_segment_stage(
    items: list[SourceItem],
    ds_cfg: dict[str, Any],
    seed: int,
    out_store: Path,
    quality_path: Path,
    manifest_path: Path,
    workers: int,
) -> None:
    """Every shard on `workers` processes, then the gather: what the workflow's per-shard jobs
    do, in one process (tests, benchmarks, small data)."""
    Path(out_store).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(out_store).parent) as tmp:
        jobs = segment_jobs(items, ds_cfg)
        shards = [Path(tmp) / f"{k:05d}.npz" for k in range(len(jobs))]
        run_blocks(
            segment_shard,
            [(job_items(items, ds_cfg, blocks), ds_cfg, seed, path) for blocks, path in zip(jobs, shards)],
            workers,
            "segment",
        )
        gather_shards(items, shards, ds_cfg, seed, out_store, quality_path, manifest_path)


def stage_manifest(items: list[SourceItem], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Inputs, outputs and skipped items (with reasons) per split."""
    manifest: dict[str, Any] = {}
    for split in sorted({it.split for it in items}):
        recs = [r for r in records if r["split"] == split]
        skipped = [{"id": r["id"], "path": r["path"], "reason": r["skipped"]} for r in recs if "skipped" in r]
        manifest[split] = {"inputs": len(recs), "outputs": len(recs) - len(skipped), "skipped": skipped}
    return manifest


def decoded(item: SourceItem, ds_cfg: dict[str, Any]) -> np.ndarray:
    """The item's photo, decoded (`imageio.load_rgb`); SkipItem with the reason it cannot be."""
    if item.problem is not None:
        raise SkipItem(item.problem)
    return load_rgb(item.path, int(ds_cfg["min_image_side"]))


def segment_item(item: SourceItem, ds_cfg: dict[str, Any], segmenter, seed: int, raw: np.ndarray | None = None):
    """(image, foreground mask, box mask, quality record) of one item, all at the output size; `raw`:
    its photo when decoded already."""
    raw = decoded(item, ds_cfg) if raw is None else raw
    height, width = raw.shape[:2]
    seg_cfg, geometry = ds_cfg["segmentation"], Geometry.of(ds_cfg)
    if item.annotation is not None:
        boxes, box_source = read_voc_boxes(item.annotation, width, height, geometry), "xml"
    else:
        boxes, box_source = [fallback_box(width, height, float(seg_cfg["fallback_box_fraction"]))], "fallback"
    size = int(ds_cfg["image_size"])
    window = geometry.window(height, width, size)
    image = resize_square(raw if window is None else raw[_rows(window), _cols(window)], size)
    boxes = _boxes_in(boxes, window, (height, width), size)
    if not boxes:
        raise SkipItem(
            f"no annotated box lies in the photo's centred square ({geometry}); set the dataset's "
            "`geometry: squash` to keep the whole photo, or remove the image"
        )
    segmentation = segmenter(image, boxes, name_seed(seed, "grabcut", item.id))
    mask = segmentation.mask
    box = boxes_mask(boxes, size, size)
    # Xiao et al. (2021) dropped images whose GrabCut mask covers under 10 % of the box; we keep
    # them and record the fraction, so the report can say how often that rule would apply
    quality = {
        "source_side": min(height, width) if window is None else window[2],
        "area_fraction": round(float(mask.mean()), 6),
        "mask_status": segmentation.status,
        "box_source": box_source,
        "n_boxes": len(boxes),
        "mask_box_fraction": round(float((mask > 0).sum() / max(int((box > 0).sum()), 1)), 6),
    }
    if item.true_mask is not None:
        truth = _load_true_mask(item.true_mask, window, size)
        union = np.logical_or(truth, mask).sum()
        quality["iou"] = round(float(np.logical_and(truth, mask).sum() / union), 6) if union else 1.0
    return image, mask, box, quality


Window = tuple[int, int, int]  # (top, left, side) of the square kept of a photo


def _rows(window: Window) -> slice:
    return slice(window[0], window[0] + window[2])


def _cols(window: Window) -> slice:
    return slice(window[1], window[1] + window[2])


def _boxes_in(boxes, window: Window | None, shape: tuple[int, int], size: int) -> list:
    """`boxes` (x0, y0, x1, y1 in photo pixels) in the size x size output: shifted into `window`,
    clipped to it (a box wholly outside is dropped) and scaled."""
    top, left = (0, 0) if window is None else window[:2]
    height, width = shape if window is None else (window[2], window[2])
    out = []
    for x0, y0, x1, y1 in boxes:
        x0, x1 = max(x0 - left, 0), min(x1 - left, width)
        y0, y1 = max(y0 - top, 0), min(y1 - top, height)
        if x1 > x0 and y1 > y0:
            out.append(_scaled_box((x0, y0, x1, y1), size / width, size / height, size))
    return out


def _scaled_box(box, sx: float, sy: float, size: int):
    x0, y0, x1, y1 = box
    return (
        min(size - 1, int(np.floor(x0 * sx))),
        min(size - 1, int(np.floor(y0 * sy))),
        max(1, int(np.ceil(x1 * sx))),
        max(1, int(np.ceil(y1 * sy))),
    )


def _load_true_mask(path: Path, window: Window | None, size: int) -> np.ndarray:
    arr = np.load(path) if path.suffix == ".npy" else np.asarray(Image.open(path).convert("L"))
    binary = (np.asarray(arr) > (0 if path.suffix == ".npy" else 127)).astype(np.uint8)
    if window is not None:
        binary = binary[_rows(window), _cols(window)]
    return cv2.resize(binary, (size, size), interpolation=cv2.INTER_NEAREST).astype(bool)
