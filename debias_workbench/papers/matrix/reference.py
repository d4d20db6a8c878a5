"""The runs the methods x benchmarks table plans beside its grids, from the config alone (the workflow's
expansions and checks, `workflow.py`, and the report's tables read the same functions; imports nothing of the
report):

* **the bias-free references** of its capability line: for each `report: matrix` grid, ERM of the grid's own
  recipe (its ERM method and training; its seeds, or the grid's `reference_seeds`) trained on the variant its
  family declares bias-free for each of its train variants (`DatasetFamily.bias_free_reference`: IN-9's
  held-out Mixed-Rand, Biased MNIST's unbiased colours, Colored MNIST with every class spread over every
  colour), as a grid of its own (`<grid>_reference`, report kind `REFERENCE_KIND`); grids that would train the
  very same runs share one;
* **the paper rules' scoring points**: a grid's `model_selection` (every few steps) is kept for the runs whose
  method's paper selects on a validation split (`MethodSpec.paper_rule`) and for ERM beside them, on the
  validation set and the test sets the benchmark is judged on only, and only on a family with a validation
  split (`DatasetFamily.validation_set`); every other run writes no curve row.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from debias_workbench.pipeline.datasets import family_name, get_family
from debias_workbench.pipeline.datasets.base import BenchmarkMetric
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.methods.spec import VALIDATION

Config = dict[str, Any]

#: the grid report kind of the table's grids
KIND = "matrix"
#: the grid report kind of the bias-free reference grids the expansion adds (no section of their own)
REFERENCE_KIND = "matrix_reference"
#: the suffix of a reference grid's name
REFERENCE_SUFFIX = "_reference"
#: what the names of the metrics the scoring points record end with (`training.trainer.Monitor`)
ACCURACY = "accuracy"


def matrix_grids(config: Config) -> dict[str, dict[str, Any]]:
    """The config's grids the table reads (`report: matrix`), in config order."""
    return {name: grid for name, grid in config.get("grids", {}).items() if grid.get("report") == KIND}


def is_reference(method: str) -> bool:
    """Whether registered `method`'s runs are a benchmark's reference (its declared `reference`: ERM, and ReBias's
    Vanilla, ERM on F)."""
    return method_spec(method).reference


def reference_key(grid: dict[str, Any]) -> str | None:
    """The key of `grid`'s ERM method (its first whose method `is_reference`), None without one."""
    return next((key for key, m in grid["methods"].items() if is_reference(m["method"])), None)


def reference_grids(config: Config) -> dict[str, dict[str, Any]]:
    """{reference grid: its declaration} for the config's matrix grids (module docstring); each lists the matrix
    grids it serves in `reference_of`."""
    out: dict[str, dict[str, Any]] = {}
    by_runs: dict[str, str] = {}
    for name, grid in matrix_grids(config).items():
        key, ds_cfg = reference_key(grid), config["datasets"][grid["dataset"]]
        family = get_family(family_name(ds_cfg))
        found = [family.bias_free_reference(ds_cfg, v) for v in grid["train_variants"]]
        variants = list(dict.fromkeys(ref.variant for ref in found if ref is not None))
        if key is None or not variants:
            continue
        erm = {k: v for k, v in grid["methods"][key].items() if k not in ("label", "seeds")}
        runs = {
            "dataset": grid["dataset"],
            "train_variants": variants,
            "seeds": list(
                grid.get("reference_seeds") or grid["methods"][key].get("seeds") or grid.get("seeds") or config["seeds"]
            ),
            "training": copy.deepcopy(grid.get("training", {})),
            "methods": {key: {**copy.deepcopy(erm), "label": "ERM (bias-free reference)"}},
        }
        identity = json.dumps(runs, sort_keys=True, default=str)
        if identity in by_runs:  # the same runs as another grid's reference: shared
            out[by_runs[identity]]["reference_of"].append(name)
            continue
        by_runs[identity] = f"{name}{REFERENCE_SUFFIX}"
        out[by_runs[identity]] = {**runs, "report": REFERENCE_KIND, "reference_of": [name]}
    return out


def reference_grid_of(config: Config, grid: str) -> str | None:
    """The reference grid serving matrix grid `grid` in an expanded config (its `reference_of`), None without one."""
    return next((n for n, g in config.get("grids", {}).items() if grid in g.get("reference_of", ())), None)


def scored(metric: BenchmarkMetric) -> bool:
    """Whether the scoring points along training record `metric` (accuracies and the group accuracies; not the
    shape bias, which only the final evaluation counts)."""
    return metric.metric.endswith(ACCURACY)


def monitored_sets(config: Config, grid: dict[str, Any]) -> list[str]:
    """The test sets the paper rules' scoring points of `grid` need: each train variant's validation set and
    every test set its benchmark numbers that the points record read; empty where its family has none."""
    ds_cfg = config["datasets"][grid["dataset"]]
    family = get_family(family_name(ds_cfg))
    sets: list[str] = []
    for variant in grid["train_variants"]:
        if (valid := family.validation_set(ds_cfg, variant)) is None:
            continue
        sets.append(valid)
        sets += [
            s for metric in family.benchmark_metrics(ds_cfg, variant) if scored(metric) for s in metric.source_sets
        ]
    return list(dict.fromkeys(sets))


def with_paper_rule_points(config: Config, grid: dict[str, Any]) -> dict[str, Any]:
    """`grid` with its `model_selection` moved onto the methods whose paper rule needs scoring points (and its ERM
    beside them), on `monitored_sets` only; without it where none needs them or the family has no validation set."""
    out = {k: v for k, v in grid.items() if k != "model_selection"}
    selection, sets = grid.get("model_selection"), monitored_sets(config, grid)
    rules = {key: method_spec(m["method"]).paper_rule for key, m in grid["methods"].items()}
    if not selection or not sets or VALIDATION not in rules.values():
        return out
    out["methods"] = copy.deepcopy(grid["methods"])
    for key, method in out["methods"].items():
        if rules[key] == VALIDATION or key == reference_key(grid):
            method["model_selection"] = {"every_steps": selection["every_steps"], "test_sets": sets}
    return out


def expand_matrix(config: Config) -> Config:
    """The config with the reference grids added and the paper rules' scoring points placed (module docstring)."""
    grids = matrix_grids(config)
    if not grids:
        return config
    out = copy.deepcopy(config)
    for name, grid in grids.items():
        out["grids"][name] = with_paper_rule_points(config, grid)
    out["grids"].update(reference_grids(config))
    return out


def reference_problems(config: Config) -> list[str]:
    """A matrix grid whose family declares a bias-free variant the dataset does not build: named, with the
    setting that builds it (the capability line would have no reference to decide on)."""
    problems = []
    for name, grid in matrix_grids(config).items():
        ds_cfg = config["datasets"].get(grid["dataset"])
        if ds_cfg is None:
            continue  # the cross-reference checks name an unknown dataset
        family = get_family(family_name(ds_cfg))
        built = family.variants(ds_cfg)
        for variant in grid["train_variants"]:
            ref = family.bias_free_reference(ds_cfg, variant)
            if ref is not None and ref.variant not in built:
                problems.append(
                    f"grids.{name}.train_variants: the capability line of {grid['dataset']} {variant} is decided by "
                    f"ERM trained on {ref.variant} (its bias-free variant), which the dataset does not build; "
                    f"{ref.setting}"
                )
    return problems
