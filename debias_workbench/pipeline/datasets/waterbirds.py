"""Waterbirds from CUB-200-2011 and Places365 folders (`pipeline.bird_composites`), at Park et al.'s four
bias-conflicting ratios.

Variants: `conflict_<p>` for each p (%) of `conflict_percents`: the train split with p % of each
label on the other place type (the group-DRO recipe's confounder 0.95 is p = 5) and the val
split with half on each; `unbiased`: the test split (CUB's test images), half on each.
`bias_labels` is the place type (0 land, 1 water).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..bird_composites import list_birds, make_split, split_birds
from .base import BenchmarkMetric
from .conflict_ratio import ConflictRatioFamily
from .labelled_store import write_labelled_store

CLASSES, PLACE_TYPES = ["landbird", "waterbird"], ["land", "water"]


class WaterbirdsFamily(ConflictRatioFamily):
    """Its val split is balanced (half of each label on each place type), as in the recipe."""

    name = "waterbirds"
    licence = (
        "birds from CUB-200-2011 (Caltech) pasted on Places365 scenes (MIT CSAIL), as Sagawa et al.'s "
        "Waterbirds: both are for non-commercial research and educational use"
    )
    val_split = "half of each class on each place type (the group-DRO recipe)"
    bias_free_val = True
    offers = {
        "biased_network": "BagNet18, a small-receptive-field G as Park et al.'s ReBias baseline: biased towards local "
        "texture, not by design towards the place type"
    }

    def benchmark_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> tuple[BenchmarkMetric, ...]:
        """Worst-group accuracy first (group DRO's measure), then the unbiased test set's accuracy."""
        return (
            BenchmarkMetric("worst-group accuracy", "unbiased", "worst_group_accuracy"),
            BenchmarkMetric("unbiased accuracy", "unbiased"),
        )

    def class_count(self, ds_cfg: dict[str, Any]) -> int:
        return len(CLASSES)

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        return [str(Path(ds_cfg[key]).expanduser()) for key in ("cub_root", "segmentations", "places_root")]

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        return 4_795 if split == "train" else 5_794  # CUB's train / test images

    def build(self, ds_cfg: dict[str, Any], seed: int, out: Path, variant: str, percent: float | None) -> None:
        splits = split_birds(list_birds(Path(ds_cfg["cub_root"]).expanduser()), float(ds_cfg["val_fraction"]), seed)
        if percent is None:
            plan = {"val": (splits["test"], 0.5)}
        else:
            plan = {"train": (splits["train"], percent / 100), "val": (splits["val"], 0.5)}
        parts = {}
        for split, (birds, other_share) in plan.items():
            arrays, skipped = make_split(ds_cfg, birds, other_share, seed, f"waterbirds_place_type/{variant}/{split}")
            parts[split] = {
                **arrays,
                "manifest": {"inputs": len(birds), "skipped": skipped, "other_place_share": other_share},
            }
        write_labelled_store(out, self.name, variant, ds_cfg, seed, parts, CLASSES, PLACE_TYPES)
