"""IN-9 variants made image by image by a model or an external tool, per shard then gathered:

- `stylized` (Stylized IN-9): AdaIN with a style of a class drawn from all classes on train (the
  texture says nothing about the label) and from the other classes on val (`pipeline.adain`,
  `pipeline.styles`); `bias_labels` = the style's class, `style_ids` = the style's id. Its val
  split is the cue-conflict set of the shape bias (shape of class A, texture of class B != A).
- `texture` (IN-9-Texture, Ge et al. 2021 Sec. 2.2): a texture synthesized from the image's
  central patch and one random patch (`pipeline.texture_synthesis`), sized by the source photo's
  side as the authors cut them from the photo (`texture_patches`); `bias_labels` = the label. Under
  `train_views: photo` the train split's patches (the negatives of MoCo-v2 + texture) are cut from
  the whole photo at its aspect, as the authors' from the decoded photo; the val split's from the
  stored square (the test image). The textures are squares at the image size either way.
- `corrupted` (IN-9-C): the image under one ImageNet-C (corruption, severity) pair, the pairs
  balanced per class (`pipeline.corruptions`); `bias_labels` = the label, `corruption` (index
  into the store's `corruptions` attribute) and `severity` per image.

The work goes block by block (`block_images` rows of the intermediate store each, the segmentation's),
whole blocks to a job (`derived_jobs`: only the blocks holding a row of the splits the variant builds), so
a cluster spreads them over nodes; every choice is seeded by the image's id and every batch is fixed by
its block, so the stores' bytes do not depend on how the blocks were spread over jobs. The
first two run at `work_size` (images are resized to it and back; null: the image size, at least
64 px, `work_side`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import zarr

from debias_workbench.core.atomic import atomic_path, write_json
from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.provenance import store_provenance
from debias_workbench.core.seeding import name_rng, name_seed

from .corruptions import assign_pairs, check_work_size, corrupt_image, corruption_names
from .imageio import TrainPhotos, unsquashed
from .parallel import run_blocks, worker_setup
from .shards import job_blocks
from .store import atomic_store, create_array
from .texture_patches import Example, example_patches, texture_examples, work_patch_side

DERIVED = ("stylized", "texture", "corrupted")
#: per-image arrays a kind stores beside images, labels, bias labels and ids
EXTRA_FIELDS = {"stylized": ("style_ids",), "corrupted": ("corruption", "severity")}


def derived_jobs(item_splits: Sequence[str], ds_cfg: dict[str, Any], kind: str, min_images: int = 1) -> list[range]:
    """The block ranges of `kind`'s jobs over the items (in row order) whose splits are `item_splits`: only the
    blocks holding an item of the splits `kind` builds (`shards.job_blocks`; `min_images` 1: one job per block)."""
    return job_blocks(item_splits, int(ds_cfg["block_images"]), ds_cfg[kind]["splits"], min_images)


def derived_job(
    kind: str, seg_store: Path, ds_cfg: dict[str, Any], seed: int, shard: int, min_images: int, out: Path
) -> None:
    """Job `shard` of `kind`'s jobs of at least `min_images` images each (`derived_jobs` over the store's rows),
    as the workflow runs it."""
    jobs = derived_jobs(list(zarr.open_group(seg_store, mode="r")["splits"][:]), ds_cfg, kind, min_images)
    if not 0 <= shard < len(jobs):
        raise PipelineError(f"{kind} has {len(jobs)} jobs of at least {min_images} images here, not job {shard}")
    derived_shard(kind, seg_store, ds_cfg, seed, jobs[shard], out)


def derived_shard(kind: str, seg_store: Path, ds_cfg: dict[str, Any], seed: int, blocks: range, out: Path) -> None:
    """Make `kind`'s images of the usable rows (of the configured splits) of the blocks `blocks` into `out`
    (.npz), block by block, each as a job of that block alone would (the same batches, so the same bytes)."""
    worker_setup()
    seg = zarr.open_group(seg_store, mode="r")
    cfg = ds_cfg[kind]
    if kind != "texture" and "train" in cfg["splits"] and TrainPhotos.of(ds_cfg) is not None:
        raise PipelineError(
            f"{kind}'s train split would be cut from the stored square: under train_views: photo "
            f"only original and texture make a training split; set {kind}.splits: [val]"
        )
    if kind == "texture" and "source_sides" not in seg:
        raise PipelineError(f"{seg_store} predates the photos' sides the texture variant needs; delete it and rerun")
    parts = [_derived_block(kind, seg, k, ds_cfg, seed) for k in blocks]
    records = [r for part in parts for r in part.pop("records")]
    arrays: dict[str, Any] = {f: np.concatenate([part[f] for part in parts]) for f in parts[0]}
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, records=np.array(json.dumps(records)), **arrays)


def _derived_block(kind: str, seg: zarr.Group, k: int, ds_cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """`kind`'s images (`rows`, the arrays and `records`) of the usable rows of the configured splits in block `k`."""
    block = int(ds_cfg["block_images"])
    lo = k * block
    hi = min(seg["ids"].shape[0], lo + block)
    splits = seg["splits"][lo:hi]
    wanted = np.isin(splits, ds_cfg[kind]["splits"]) & seg["ok"][lo:hi].astype(bool)
    rows = lo + np.nonzero(wanted)[0]
    images, labels, ids = seg["images"][lo:hi][rows - lo], seg["labels"][:][rows], seg["ids"][:][rows]
    if kind == "corrupted":
        result = _corrupt(images, rows, seg, ds_cfg, seed)
    elif kind == "stylized":
        result = _stylize(images, labels, ids, splits[rows - lo], list(seg.attrs["classes"]), ds_cfg, seed)
    else:
        result = _texture(*texture_examples(seg, rows, images, ds_cfg), labels, ids, ds_cfg, seed)
    return {"rows": rows, **result}


