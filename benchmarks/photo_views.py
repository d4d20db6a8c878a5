"""Training views cut from the whole photo, as the authors cut them, against the centre square (issue 51).

    python -m benchmarks.photo_views [--photos DIR] [--views 8] [--seed 0]

Ge et al. pre-train on RandomResizedCrop(224, scale 0.2-1) views of the decoded photo
(moco-non-sem-neg.py:247) and fit the probe on RandomResizedCrop(224) views (scale 0.08-1,
main_lincls.py:250). With `train_views: photo` (config/imagenet100_ssl.yaml) the train split stores
each photo squashed to 256 x 256 with its aspect, and the views are drawn in the photo's proportions
(`Augmenter.photo_draw`) and resampled by `grid_sample`; with `train_views: square` (the default) they
are cut from the stored test image, Resize 256 + CenterCrop 224. On real photos this prints

- the bytes of the original store the pipeline builds from the photos under each (ImageNet-100's
  dataset section: 224 px, crop 0.875, no codec; the photos split train / val by name, 30 % val):
  per split, its images (with the aspects) and its files on disk (masks, lz4, and labels too), and
  the ratio; and the intermediate (segmented) store's files;
- the views' geometry, per crop scale, for the authors' views (torchvision on the decoded photo),
  ours from the photo, ours from the centre square, and the same draw as ours from the photo
  squashed at full resolution (its longer side; what a larger `view_source_size` tends to): the share
  of the photo a view covers, the share of it outside the centre square (what views of the square
  never see), and the view pixels per source pixel (photo pixels for the authors', stored pixels for
  ours: above 1, up-sampled);
- a packaged ImageNet-1k classifier's (EfficientNet-Lite0) top-1 accuracy on the test view and on
  each kind of view (`views` of each per photo and scale), and the authors' minus each of ours,
  paired by photo with its 95 % interval: how different the kinds of view are to a trained network.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch
import yaml
import zarr
from PIL import Image
from torchvision.transforms import RandomResizedCrop
from torchvision.transforms import functional as TF

from debias_workbench.pipeline.imageio import Geometry, TrainPhotos
from debias_workbench.pipeline.segment_stage import run_segment_stage
from debias_workbench.pipeline.sources import list_source_items
from debias_workbench.pipeline.variant_stage import run_variant_stage
from debias_workbench.training.augment import Augmenter
from debias_workbench.training.models import IMAGENET_NORMALIZE, efficientnet_lite0

from .stylize_texture import ROOT

SIZE = 224
SCALES = {"pre-training (0.2-1)": (0.2, 1.0), "probe (0.08-1)": (0.08, 1.0)}
#: ImageNet-100's dataset section, the stores of which the bytes are measured
DATASET = yaml.safe_load((ROOT / "config" / "imagenet100_ssl.yaml").read_text())["datasets"]["imagenet100"]
PHOTOS = TrainPhotos.of(DATASET)
GEOMETRY = Geometry.of(DATASET)


def photos_with_labels(folder: Path) -> list[tuple[Image.Image, int]]:
    """Every photo under `folder` (RGB) with its ImageNet-1k index, read from the `<wnid>_*` file name."""
    from timm.data import ImageNetInfo

    index = {wnid: i for i, wnid in enumerate(ImageNetInfo().label_names())}
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
    return [(Image.open(p).convert("RGB"), index[p.name.split("_")[0]]) for p in paths]


def disk_bytes(folder: Path) -> int:
    """Bytes of every file under `folder`."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def store_bytes(folder: Path, views: str, work: Path) -> dict[str, dict[str, int]]:
    """{split: {"images": bytes of its images (and aspects), "disk": of its files, "n": images}, and
    "segmented": {"disk": the intermediate store's files}} of the original store built from the
    IN-9-layout `folder` under `train_views: views`."""
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    cfg = copy.deepcopy(DATASET) | {"classes": classes, "train_views": views, "variants": ["original"]}
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(folder), "val_fraction": 0.3}}
    seg, out = work / views / "segmented.zarr", work / views / "original.zarr"
    items = list_source_items(cfg["source"], classes)
    run_segment_stage(items, cfg, 0, seg, seg.parent / "quality.jsonl", seg.parent / "segmented.manifest.json", 1)
    run_variant_stage(seg, seg.parent / "segmented.manifest.json", "original", cfg, 0, out,
                      out.parent / "original.manifest.json", 1)
    group = zarr.open_group(str(out), mode="r")
    sizes = {"segmented": {"disk": disk_bytes(seg), "n": zarr.open_group(str(seg), mode="r")["ids"].shape[0]}}
    for split in ("train", "val"):
        images = sum(group[split][name].nbytes for name in ("images", "aspects") if name in group[split])
        sizes[split] = {"images": images, "disk": disk_bytes(out / split), "n": group[split]["labels"].shape[0]}
    return sizes


