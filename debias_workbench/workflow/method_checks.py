"""The config checks of one method entry (an experiment's, or a grid's): a registered method, `method_args` of the
types and ranges it declares, and whether it can run on its dataset's family at those arguments
(`training.applicability`); `workflow.checks` runs them on every experiment and grid."""

from __future__ import annotations

from typing import Any

import jsonschema

from debias_workbench.training.applicability import applicability
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec

from .lookup import dataset_family, dataset_variants

Config = dict[str, Any]


def method_problems(
    where: str, method_name: str, method_args: dict, dataset: str | None, variant: str | None, config: Config
) -> list[str]:
    """A registered method, `method_args` of the types and ranges it declares, and the variants
    it reads built by its dataset."""
    if method_name not in REGISTRY:
        return [f"{where}.method: {method_name!r} is not a registered method {sorted(REGISTRY)}"]
    problems = []
    declared = method_spec(method_name)
    for error in jsonschema.Draft202012Validator(declared.schema()).iter_errors(method_args):
        key = ".".join(map(str, error.absolute_path))
        if error.validator == "additionalProperties":
            problems.append(f"{where}.method_args: {error.message}; {method_name!r} takes {sorted(declared.args)}")
        else:
            problems.append(f"{where}.method_args.{key}: {error.message}")
    if dataset is None:
        return problems
    built = dataset_variants(config, dataset)
    problems += applicability_problems(
        where, method_name, dataset, config, variant if variant in built else None, method_args
    )
    if variant not in built:
        problems.append(
            f"{where}.train_variant: {variant!r} is not a variant dataset {dataset!r} builds "
            f"({built}); pick one of those or add it to datasets.{dataset}.variants"
        )
    return problems


def applicability_problems(
    where: str,
    method_name: str,
    dataset: str,
    config: Config,
    train_variant: str | None = None,
    method_args: dict | None = None,
) -> list[str]:
    """The method can run on the dataset's family: the family offers every capability it requires (at
    `method_args`), and, on `train_variant`, each variant the method reads built row-aligned with its train split
    (`training.applicability`: never another train variant's store, whose rows are other images)."""
    ds_cfg = config["datasets"][dataset] if train_variant is not None else None
    runs, reason = applicability(
        method_name, dataset_family(config, dataset), ds_cfg, train_variant, dataset, method_args
    )
    return [] if runs else [f"{where}.method: {reason}; train it on a dataset of a family that offers it"]


def grid_applicability_problems(where: str, method: dict[str, Any], grid: dict[str, Any], config: Config) -> list[str]:
    """`applicability_problems` of a grid's `method` entry: once for its family, else on each built train variant."""
    name, args = method["method"], method.get("method_args", {})
    if problems := applicability_problems(where, name, grid["dataset"], config, None, args):
        return problems
    built = dataset_variants(config, grid["dataset"])
    return [
        problem
        for variant in grid["train_variants"]
        if variant in built
        for problem in applicability_problems(where, name, grid["dataset"], config, variant, args)
    ]
