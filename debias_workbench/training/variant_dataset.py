"""`load_variant`: one split of a generated variant store as a map-style PyTorch dataset, for one's
own training code.

    from debias_workbench import load_variant
    train = load_variant("results/datasets/in9/mixed_rand.zarr", "train")
    item = train[0]   # {"image": uint8 (3, H, W), "label": int, "bias_label": int, "id": str, ["mask"]}
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from PIL import Image

from debias_workbench.pipeline.variant_reader import VariantSplit

ImageType = Literal["tensor", "pil"]


class VariantDataset(torch.utils.data.Dataset):
    """The rows of one split of a variant store (`pipeline.variant_reader.VariantSplit`): "image" as a
    uint8 tensor (3, H, W), torchvision's layout, or a PIL image (`image_type`), passed through
    `transform` when given; "label" and "bias_label" (-1: unknown) as ints, "id" (the source image),
    and "mask" (H, W) uint8 tensor where the variant stores masks. A training split of whole photos
    (`train_views: photo`) gives each photo at its aspect, its shorter side the stored side, and its
    "aspect" (width / height): RandomResizedCrop(224) as a `transform` then cuts the authors' views.
    `classes` / `bias_classes` name the label indices."""

    def __init__(
        self,
        store: Path | str,
        split: str = "train",
        image_type: ImageType = "tensor",
        transform: Callable[[Any], Any] | None = None,
    ):
        if image_type not in ("tensor", "pil"):
            raise ValueError(f"image_type {image_type!r}: choose 'tensor' (uint8, 3 x H x W) or 'pil'")
        self.rows = VariantSplit(store, split)
        self.image_type, self.transform = image_type, transform
        self.classes, self.bias_classes = self.rows.classes, self.rows.bias_classes

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.rows[index]
        image: np.ndarray = row["image"]
        item = {
            **row,
            "image": Image.fromarray(image)
            if self.image_type == "pil"
            else torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))),
        }
        if "mask" in row:
            item["mask"] = torch.from_numpy(np.ascontiguousarray(row["mask"]))
        if self.transform is not None:
            item["image"] = self.transform(item["image"])
        return item


def load_variant(
    store: Path | str,
    split: str = "train",
    image_type: ImageType = "tensor",
    transform: Callable[[Any], Any] | None = None,
) -> VariantDataset:
    """One split ("train" or "val") of the variant store at `store` as a PyTorch dataset
    (`VariantDataset`); the store's arrays are checked first (a missing chunk stops, naming the store
    and the command that rebuilds it)."""
    return VariantDataset(store, split, image_type, transform)