def derived_gather(
    kind: str,
    seg_store: Path,
    seg_manifest: Path,
    shard_files: list[Path],
    ds_cfg: dict[str, Any],
    seed: int,
    out_store: Path,
    manifest_path: Path,
) -> None:
    """The variant store (layout of `variant_stage`, plus the kind's own per-image arrays:
    `style_ids` for `stylized`, `corruption` and `severity` for `corrupted`) and its manifest (the
    segmentation's skipped items plus this stage's) from every shard, in row order."""
    seg = zarr.open_group(seg_store, mode="r")
    ids, splits = seg["ids"][:], seg["splits"][:]
    rows, records, data = _read_shards(shard_files)
    size, chunk = int(seg.attrs["image_size"]), int(ds_cfg["chunk_images"])
    upstream = json.loads(Path(seg_manifest).read_text())
    manifest: dict[str, Any] = {}
    with atomic_store(out_store) as tmp:
        group = zarr.open_group(tmp, mode="w")
        group.attrs.update(
            {
                "classes": list(seg.attrs["classes"]),
                "bias_classes": list(seg.attrs["classes"]),
                "variant": kind,
                "family": "in9",
                "image_size": size,
                "provenance": store_provenance(ds_cfg, seed),
            }
        )
        if kind == "corrupted":
            group.attrs["corruptions"] = corruption_names(ds_cfg["corrupted"]["corruptions"])
        for split in ds_cfg[kind]["splits"]:
            in_split = splits[rows] == split
            made = in_split & data["ok"].astype(bool)
            skipped = [
                {"id": str(ids[r]), "path": None, "reason": rec["skipped"]}
                for r, rec in zip(rows, records)
                if splits[r] == split and "skipped" in rec
            ]
            manifest[split] = {
                "inputs": upstream[split]["inputs"],
                "outputs": int(made.sum()),
                "skipped": upstream[split]["skipped"] + skipped,
            }
            sub, n = group.create_group(split), int(made.sum())
            one = max(n, 1)
            images = create_array(sub, "images", (n, size, size, 3), np.uint8, chunk, codec=ds_cfg["image_codec"])
            images[:] = data["images"][made]
            create_array(sub, "labels", (n,), np.int64, one, one)[:] = seg["labels"][:][rows[made]]
            create_array(sub, "bias_labels", (n,), np.int64, one, one)[:] = data["bias_labels"][made]
            create_array(sub, "ids", (n,), str, one, one)[:] = ids[rows[made]]
            for field in EXTRA_FIELDS.get(kind, ()):
                values = data[field][made]
                create_array(sub, field, (n,), str if values.dtype.kind == "U" else values.dtype, one, one)[:] = values
    write_json(manifest_path, manifest)


