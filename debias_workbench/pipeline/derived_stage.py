"""IN-9 variants made image by image by a model or an external tool, per shard then gathered:

- `stylized` (Stylized IN-9): AdaIN with a style of a class drawn from all classes on train (the
  texture says nothing about the label) and from the other classes on val (`pipeline.adain`,
  `pipeline.styles`); `bias_labels` = the style's class, `style_ids` = the style's id. Its val
  split is the cue-conflict set of the shape bias (shape of class A, texture of class B != A).
- `texture` (IN-9-Texture, Ge et al. 2021 Sec. 2.2): a texture synthesized from the image's
  central patch and one random patch (`pipeline.texture_synthesis`), sized by the source photo's
  side as the authors cut them from the photo (`work_patch_side`); `bias_labels` = the label. Under
  `train_views: photo` the train split's patches (the negatives of MoCo-v2 + texture) are cut from
  the whole photo at its aspect, as the authors' from the decoded photo; the val split's from the
  stored square (the test image). The textures are squares at the image size either way.
- `corrupted` (IN-9-C): the image under one ImageNet-C (corruption, severity) pair, the pairs
  balanced per class (`pipeline.corruptions`); `bias_labels` = the label, `corruption` (index
  into the store's `corruptions` attribute) and `severity` per image.

The shards are the segmentation's (`block_images` rows of the intermediate store each), so a
cluster spreads them over nodes; every choice is seeded by the image's id and every batch is
fixed by the data, so the stores' bytes do not depend on how the shards were scheduled. The
first two run at `work_size` (images are resized to it and back; null: the image size, at least
64 px, `work_side`).
"""

from __future__ import annotations

import json
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
from .store import atomic_store, create_array

DERIVED = ("stylized", "texture", "corrupted")
#: per-image arrays a kind stores beside images, labels, bias labels and ids
EXTRA_FIELDS = {"stylized": ("style_ids",), "corrupted": ("corruption", "severity")}


def derived_shard(kind: str, seg_store: Path, ds_cfg: dict[str, Any], seed: int, shard: int, out: Path) -> None:
    """Make `kind`'s images of one shard's usable rows (of the configured splits) into `out` (.npz)."""
    worker_setup()
    seg = zarr.open_group(seg_store, mode="r")
    block = int(ds_cfg["block_images"])
    lo = shard * block
    hi = min(seg["ids"].shape[0], lo + block)
    cfg = ds_cfg[kind]
    if kind != "texture" and "train" in cfg["splits"] and TrainPhotos.of(ds_cfg) is not None:
        raise PipelineError(
            f"{kind}'s train split would be cut from the stored square: under train_views: photo "
            f"only original and texture make a training split; set {kind}.splits: [val]"
        )
    splits = seg["splits"][lo:hi]
    wanted = np.isin(splits, cfg["splits"]) & seg["ok"][lo:hi].astype(bool)
    rows = lo + np.nonzero(wanted)[0]
    images, labels, ids = seg["images"][lo:hi][rows - lo], seg["labels"][:][rows], seg["ids"][:][rows]
    classes = list(seg.attrs["classes"])
    if kind == "corrupted":
        result = _corrupt(images, rows, seg, ds_cfg, seed)
    elif kind == "stylized":
        result = _stylize(images, labels, ids, splits[rows - lo], classes, ds_cfg, seed)
    else:
        if "source_sides" not in seg:
            raise PipelineError(
                f"{seg_store} predates the photos' sides the texture variant needs; delete it and rerun"
            )
        result = _texture(*texture_examples(seg, rows, images, ds_cfg), labels, ids, ds_cfg, seed)
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, rows=rows, records=np.array(json.dumps(result.pop("records"))), **result)


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
    parts = [dict(np.load(path)) for path in shard_files]
    rows = np.concatenate([p["rows"] for p in parts])
    records = [r for p in parts for r in json.loads(str(p["records"]))]
    fields = [f for f in parts[0] if f not in ("rows", "records")]
    data = {f: np.concatenate([p[f] for p in parts]) for f in fields}
    size = int(seg.attrs["image_size"])
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
            _write_split(group.create_group(split), kind, seg, rows[made], data, made, ds_cfg)
    write_json(manifest_path, manifest)