def print_bytes(folder: Path) -> None:
    """The bytes of the two stores (`store_bytes`) per split and whole, and their ratio."""
    with tempfile.TemporaryDirectory() as work:
        square, photo = (store_bytes(folder, views, Path(work)) for views in ("square", "photo"))
    for split, parts, kinds in (("train", ("train",), ("images", "disk")), ("val", ("val",), ("images", "disk")),
                                ("whole store", ("train", "val"), ("images", "disk")),
                                ("segmented store", ("segmented",), ("disk",))):
        n = sum(square[s]["n"] for s in parts)
        for what in kinds:
            a, b = (sum(sizes[s][what] for s in parts) for sizes in (square, photo))
            print(f"bytes, {split} ({n} images), {what}: square {a:,} ({a / n:,.0f} per image), photo {b:,} "
                  f"({b / n:,.0f} per image): {b / a:.3f}x")


def test_view(photo: Image.Image) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """The stored test image, uint8 (224, 224, 3), and its window (top, left, side) in the photo."""
    pixels = np.asarray(photo)
    return torch.from_numpy(GEOMETRY.apply(pixels, SIZE)), GEOMETRY.window(*pixels.shape[:2], SIZE)


def covered(boxes: list[tuple[float, float, float, float]], photo: Image.Image,
            window: tuple[int, int, int]) -> dict[str, list[float]]:
    """The geometry records of views at `boxes` (top, left, height, width in photo pixels): the share
    of the photo each covers and the share of it outside the centre square `window`."""
    width, height = photo.size
    top, left, side = window
    out: dict[str, list[float]] = {"covers": [], "outside": []}
    for i, j, h, w in boxes:
        inside = max(0, min(i + h, top + side) - max(i, top)) * max(0, min(j + w, left + side) - max(j, left))
        out["covers"].append(h * w / (width * height))
        out["outside"].append(1 - inside / (h * w))
    return out


def authors_views(photo: Image.Image, scale: tuple[float, float], n: int, window: tuple[int, int, int],
                  mean: list[float], std: list[float]) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """n RandomResizedCrop views of the photo (torchvision, as the authors; no flip), normalised
    (n, 3, 224, 224), with their `covered` records and view pixels per photo pixel."""
    boxes = [RandomResizedCrop.get_params(photo, scale, (3 / 4, 4 / 3)) for _ in range(n)]
    views = [TF.normalize(TF.to_tensor(TF.resized_crop(photo, i, j, h, w, [SIZE, SIZE], antialias=True)), mean, std)
             for i, j, h, w in boxes]
    return torch.stack(views), {**covered(boxes, photo, window), "magnification": [SIZE / (h * w) ** 0.5
                                                                                   for _, _, h, w in boxes]}


def photo_views(photo: Image.Image, scale: tuple[float, float], n: int, window: tuple[int, int, int],
                mean: list[float], std: list[float], g: torch.Generator,
                side: int | None = None) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """n views of the photo as `train_views: photo` stores and cuts it (squashed to 256 with its aspect,
    or to `side`; `Augmenter.photo_draw`, no flip), normalised (n, 3, 224, 224), with their `covered`
    records and view pixels per stored pixel."""
    store = PHOTOS if side is None else TrainPhotos(side, PHOTOS.fraction)
    squashed, aspect = store.photo(np.asarray(photo))
    crop = Augmenter(mean, std, scale)
    aspects = torch.full((n,), aspect)
    theta = crop.sample(n, g, aspects)
    views = Augmenter.apply(crop.normalize(torch.from_numpy(squashed)[None].expand(n, -1, -1, -1)), theta, SIZE)
    width, height = photo.size
    sx, sy, cx, cy = theta[:, 0, 0].abs(), theta[:, 1, 1], theta[:, 0, 2], theta[:, 1, 2]
    boxes = [((float(y) - float(h) + 1) / 2 * height, (float(x) - float(w) + 1) / 2 * width, float(h) * height,
              float(w) * width) for x, y, w, h in zip(cx, cy, sx, sy)]
    return views, {**covered(boxes, photo, window),
                   "magnification": [SIZE / (store.side * float(w * h) ** 0.5) for w, h in zip(sx, sy)]}


