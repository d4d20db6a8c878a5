"""Registry of dataset families. A new family is one module here (its class, and its config section
declared in `<module>.yaml` beside it) plus one line below."""

from __future__ import annotations

from .base import DatasetFamily
from .bg_challenge import BgChallengeFamily
from .biased_mnist import BiasedMnistFamily
from .colored_mnist import ColoredMnistFamily
from .in9 import In9Family
from .released_bias_folders import ReleasedBiasFoldersFamily
from .waterbirds import WaterbirdsFamily

#: the family of a dataset section without `family`
DEFAULT_FAMILY = "in9"

FAMILIES: dict[str, type[DatasetFamily]] = {
    "in9": In9Family,
    "biased_mnist": BiasedMnistFamily,
    "bg_challenge": BgChallengeFamily,
    "colored_mnist": ColoredMnistFamily,
    "waterbirds": WaterbirdsFamily,
    "released_bias_folders": ReleasedBiasFoldersFamily,
}


def get_family(name: str) -> DatasetFamily:
    if name not in FAMILIES:
        raise KeyError(f"unknown dataset family {name!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[name]()
