"""Registry of dataset families. A new family is one module here (its class, and its config section
declared in `<module>.yaml` beside it) plus one line below."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from debias_workbench.core.registry import LazyRegistry

from .base import DatasetFamily, DerivedMetric

if TYPE_CHECKING:
    from ..imageio import TrainPhotos

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

#: name -> class (a family outside the package is registered as "package.module:Class", `core.registry`)
FAMILIES: LazyRegistry[type[DatasetFamily]] = LazyRegistry(__name__, REGISTRY)


def family_name(ds_cfg: Mapping[str, Any]) -> str:
    """The family of a dataset section (`family`, else `DEFAULT_FAMILY`)."""
    return ds_cfg.get("family", DEFAULT_FAMILY)


def family_modules() -> list[str]:
    """The dotted name of each registered family's module (a warm job server imports them all up front)."""
    return sorted({FAMILIES.module_of(name) for name in FAMILIES})


def train_photos(ds_cfg: Mapping[str, Any]) -> TrainPhotos | None:
    """The dataset section's training photos as its family reads them (`DatasetFamily.train_photos`); None: its
    training images are squares."""
    return get_family(family_name(ds_cfg)).train_photos(dict(ds_cfg))


def get_family(name: str) -> DatasetFamily:
    if name not in REGISTRY:
        raise KeyError(f"unknown dataset family {name!r}; known: {sorted(REGISTRY)}")
    return FAMILIES[name]()


def derived_metrics() -> tuple[DerivedMetric, ...]:
    """Every registered family's derived metrics (`DatasetFamily.derived_metrics`), each column once: a run
    scored on both of a metric's test sets gets it, whatever its family (the released official test images
    hold the same variants as the family that builds them)."""
    found: dict[str, DerivedMetric] = {}
    for name in REGISTRY:
        for metric in FAMILIES[name].derived_metrics:
            if found.setdefault(metric.column, metric) != metric:
                raise ValueError(f"dataset family {name!r} derives {metric.column!r} otherwise than another family")
    return tuple(found.values())


def counted_metrics() -> tuple[str, ...]:
    """Every registered family's counted metrics (`DatasetFamily.counted_metrics`), in registry order."""
    return tuple(dict.fromkeys(m for name in REGISTRY for m in FAMILIES[name].counted_metrics))


def column_title(column: str, family: str | None = None) -> str:
    """The title of a results table's `column`: `family`'s (`DatasetFamily.column_titles`), else the first
    registered family's that titles it, else the column's name."""
    own = FAMILIES[family].column_titles if family is not None else {}
    titled = (FAMILIES[name].column_titles for name in REGISTRY)
    return own.get(column) or next((t[column] for t in titled if column in t), column)


def rule_files() -> tuple[str, ...]:
    """Every registered family's own rule files (`DatasetFamily.rule_files`), as paths under the checkout
    (`rules/<file>`), in registry order: the Snakefile includes them."""
    return tuple(f"rules/{name}" for family in REGISTRY for name in FAMILIES[family].rule_files)
