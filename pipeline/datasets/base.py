from __future__ import annotations

from pathlib import Path
from typing import Any


class DatasetFamily:
    """A family of dataset variants built by the workflow (e.g. the IN-9 Background Challenge).

    `variants(cfg)` names the stores `results/datasets/<family>/<variant>.zarr`;
    `run_step` runs one generation step (the rules in `rules/<family>.smk` call it).
    """

    name: str
    #: the test sets (and metrics derived from them) a results table of this family shows, in order
    headline: tuple[str, ...] = ()
    #: what the family's val split (model selection) holds, for the tables' captions
    val_split: str = "as the dataset builds it"

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """{test set name: variant} a model trained on `train_variant` is evaluated on (val split)."""
        return {v: v for v in self.variants(ds_cfg)}

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        """Whether a run trained on `train_variant` is also scored per (bias, class) cell, on the
        bias-conflicting images, per class and on the worst group (`training.evaluation.group_metrics`)."""
        return False

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int = 1, variant: str | None = None, shard: int | None = None) -> None:
        raise NotImplementedError