def _read_shards(shard_files: list[Path]) -> tuple[np.ndarray, list[dict[str, Any]], dict[str, np.ndarray]]:
    """(rows, records, the per-image arrays) of every shard file of `derived_shard`, concatenated in file order."""
    parts = [dict(np.load(path)) for path in shard_files]
    rows = np.concatenate([p["rows"] for p in parts])
    records = [r for p in parts for r in json.loads(str(p["records"]))]
    fields = [f for f in parts[0] if f not in ("rows", "records")]
    return rows, records, {f: np.concatenate([p[f] for p in parts]) for f in fields}


def run_derived_stage(
    kind: str,
    seg_store: Path,
    seg_manifest: Path,
    ds_cfg: dict[str, Any],
    seed: int,
    out_store: Path,
    manifest_path: Path,
    workers: int,
) -> None:
    """Every block holding a row of the built splits on `workers` processes, then the gather (tests and
    benchmarks; the workflow packs the blocks into jobs). Stylization on a GPU runs them in one process: one CUDA
    context on the card instead of one per worker."""
    import tempfile

    import torch

    if kind == "stylized" and torch.cuda.is_available():
        workers = 1

    jobs = derived_jobs(list(zarr.open_group(seg_store, mode="r")["splits"][:]), ds_cfg, kind)
    Path(out_store).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(out_store).parent) as tmp:
        shards = [Path(tmp) / f"{k:05d}.npz" for k in range(len(jobs))]
        run_blocks(
            derived_shard,
            [(kind, seg_store, ds_cfg, seed, blocks, path) for blocks, path in zip(jobs, shards)],
            workers,
            kind,
        )
        derived_gather(kind, seg_store, seg_manifest, shards, ds_cfg, seed, out_store, manifest_path)


def _resize(images: np.ndarray, side: int) -> np.ndarray:
    """(N, H, W, 3) uint8 -> (N, side, side, 3): bicubic up, area down."""
    if images.shape[1] == side:
        return images
    interpolation = cv2.INTER_CUBIC if side > images.shape[1] else cv2.INTER_AREA
    return (
        np.stack([cv2.resize(im, (side, side), interpolation=interpolation) for im in images])
        if len(images)
        else np.zeros((0, side, side, 3), np.uint8)
    )


#: the smallest side `work_side` picks by itself: AdaIN's relu4_1 sees 1/8 of the side (a 32-px image
#: leaves 4x4 features and no shape to keep), and the texture's two example patches need room
MIN_WORK_SIDE = 64


def work_side(image_size: int, work_size: int | None) -> int:
    """Side a derived variant is made at: its `work_size`, or when null the image's own size but at
    least `MIN_WORK_SIDE` (so a config for larger images follows them without setting it)."""
    return int(work_size or max(image_size, MIN_WORK_SIDE))


