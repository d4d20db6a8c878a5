"""Stage 2 of IN-9 generation: one variant's zarr store from the segmented intermediate store.

Store layout (the format later stages and issues rely on):
  <variant>.zarr/{train,val}/images       (N, H, W, 3) uint8
                            /labels       (N,) int64
                            /bias_labels  (N,) int64  background's class; -1 when unknown
                            /ids          (N,) str    source image ids
                            /masks        (N, H, W) uint8, for variants that show the foreground
  attrs: classes, bias_classes, variant, family, image_size, provenance
Beside it, `<variant>.manifest.json`: per split, inputs = outputs + skipped, with reasons.

Under `train_views: photo` (`imageio.TrainPhotos`) the original variant's train split holds each whole
photo squashed to `view_source_size` (`images` (N, S, S, 3), no masks) and `aspects` (N,) float32,
the photo's width / height; attrs add `train_photos` {side, fraction} (the test geometry's crop, for
scoring a training photo as a test image). Its val split is as without the option. The other
variants of the stage are cut from the square and make no training split of photos: refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from debias_workbench.core.atomic import write_json
from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.provenance import store_provenance
from debias_workbench.core.seeding import name_rng

from . import variants
from .imageio import TrainPhotos
from .parallel import run_blocks, worker_setup
from .store import atomic_store, create_array, rows_per_block


def run_variant_stage(
    seg_store: Path,
    seg_manifest: Path,
    variant: str,
    ds_cfg: dict[str, Any],
    seed: int,
    out_store: Path,
    manifest_path: Path,
    workers: int,
    family: str = "in9",
) -> None:
    """The variant's store and manifest (layout: the module docstring) from the segmented store,
    its rows composed block by block on `workers` processes."""
    seg = zarr.open_group(seg_store, mode="r")
    ids, splits = seg["ids"][:], seg["splits"][:]
    labels, ok = seg["labels"][:], seg["ok"][:].astype(bool)
    heldout = variant.endswith(variants.HELDOUT)
    if heldout:  # its val split: train rows held out of its train split
        splits = variants.heldout_splits(splits, ids, labels, seed)
    classes = list(seg.attrs["classes"])
    size, photos = int(seg.attrs["image_size"]), TrainPhotos.of(ds_cfg)
    if photos is not None and variant != "original":
        raise PipelineError(
            f"variant {variant!r} is cut from the stored square, and its train split would be too: "
            "under train_views: photo only original holds the training photos; drop the variant or "
            "set train_views: square"
        )
    upstream = json.loads(Path(seg_manifest).read_text())
    manifest: dict[str, Any] = {}
    with atomic_store(out_store) as tmp:
        group = zarr.open_group(tmp, mode="w")
        _write_attrs(group, classes, variant, family, size, ds_cfg, seed, photos)
        blocks = []
        for split in sorted(set(splits.tolist()) - {""}):
            rows = np.nonzero(ok & (splits == split))[0]
            partners, bias, kept, skipped = _pair(variant, rows, ids, labels, len(classes), seed)
            manifest[split] = _split_manifest(upstream, split, heldout, len(rows), len(kept), skipped)
            whole = photos is not None and split == "train"  # the split holds the photos
            side = photos.side if photos is not None and whole else size
            sub = _split_group(group.create_group(split), variant, ds_cfg, len(kept), side, whole)
            sub["labels"][:], sub["bias_labels"][:], sub["ids"][:] = labels[kept], bias, ids[kept]
            if whole:
                shapes = seg["photo_shapes"][:][kept]
                create_array(sub, "aspects", (len(kept),), np.float32, max(len(kept), 1), max(len(kept), 1))[:] = (
                    shapes[:, 1] / shapes[:, 0]
                )
            block = rows_per_block(sub["images"].chunks[0], int(ds_cfg["block_images"]))
            for start in range(0, len(kept), block):
                stop = min(len(kept), start + block)
                blocks.append(
                    (str(seg_store), str(tmp), split, variant, start, kept[start:stop], partners[start:stop], whole)
                )
        run_blocks(_compose_block, blocks, workers, f"variant {variant}")
    write_json(manifest_path, manifest)


def _write_attrs(
    group: zarr.Group,
    classes: list[str],
    variant: str,
    family: str,
    size: int,
    ds_cfg: dict[str, Any],
    seed: int,
    photos: TrainPhotos | None,
) -> None:
    """The store's attributes of the module docstring's layout (the classes double as the bias
    classes: a background's class), plus `train_photos` where the train split holds whole photos."""
    group.attrs.update(
        {
            "classes": classes,
            "bias_classes": classes,
            "variant": variant,
            "family": family,
            "image_size": size,
            "provenance": store_provenance(ds_cfg, seed),
        }
    )
    if photos is not None:
        group.attrs["train_photos"] = {"side": photos.side, "fraction": photos.fraction}


def _split_manifest(
    upstream: dict[str, Any], split: str, heldout: bool, inputs: int, outputs: int, skipped: list[dict[str, Any]]
) -> dict[str, Any]:
    """A split's manifest entry, inputs = outputs + skipped: counted from the segmentation's manifest
    `upstream` (the split's inputs, its skipped items before this stage's), or, for a held-out variant's
    splits, from the usable rows it was cut from (`held_out_of` the segmentation's train split)."""
    if heldout:
        return {"inputs": inputs, "outputs": outputs, "skipped": skipped, "held_out_of": "train"}
    return {"inputs": upstream[split]["inputs"], "outputs": outputs, "skipped": upstream[split]["skipped"] + skipped}


def _split_group(sub: zarr.Group, variant: str, ds_cfg: dict[str, Any], n: int, side: int, photos: bool) -> zarr.Group:
    """A split's empty arrays: `images` at `side` px, `masks` where the variant shows the foreground (not
    of training `photos`: their masks are the square's), and the per-row `labels`, `bias_labels`, `ids`."""
    chunk = int(ds_cfg["chunk_images"])
    create_array(sub, "images", (n, side, side, 3), np.uint8, chunk, codec=ds_cfg["image_codec"])
    if not photos and variant in variants.WITH_FOREGROUND:
        create_array(sub, "masks", (n, side, side), np.uint8, chunk)
    for name, dtype in (("labels", np.int64), ("bias_labels", np.int64), ("ids", str)):
        create_array(sub, name, (n,), dtype, max(n, 1), max(n, 1))
    return sub


def _pair(variant: str, rows: np.ndarray, ids: np.ndarray, labels: np.ndarray, n_classes: int, seed: int):
    """Partner row (or -1), bias label, kept rows and skipped records for one split."""
    if variant not in variants.MIXED and not variant.startswith(variants.BG_CONFLICT):
        no_background = variant in ("only_fg", "sketch")
        bias = np.full(len(rows), -1, np.int64) if no_background else labels[rows].astype(np.int64)
        return np.full(len(rows), -1, np.int64), bias, rows, []
    by_class = [rows[labels[rows] == c] for c in range(n_classes)]
    background = np.full(len(ids), -1, np.int64)
    if variant.startswith(variants.BG_CONFLICT):
        ratio = float(variant.removeprefix(variants.BG_CONFLICT)) / 100
        background[rows] = variants.background_classes(labels[rows], ids[rows], n_classes, ratio, seed)
    partners, kept, skipped = [], [], []
    for row in rows:
        rng = name_rng(seed, "partner", variant, ids[row])  # by name: independent of row order
        try:
            partners.append(
                variants.choose_partner(variant, int(labels[row]), int(row), by_class, rng, int(background[row]))
            )
            kept.append(row)
        except SkipItem as exc:
            skipped.append({"id": str(ids[row]), "path": None, "reason": exc.reason})
    partners_arr = np.array(partners, np.int64)
    return partners_arr, labels[partners_arr].astype(np.int64), np.array(kept, np.int64), skipped


def _compose_block(
    seg_store: str,
    out_store: str,
    split: str,
    variant: str,
    start: int,
    rows: np.ndarray,
    partners: np.ndarray,
    whole: bool = False,
) -> None:
    """The rows `rows` of the variant into its store from `start` on (`whole`: the training photos)."""
    worker_setup()
    seg = zarr.open_group(seg_store, mode="r")
    image, fg = _rows(seg["photos" if whole else "images"], rows), _rows(seg["masks"], rows)
    if variant == "original":
        out = image
    elif variant == "only_fg":
        out = variants.only_fg(image, fg)
    elif variant == "no_fg":
        out = variants.no_fg(image, fg)
    elif variant == "only_bg_b":
        out = variants.only_bg_b(image, _rows(seg["box_masks"], rows))
    elif variant == "sketch":
        out = variants.sketch(image, fg)
    elif variant == "only_bg_t":
        out = _rows(seg["bg_t"], rows)
    else:
        unique, inverse = np.unique(partners, return_inverse=True)
        # partners are scattered: one read per row (the intermediate store has 1-image chunks)
        background = np.stack([seg["bg_t"][int(r)] for r in unique])[inverse]
        out = variants.composite(background, image, fg)
    group = zarr.open_group(out_store, mode="r+")[split]
    stop = start + len(rows)
    group["images"][start:stop] = out
    if "masks" in group:
        group["masks"][start:stop] = fg


def _rows(array: zarr.Array, rows: np.ndarray) -> np.ndarray:
    """array[rows] for sorted rows, read as one contiguous slice (zarr's fancy indexing is slow)."""
    lo = int(rows[0])
    return array[lo : int(rows[-1]) + 1][rows - lo]