def _write_split(
    sub: zarr.Group,
    kind: str,
    seg: zarr.Group,
    source_rows: np.ndarray,
    data: dict[str, np.ndarray],
    made: np.ndarray,
    ds_cfg: dict[str, Any],
) -> None:
    """One split's arrays of the gathered store: the shards' made images (`data[...][made]`) with the
    labels and ids of their `source_rows` in the segmented store `seg`, and the kind's `EXTRA_FIELDS`.
    Kept apart from the gather's bookkeeping (manifest, attributes): this is the store's layout."""
    n, size = len(source_rows), int(seg.attrs["image_size"])
    one = max(n, 1)
    images = create_array(
        sub, "images", (n, size, size, 3), np.uint8, int(ds_cfg["chunk_images"]), codec=ds_cfg["image_codec"]
    )
    images[:] = data["images"][made]
    create_array(sub, "labels", (n,), np.int64, one, one)[:] = seg["labels"][:][source_rows]
    create_array(sub, "bias_labels", (n,), np.int64, one, one)[:] = data["bias_labels"][made]
    create_array(sub, "ids", (n,), str, one, one)[:] = seg["ids"][:][source_rows]
    for field in EXTRA_FIELDS.get(kind, ()):
        values = data[field][made]
        create_array(sub, field, (n,), str if values.dtype.kind == "U" else values.dtype, one, one)[:] = values


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
    """Every shard on `workers` processes, then the gather (tests and benchmarks; the workflow
    runs one job per shard). Stylization on a GPU runs its shards in one process: one CUDA context
    on the card instead of one per worker."""
    import tempfile

    import torch

    if kind == "stylized" and torch.cuda.is_available():
        workers = 1

    n = zarr.open_group(seg_store, mode="r")["ids"].shape[0]
    count = -(-n // int(ds_cfg["block_images"]))
    Path(out_store).parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=Path(out_store).parent) as tmp:
        shards = [Path(tmp) / f"{k:05d}.npz" for k in range(count)]
        run_blocks(
            derived_shard, [(kind, seg_store, ds_cfg, seed, k, path) for k, path in enumerate(shards)], workers, kind
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


def patch_sides(side: int, cfg: dict[str, Any]) -> int:
    """Side of the two example patches: `patch` (96), `small_patch` (48) when the image is under
    two patches wide, half the image when it is under two small patches wide."""
    for p in (int(cfg["patch"]), int(cfg["small_patch"])):
        if side >= 2 * p:
            return p
    return max(2, side // 2)


def work_patch_side(source_side: int, work: int, cfg: dict[str, Any]) -> int:
    """The example patches' side in a `work`-px image of a photo whose shorter side was
    `source_side` px: `patch_sides` of the photo, scaled, so a patch covers the share of the
    object the authors' patches cut from the photo cover (a 96-px patch of a 350-px photo is
    61 px of a 224-px store, not 96)."""
    return max(2, min(work // 2, round(patch_sides(source_side, cfg) * work / source_side)))


def example_patches(image: np.ndarray, p: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The central p x p patch of `image` (H, W, 3) and one p x p patch at a uniformly random position."""
    height, width = image.shape[:2]
    cy, cx = (height - p) // 2, (width - p) // 2
    y, x = rng.integers(0, np.array([height - p + 1, width - p + 1]))
    return image[cy : cy + p, cx : cx + p], image[y : y + p, x : x + p]


#: a row's example image: the stored square (aspect None) or a training photo squashed, with its aspect
Example = tuple[np.ndarray, float | None]


def texture_examples(
    seg: zarr.Group, rows: np.ndarray, images: np.ndarray, ds_cfg: dict[str, Any]
) -> tuple[list[Example], np.ndarray]:
    """(the image each row's example patches are cut from, the photo pixels its shorter side spans):
    the stored square (`images`) and `source_sides`; under `train_views: photo` a training row's whole
    photo (`photos`, squashed, with its aspect) and the photo's shorter side."""
    examples: list[Example] = [(image, None) for image in images]
    sides = seg["source_sides"][:][rows]
    if TrainPhotos.of(ds_cfg) is None:
        return examples, sides
    shapes = seg["photo_shapes"][:][rows]
    for k in np.nonzero(seg["splits"][:][rows] == "train")[0]:
        height, width = shapes[k]
        examples[k], sides[k] = (seg["photos"][int(rows[k])], width / height), min(height, width)
    return examples, sides


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
