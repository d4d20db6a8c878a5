"""Training views cut from the stored centre square against views cut from the whole photo (issue 51).

    python -m benchmarks.photo_views [--photos DIR] [--views 8] [--seed 0]

Ge et al. pre-train on RandomResizedCrop(224, scale 0.2-1) views of the decoded photo
(moco-non-sem-neg.py:247) and fit the probe on RandomResizedCrop(224) views (scale 0.08-1,
main_lincls.py:250). The ImageNet-100 stores hold the test geometry, Resize 256 + CenterCrop 224
(`geometry: crop`, `crop_fraction: 0.875`), and our views are cut from that square (the
`Augmenter`'s crop, bilinear `grid_sample`). On real photos this prints

- the bytes per image of today's store (224 x 224 x 3 uint8, `image_codec: none`) and of two stores
  from which views could be cut as the authors cut them: each photo at its aspect with its shorter
  side at 256 (ragged rows), and each photo squashed to 256 x 256 with its aspect beside it (one
  fixed shape, the crops drawn in photo proportions);
- the views' geometry, per crop scale: the share of the photo a view covers, the share of an
  authors' view that lies outside the centre square (what our views never see), and the view
  pixels per source pixel (above 1: the view is up-sampled);
- a packaged ImageNet-1k classifier's (EfficientNet-Lite0) top-1 accuracy on the test view, on
  the authors' views and on ours (`views` of each kind per photo and scale), and their difference
  paired by photo: how different the two kinds of view are to a trained network.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import RandomResizedCrop
from torchvision.transforms import functional as TF

from debias_workbench.pipeline.imageio import Geometry
from debias_workbench.training.data import Augmenter
from debias_workbench.training.models import IMAGENET_NORMALIZE, efficientnet_lite0

from .stylize_texture import ROOT

SIZE, SHORT_SIDE, FRACTION = 224, 256, 0.875
SCALES = {"pre-training (0.2-1)": (0.2, 1.0), "probe (0.08-1)": (0.08, 1.0)}


def photos_with_labels(folder: Path) -> list[tuple[Image.Image, int]]:
    """Every photo under `folder` (RGB) with its ImageNet-1k index, read from the `<wnid>_*` file name."""
    from timm.data import ImageNetInfo

    index = {wnid: i for i, wnid in enumerate(ImageNetInfo().label_names())}
    paths = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (".jpeg", ".jpg", ".png"))
    return [(Image.open(p).convert("RGB"), index[p.name.split("_")[0]]) for p in paths]


def store_bytes(photos: list[Image.Image]) -> dict[str, float]:
    """Bytes per image of today's store and of the two photo stores (module docstring), uint8 RGB."""
    today = SIZE * SIZE * 3
    ragged = [SHORT_SIDE * round(SHORT_SIDE * max(p.size) / min(p.size)) * 3 for p in photos]
    return {"today (224 x 224)": today, "shorter side 256, at the aspect": statistics.mean(ragged),
            "squashed 256 x 256 + aspect": SHORT_SIDE * SHORT_SIDE * 3 + 4}


def centre_square(photo: Image.Image) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """The stored image, uint8 (224, 224, 3) as the store makes it, and its window (top, left, side) in the photo."""
    geometry = Geometry("crop", FRACTION)
    pixels = np.asarray(photo)
    return torch.from_numpy(geometry.apply(pixels, SIZE)), geometry.window(*pixels.shape[:2], SIZE)


def authors_views(photo: Image.Image, scale: tuple[float, float], n: int, window: tuple[int, int, int],
                  mean: list[float], std: list[float]) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """n RandomResizedCrop views of the photo (torchvision, as the authors; no flip), normalised
    (n, 3, 224, 224), and each view's share of the photo, share outside the centre square, and view
    pixels per photo pixel."""
    width, height = photo.size
    top, left, side = window
    views, geometry = [], {"covers": [], "outside": [], "magnification": []}
    for _ in range(n):
        i, j, h, w = RandomResizedCrop.get_params(photo, scale, (3 / 4, 4 / 3))
        crop = TF.resized_crop(photo, i, j, h, w, [SIZE, SIZE], antialias=True)
        views.append(TF.normalize(TF.to_tensor(crop), mean, std))
        inside = max(0, min(i + h, top + side) - max(i, top)) * max(0, min(j + w, left + side) - max(j, left))
        geometry["covers"].append(h * w / (width * height))
        geometry["outside"].append(1 - inside / (h * w))
        geometry["magnification"].append(SIZE / (h * w) ** 0.5)
    return torch.stack(views), geometry


