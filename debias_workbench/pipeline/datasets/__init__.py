"""Registry of dataset families. A new family is one module here (its class, and its config section
declared in `<module>.yaml` beside it) plus one line below."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from debias_workbench.core.registry import LazyRegistry

from .base import DatasetFamily

#: the family of a dataset section without `family`
DEFAULT_FAMILY = "in9"

#: name -> "module.Class" under pipeline/datasets
REGISTRY: dict[str, str] = {
    "in9": "in9.In9Family",
    "biased_mnist": "biased_mnist.BiasedMnistFamily",
    "bg_challenge": "bg_challenge.BgChallengeFamily",
    "colored_mnist": "colored_mnist.ColoredMnistFamily",
    "waterbirds": "waterbirds.WaterbirdsFamily",
    "released_bias_folders": "released_bias_folders.ReleasedBiasFoldersFamily",
}

FAMILIES: Mapping[str, type[DatasetFamily]] = LazyRegistry(__name__, REGISTRY)


def family_name(ds_cfg: Mapping[str, Any]) -> str:
    """The family of a dataset section (`family`, else `DEFAULT_FAMILY`)."""
    return ds_cfg.get("family", DEFAULT_FAMILY)


def family_modules() -> list[str]:
    """The dotted name of each registered family's module (a warm job server imports them all up front)."""
    return sorted({f"{__name__}.{entry.split('.')[0]}" for entry in REGISTRY.values()})


def get_family(name: str) -> DatasetFamily:
    if name not in REGISTRY:
        raise KeyError(f"unknown dataset family {name!r}; known: {sorted(REGISTRY)}")
    return FAMILIES[name]()
