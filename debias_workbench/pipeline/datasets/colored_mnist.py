"""Colored MNIST (LfF protocol, `pipeline.stroke_colours`) as variant stores in the workbench's format.

Variants: `conflict_<p>` for each entry p (%) of `conflict_percents`: a train split where p % of
each class wears another class's colour, and a val split of held-out training digits whose
colours are independent of the digit (as the group-DRO Waterbirds recipe balances its val split:
a split with ~0 conflicting samples would select the most colour-reliant checkpoint); and
`unbiased` (val split only: the test digits, colours independent of the digit). `bias_labels` is
the colour index.
Images are 28x28 RGB uint8.

No ONLY_BG_T background store (`offers`: CLAD cannot run here): the background is black in every image
and the bias sits on the strokes themselves, so a positive made of the anchor's strokes on another
image's background would be the anchor itself, its bias included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from debias_workbench.core.seeding import name_rng

from ..stroke_colours import colour_strokes, conflicting_colours, independent_colours
from .biased_mnist import copies_revision, idx_paths, load_digits, mnist_images
from .conflict_ratio import ConflictRatioFamily
from .labelled_store import write_labelled_store


def split_train_val(
    images: np.ndarray, labels: np.ndarray, val_fraction: float, seed: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The training digits parted into train and val (a seeded share `val_fraction` of each class)."""
    val = np.zeros(len(labels), bool)
    for y in np.unique(labels):
        members = name_rng(seed, "colored_mnist_val", int(y)).permutation(np.flatnonzero(labels == y))
        val[members[: int(round(val_fraction * len(members)))]] = True
    return {"train": (images[~val], labels[~val]), "val": (images[val], labels[val])}


class ColoredMnistFamily(ConflictRatioFamily):
    name = "colored_mnist"
    licence = (
        "MNIST digits (LeCun, Cortes & Burges), coloured as LfF's Colored MNIST (Nam et al. 2020): "
        "MNIST is distributed under CC BY-SA 3.0"
    )
    val_split = "colours independent of the digit, as the group-DRO Waterbirds recipe balances its val split"
    bias_free_val = True
    offers = {"biased_network": "the 1x1 SimpleConvNet (simple_cnn1): it sees colour, never a stroke's shape"}

    @classmethod
    def revision_of(cls, ds_cfg: dict[str, Any]) -> int:
        return cls.revision + copies_revision(ds_cfg)

    def class_count(self, ds_cfg: dict[str, Any]) -> int:
        return 10

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        return idx_paths(ds_cfg)

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        return mnist_images(ds_cfg)

    def build(self, ds_cfg: dict[str, Any], seed: int, out: Path, variant: str, percent: float | None) -> None:
        digits = load_digits(ds_cfg, seed)
        sigma = float(ds_cfg["colour_std"])
        # split -> (images, labels, colours, percent of bias-conflicting samples or None)
        parts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, float | None]]
        if percent is None:
            images, labels = digits["test"]
            parts = {"val": (images, labels, independent_colours(len(labels), f"{seed}/unbiased"), None)}
        else:
            splits = split_train_val(*digits["train"], float(ds_cfg["val_fraction"]), seed)
            images, labels = splits["train"]
            parts = {
                "train": (
                    images,
                    labels,
                    conflicting_colours(labels, percent / 100, f"{seed}/{variant}/train"),
                    percent,
                )
            }
            images, labels = splits["val"]
            parts["val"] = (images, labels, independent_colours(len(labels), f"{seed}/{variant}/val"), None)
        write_labelled_store(
            out,
            self.name,
            variant,
            ds_cfg,
            seed,
            {
                split: {
                    "images": colour_strokes(images, colours, sigma, f"{seed}/{variant}/{split}"),
                    "labels": labels,
                    "bias_labels": colours,
                    "ids": np.array([f"{split}/{i:05d}" for i in range(len(labels))]),
                    "manifest": {"conflict_percent": percent, "conflicting": int((colours != labels).sum())},
                }
                for split, (images, labels, colours, percent) in parts.items()
            },
        )
