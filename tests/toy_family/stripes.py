"""The toy family: stripes whose direction is the class (horizontal, vertical) and whose colour (red, green) is
the bias, Colored MNIST's scheme (Nam et al. 2020) at its smallest. Variant `biased`: a train and a val split
where `conflict_percent` % of each class wears the other class's colour; `unbiased` (a val split only): each
class half in each colour. Its benchmark is judged as Colored MNIST's, by unbiased and bias-conflicting
accuracy; a 1x1 network sees each pixel's colour and never a stripe's direction, so it offers ReBias's G."""

from __future__ import annotations

from typing import Any

import numpy as np

from debias_workbench.core.seeding import name_rng
from debias_workbench.pipeline.datasets.base import (
    UNBIASED_TITLE,
    BenchmarkMetric,
    CapabilityCheck,
    DatasetFamily,
    StepJob,
)
from debias_workbench.pipeline.datasets.labelled_store import write_labelled_store

CLASSES = ["horizontal", "vertical"]
COLOURS = ["red", "green"]
BIASED, UNBIASED = "biased", "unbiased"


def stripes(labels: np.ndarray, colours: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    """(N, size, size, 3) uint8: every other row (label 0) or column (label 1) lit in the colour's channel, at a
    seeded phase and brightness per image."""
    images = np.zeros((len(labels), size, size, 3), np.uint8)
    phases, levels = rng.integers(0, 2, len(labels)), rng.integers(128, 256, len(labels))
    for i, (label, colour) in enumerate(zip(labels, colours)):
        lit = (np.arange(size) + phases[i]) % 2 == 0
        if label == 0:
            images[i, lit, :, colour] = levels[i]
        else:
            images[i, :, lit, colour] = levels[i]
    return images


def colours_of(labels: np.ndarray, conflict_share: float, rng: np.random.Generator) -> np.ndarray:
    """Each label's own colour index, but for exactly round(`conflict_share` x n) of each class's n rows (the
    seeded choice), which take the other colour."""
    colours = labels.copy()
    for y in np.unique(labels):
        members = np.flatnonzero(labels == y)
        chosen = rng.permutation(members)[: int(round(conflict_share * len(members)))]
        colours[chosen] = 1 - y
    return colours


class StripesFamily(DatasetFamily):
    name = "toy_stripes"
    headline = (UNBIASED,)
    column_titles = {UNBIASED: UNBIASED_TITLE}
    val_split = "the training's colour bias"
    offers = {"biased_network": "a 1x1 network (simple_cnn1): it sees each pixel's colour, never a stripe's direction"}

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return [BIASED, UNBIASED]

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        return {"valid": train_variant, UNBIASED: UNBIASED}

    def train_variant_problem(self, ds_cfg: dict[str, Any], variant: str) -> str:
        return "holds a val split only (the unbiased test set)" if variant == UNBIASED else ""

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        return True

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        return len(CLASSES) * int(ds_cfg["images_per_class"])

    def class_count(self, ds_cfg: dict[str, Any]) -> int:
        return len(CLASSES)

    def benchmark_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> tuple[BenchmarkMetric, ...]:
        return (
            BenchmarkMetric("unbiased accuracy", UNBIASED),
            BenchmarkMetric("bias-conflicting accuracy", UNBIASED, "conflicting_accuracy"),
        )

    def capability_check(self, ds_cfg: dict[str, Any], train_variant: str) -> CapabilityCheck | None:
        return CapabilityCheck(BenchmarkMetric("unbiased accuracy", UNBIASED), "the stripes' direction")

    def build_variant(self, job: StepJob) -> None:
        variant, ds_cfg = self.known_variant(job), job.ds_cfg
        n = int(ds_cfg["images_per_class"])
        labels = np.repeat(np.arange(len(CLASSES)), n)
        share = float(ds_cfg["conflict_percent"]) / 100 if variant == BIASED else 0.5
        splits = {}
        for split in ("train", "val") if variant == BIASED else ("val",):
            rng = name_rng(job.seed, self.name, variant, split)
            colours = colours_of(labels, share, rng)
            splits[split] = {
                "images": stripes(labels, colours, int(ds_cfg["image_size"]), rng),
                "labels": labels,
                "bias_labels": colours,
                "ids": np.array([f"{split}/{i:04d}" for i in range(len(labels))]),
                "manifest": {"conflicting": int((colours != labels).sum())},
            }
        write_labelled_store(job.out, self.name, variant, ds_cfg, job.seed, splits, CLASSES, COLOURS)
