"""What a workflow config's names resolve to: a dataset's family, variants and test sets, and
the merge of config layers (every other module of the workflow layer reads them from here)."""

from __future__ import annotations

import copy
from typing import Any

from debias_workbench.pipeline.datasets import family_name, get_family


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` applied key by key (nested dicts merged, other values replaced)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def dataset_family(config: dict[str, Any], dataset: str) -> str:
    return family_name(config["datasets"][dataset])


def dataset_variants(config: dict[str, Any], dataset: str) -> list[str]:
    """The variant stores the workflow builds for `dataset`."""
    return get_family(dataset_family(config, dataset)).variants(config["datasets"][dataset])


def test_sets(config: dict[str, Any], dataset: str, train_variant: str) -> dict[str, str]:
    """{test set name: variant} a run trained on `train_variant` is scored on (its family's declaration)."""
    return get_family(dataset_family(config, dataset)).test_sets(config["datasets"][dataset], train_variant)
