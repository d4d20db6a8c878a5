from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import yaml


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
    #: each variant store built whole by one job (`python -m pipeline variant`, rule `dataset_variant`);
    #: False for a family with stages of its own (in9: listing, segmentation shards, gathers)
    whole_variants: bool = True

    @classmethod
    def schema(cls) -> dict[str, Any]:
        """The JSON schema of the family's config section: `<module>.yaml` beside its module."""
        return yaml.safe_load(Path(inspect.getfile(cls)).with_suffix(".yaml").read_text())

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """{test set name: variant} a model trained on `train_variant` is evaluated on (val split)."""
        return {v: v for v in self.variants(ds_cfg)}

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        """The user's files and folders a variant's job reads (declared as inputs, so a missing one
        stops the workflow at start, named)."""
        return []

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        """About how many images a split holds, from the config alone (the cluster's runtime and
        memory requests, `workbench.resources`)."""
        raise NotImplementedError

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        """Whether a run trained on `train_variant` is also scored per (bias, class) cell, on the
        bias-conflicting images, per class and on the worst group (`training.evaluation.group_metrics`)."""
        return False

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int = 1, variant: str | None = None, shard: int | None = None) -> None:
        raise NotImplementedError