def square_views(square: torch.Tensor, photo: Image.Image, scale: tuple[float, float], n: int, mean: list[float],
                 std: list[float], g: torch.Generator) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """n views of the stored test square (`train_views: square`: the `Augmenter`'s crop, no flip),
    normalised (n, 3, 224, 224), with the same records (view pixels per stored pixel)."""
    crop = Augmenter(mean, std, scale)
    theta = crop.sample(n, g)
    views = Augmenter.apply(crop.normalize(square.unsqueeze(0).expand(n, -1, -1, -1)), theta)
    area = (theta[:, 0, 0].abs() * theta[:, 1, 1]).tolist()                # share of the square
    side = GEOMETRY.fraction * min(photo.size)
    return views, {"covers": [a * side ** 2 / (photo.size[0] * photo.size[1]) for a in area],
                   "outside": [0.0] * n, "magnification": [1 / a ** 0.5 for a in area]}


@torch.no_grad()
def hit_shares(model: torch.nn.Module, views: list[torch.Tensor], labels: list[int]) -> torch.Tensor:
    """(photos,) the share of each photo's views (n, 3, H, W) that `model` classifies as its label."""
    return torch.tensor([float((model(v.contiguous(memory_format=torch.channels_last)).argmax(1) == y).float().mean())
                         for v, y in zip(views, labels)])


def paired(name: str, who: str, diff: torch.Tensor) -> None:
    """Print the mean of the per-photo differences (points) with its 95 % interval over the photos."""
    half = 1.96 * float(diff.std()) / len(diff) ** 0.5
    print(f"{name}: authors' views - {who}, paired by photo: {float(diff.mean()):+.1f} points "
          f"(95 % interval {float(diff.mean()) - half:+.1f} to {float(diff.mean()) + half:+.1f})")


def measure(photos: list[tuple[Image.Image, int]], n: int, seed: int) -> None:
    """Print the views' geometry and the classifier's accuracies per kind of view (module docstring)."""
    model = efficientnet_lite0().eval().to(memory_format=torch.channels_last)
    mean, std = IMAGENET_NORMALIZE["efficientnet_lite0"]
    labels = [label for _, label in photos]
    tests = [test_view(photo) for photo, _ in photos]
    test = [Augmenter(mean, std).normalize(square.unsqueeze(0)) for square, _ in tests]
    print(f"{len(photos)} photos; EfficientNet-Lite0 top-1 on the test view (Resize 256 + CenterCrop 224): "
          f"{100 * float(hit_shares(model, test, labels).mean()):.1f} %")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    for name, scale in SCALES.items():
        kinds = {"the photo (authors)": [authors_views(p, scale, n, w, mean, std) for (p, _), (_, w) in zip(photos, tests)],
                 "the photo (ours, train_views: photo)": [photo_views(p, scale, n, w, mean, std, g)
                                                           for (p, _), (_, w) in zip(photos, tests)],
                 "the centre square (ours, train_views: square)": [square_views(s, p, scale, n, mean, std, g)
                                                                   for (p, _), (s, _) in zip(photos, tests)],
                 "the photo at full resolution (our draw)": [photo_views(p, scale, n, w, mean, std, g, max(p.size))
                                                             for (p, _), (_, w) in zip(photos, tests)]}
        hits = {}
        for who, made in kinds.items():
            record = {k: statistics.mean(v for _, geo in made for v in geo[k]) for k in made[0][1]}
            hits[who] = hit_shares(model, [v for v, _ in made], labels)
            print(f"{name} views of {who}: cover {100 * record['covers']:.1f} % of the photo, "
                  f"{100 * record['outside']:.1f} % outside the centre square, {record['magnification']:.2f} view px "
                  f"per source px; top-1 {100 * float(hits[who].mean()):.1f} %")
        authors = hits.pop("the photo (authors)")
        for who, ours in hits.items():
            paired(name, who, 100 * (authors - ours))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--views", type=int, default=8, help="views of each kind per photo and crop scale")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print_bytes(args.photos)
    measure(photos_with_labels(args.photos), args.views, args.seed)


if __name__ == "__main__":
    main()