def our_views(square: torch.Tensor, photo: Image.Image, scale: tuple[float, float], n: int, mean: list[float],
              std: list[float], g: torch.Generator) -> tuple[torch.Tensor, dict[str, list[float]]]:
    """n views of the stored square (the `Augmenter`'s crop, as pre-training and the probe cut them;
    no flip), normalised (n, 3, 224, 224), with the same geometry records as `authors_views`
    (magnification in stored pixels, the finest detail the store holds)."""
    crop = Augmenter(mean, std, scale)
    theta = crop.sample(n, g)                                               # (n, 2, 3) half-sides sx, sy
    views = Augmenter.apply(crop.normalize(square.unsqueeze(0).expand(n, -1, -1, -1)), theta)
    area = (theta[:, 0, 0].abs() * theta[:, 1, 1]).tolist()                # share of the square
    side = FRACTION * min(photo.size)
    return views, {"covers": [a * side ** 2 / (photo.size[0] * photo.size[1]) for a in area],
                   "outside": [0.0] * n, "magnification": [1 / a ** 0.5 for a in area]}


@torch.no_grad()
def hit_shares(model: torch.nn.Module, views: list[torch.Tensor], labels: list[int]) -> torch.Tensor:
    """(photos,) the share of each photo's views (n, 3, H, W) that `model` classifies as its label."""
    return torch.tensor([float((model(v.contiguous(memory_format=torch.channels_last)).argmax(1) == y).float().mean())
                         for v, y in zip(views, labels)])


def measure(photos: list[tuple[Image.Image, int]], n: int, seed: int) -> None:
    """Print the bytes, the views' geometry and the classifier's accuracies (module docstring), the
    difference of the two kinds of view paired by photo with its 95 % interval over the photos."""
    model = efficientnet_lite0().eval().to(memory_format=torch.channels_last)
    mean, std = IMAGENET_NORMALIZE["efficientnet_lite0"]
    labels = [label for _, label in photos]
    for kind, size in store_bytes([p for p, _ in photos]).items():
        print(f"bytes per image, {kind}: {size:,.0f} ({size / (SIZE * SIZE * 3):.2f}x today's)")
    squares = [centre_square(photo) for photo, _ in photos]
    test = [Augmenter(mean, std).normalize(square.unsqueeze(0)) for square, _ in squares]
    print(f"{len(photos)} photos; EfficientNet-Lite0 top-1 on the test view (Resize 256 + CenterCrop 224): "
          f"{100 * float(hit_shares(model, test, labels).mean()):.1f} %")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    for name, scale in SCALES.items():
        theirs = [authors_views(photo, scale, n, window, mean, std) for (photo, _), (_, window) in zip(photos, squares)]
        ours = [our_views(square, photo, scale, n, mean, std, g) for (photo, _), (square, _) in zip(photos, squares)]
        hits = []
        for who, made in (("the photo (authors)", theirs), ("the centre square (ours)", ours)):
            record = {k: statistics.mean(v for _, geo in made for v in geo[k]) for k in made[0][1]}
            hits.append(hit_shares(model, [v for v, _ in made], labels))
            print(f"{name} views of {who}: cover {100 * record['covers']:.1f} % of the photo, "
                  f"{100 * record['outside']:.1f} % outside the centre square, {record['magnification']:.2f} view px "
                  f"per source px; top-1 {100 * float(hits[-1].mean()):.1f} %")
        diff = 100 * (hits[0] - hits[1])
        half = 1.96 * float(diff.std()) / len(diff) ** 0.5
        print(f"{name}: authors' views - ours, paired by photo: {float(diff.mean()):+.1f} points "
              f"(95 % interval {float(diff.mean()) - half:+.1f} to {float(diff.mean()) + half:+.1f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--views", type=int, default=8, help="views of each kind per photo and crop scale")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    measure(photos_with_labels(args.photos), args.views, args.seed)


if __name__ == "__main__":
    main()