def _stylize(
    images: np.ndarray,
    labels: np.ndarray,
    ids: np.ndarray,
    splits: np.ndarray,
    classes: list[str],
    ds_cfg: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """AdaIN of each image with the style `choose_style` picks (another class's only on the
    cue-conflict splits), at `work_size`."""
    import torch

    from .adain import AdaIN
    from .styles import CUE_CONFLICT_SPLITS, choose_style, load_styles

    cfg = ds_cfg["stylized"]
    torch.set_num_threads(1)  # parallelism is across shards; one thread keeps the bytes machine-independent
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    # full float32 on a GPU (TF32 rounds products to 10 bits, and differently per card): the store's
    # bytes then differ from a CPU build's only by float ordering
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    styles = load_styles(cfg["styles"], classes, seed)
    n, size = images.shape[:2]
    work = work_side(size, cfg["work_size"])
    out = np.zeros((n, size, size, 3), np.uint8)
    choice = np.full(n, -1, np.int64)
    records: list[dict[str, Any]] = [{} for _ in range(n)]
    for k in range(n):
        try:
            choice[k] = choose_style(styles, int(labels[k]), str(ids[k]), seed, str(splits[k]) in CUE_CONFLICT_SPLITS)
        except SkipItem as exc:
            records[k] = {"skipped": exc.reason}
    ok = choice >= 0
    if ok.any():
        model = AdaIN(cfg["vgg"], cfg["decoder"], device, cfg["alpha"])
        used = np.unique(choice[ok])
        style_images = torch.from_numpy(np.stack([styles.images[s] for s in used])).permute(0, 3, 1, 2).float() / 255
        mean, std = model.style_stats(style_images)  # (U, 512, 1, 1)
        slot = np.searchsorted(used, choice)
        todo = np.nonzero(ok)[0]
        batch = int(cfg["batch_images"])
        for start in range(0, len(todo), batch):
            sel = todo[start : start + batch]
            x = torch.from_numpy(_resize(images[sel], work)).permute(0, 3, 1, 2).float() / 255
            idx = torch.from_numpy(slot[sel]).to(device)
            y = model.stylize(x, mean[idx], std[idx])  # (B, 3, work, work) in [0, 1]
            y = np.rint(y.permute(0, 2, 3, 1).cpu().numpy() * 255).astype(np.uint8)
            out[sel] = _resize(y, size)
    return {
        "images": out,
        "ok": ok.astype(np.uint8),
        "bias_labels": np.where(ok, styles.classes[choice], -1),
        "style_ids": np.array([styles.ids[c] if c >= 0 else "" for c in choice], dtype=str),
        "records": records,
    }


def _texture(
    examples: list[Example],
    source_sides: np.ndarray,
    labels: np.ndarray,
    ids: np.ndarray,
    ds_cfg: dict[str, Any],
    seed: int,
) -> dict[str, Any]:
    """IN-9-Texture of each row from the example patches of its image (`texture_examples`), at
    `work_size` (a photo at its aspect, its shorter side that size), the patches sized by `source_sides`."""
    from .texture_synthesis import TextureJob, make_tool, synthesize

    cfg = ds_cfg["texture"]
    tool = make_tool(cfg)
    n, size = len(examples), int(ds_cfg["image_size"])
    work = work_side(size, cfg["work_size"])
    jobs = []
    for k, (image, aspect) in enumerate(examples):
        p = work_patch_side(int(source_sides[k]), work, cfg)
        big = _resize(image[None], work)[0] if aspect is None else unsquashed(image, aspect, work)
        a, b = example_patches(big, p, name_rng(seed, "texture-patch", ids[k]))
        jobs.append(TextureJob(str(ids[k]), a, b, name_seed(seed, "texture-synthesis", ids[k]) % 2**31, work))
    out = np.zeros((n, size, size, 3), np.uint8)
    ok = np.zeros(n, np.uint8)
    records: list[dict[str, Any]] = [{} for _ in range(n)]
    batch = int(cfg["batch_images"])
    for start in range(0, n, batch):
        for k, result in enumerate(synthesize(jobs[start : start + batch], tool, float(cfg["timeout_s"])), start):
            if isinstance(result, str):
                records[k] = {"skipped": result}
            else:
                out[k], ok[k] = _resize(result[None], size)[0], 1
    return {"images": out, "ok": ok, "bias_labels": labels.astype(np.int64), "records": records}


def _corrupt(
    images: np.ndarray, rows: np.ndarray, seg: zarr.Group, ds_cfg: dict[str, Any], seed: int
) -> dict[str, Any]:
    """The shard's images, each under its (corruption, severity) pair; the pairs are assigned over
    all usable images of each split at once, so a shard needs no other shard's result."""
    cfg = ds_cfg["corrupted"]
    names, severities = corruption_names(cfg["corruptions"]), [int(s) for s in cfg["severities"]]
    check_work_size(int(seg.attrs["image_size"]), cfg.get("work_size"))
    pairs = [(c, s) for c in range(len(names)) for s in severities]
    labels, ids, splits = seg["labels"][:], seg["ids"][:], seg["splits"][:]
    usable = seg["ok"][:].astype(bool)
    pair = np.full(len(ids), -1, np.int64)
    for split in cfg["splits"]:
        members = np.nonzero(usable & (splits == split))[0]
        pair[members] = assign_pairs(labels[members], ids[members], len(pairs), seed)
    n = len(rows)
    out, ok = np.zeros_like(images), np.zeros(n, np.uint8)
    corruption, severity = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    records: list[dict[str, Any]] = [{} for _ in range(n)]
    for k, row in enumerate(rows):
        c, s = pairs[pair[row]]
        corruption[k], severity[k] = c, s
        try:
            out[k], ok[k] = corrupt_image(images[k], names[c], s, str(ids[row]), seed, cfg.get("work_size")), 1
        except SkipItem as exc:
            records[k] = {"skipped": exc.reason}
    return {
        "images": out,
        "ok": ok,
        "bias_labels": labels[rows].astype(np.int64),
        "corruption": corruption,
        "severity": severity,
        "records": records,
    }
