"""The variant scheme of the bias-amplification datasets (Colored MNIST, Waterbirds, BFFHQ, BAR):
`conflict_<p>` per bias-conflicting percentage p (a train split and a val split for model
selection) and `unbiased` (the test set, in a val split)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import UNBIASED_TITLE, BenchmarkMetric, BiasFreeReference, CapabilityCheck, DatasetFamily, StepJob


def variant_name(percent: float) -> str:
    return f"conflict_{percent:g}"


class ConflictRatioFamily(DatasetFamily):
    """Subclasses build one variant in `build`: `percent` is the variant's p, None for `unbiased`."""

    headline = ("unbiased",)
    column_titles = {"unbiased": UNBIASED_TITLE}

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return [variant_name(p) for p in ds_cfg["conflict_percents"]] + ["unbiased"]

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """ "valid": the val split of the training variant; "unbiased": the test set."""
        return {"valid": train_variant, "unbiased": "unbiased"}

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        return True

    def benchmark_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> tuple[BenchmarkMetric, ...]:
        """Accuracy on the unbiased test set and on its bias-conflicting images (LfF's and Park et al.'s tables)."""
        return (
            BenchmarkMetric("unbiased accuracy", "unbiased"),
            BenchmarkMetric("bias-conflicting accuracy", "unbiased", "conflicting_accuracy"),
        )

    def capability_check(self, ds_cfg: dict[str, Any], train_variant: str) -> CapabilityCheck | None:
        """ERM's accuracy on the unbiased test set, where the bias is balanced away: a model that learned only
        the bias sits at chance there (aligned images right, conflicting ones wrong), so the line asks that it
        learned the classes at all. Not its bias-conflicting accuracy: a strong bias holds that near 0 % by
        design at the papers' ratios (Park et al.'s Vanilla: 60.96 % on BFFHQ, 2 classes), which would make
        the papers' own benchmarks uninformative."""
        return CapabilityCheck(BenchmarkMetric("unbiased accuracy", "unbiased"), "the classes beyond their bias")

    def bias_free_reference(self, ds_cfg: dict[str, Any], train_variant: str) -> BiasFreeReference | None:
        """ERM trained on `conflict_<p>` with p = 100 (1 - 1 / classes) %: each class spread evenly over every
        bias value, the bias balanced away; decided on that variant's val split ("valid": held-out training images,
        the bias independent of the class), not on the unbiased test set the comparisons are scored on."""
        percent = 100 * (1 - 1 / self.class_count(ds_cfg))
        return BiasFreeReference(
            variant_name(percent),
            "valid",
            f"its val split (held-out training images; {self.val_split})",
            f"add {percent:g} to the dataset's `conflict_percents`",
        )

    def validation_set(self, ds_cfg: dict[str, Any], train_variant: str) -> str | None:
        return "valid"  # the train variant's val split (`test_sets`)

    def build_variant(self, job: StepJob) -> None:
        variant, ds_cfg = self.known_variant(job), job.ds_cfg
        percent = next((p for p in ds_cfg["conflict_percents"] if variant_name(p) == variant), None)
        self.build(ds_cfg, job.seed, job.out, variant, percent)

    def build(self, ds_cfg: dict[str, Any], seed: int, out: Path, variant: str, percent: float | None) -> None:
        raise NotImplementedError
