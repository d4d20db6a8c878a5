"""What a workflow config's names resolve to: a dataset's family, variants and test sets, and
the merge of config layers (every other module of the workflow layer reads them from here)."""

from __future__ import annotations

from typing import Any

from debias_workbench.core.mapping import deep_merge
from debias_workbench.pipeline.datasets import family_name, get_family

__all__ = ["deep_merge"]  # the workflow's modules read the merge from here (module docstring)


def dataset_family(config: dict[str, Any], dataset: str) -> str:
    return family_name(config["datasets"][dataset])


def dataset_variants(config: dict[str, Any], dataset: str) -> list[str]:
    """The variant stores the workflow builds for `dataset`."""
    return get_family(dataset_family(config, dataset)).variants(config["datasets"][dataset])


def test_sets(config: dict[str, Any], dataset: str, train_variant: str) -> dict[str, str]:
    """{test set name: variant} a run trained on `train_variant` is scored on (its family's declaration)."""
    return get_family(dataset_family(config, dataset)).test_sets(config["datasets"][dataset], train_variant)
