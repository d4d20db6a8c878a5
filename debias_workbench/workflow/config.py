"""Validation of the workflow config against its schema (`workflow.schema`: config/schema.yaml and the
dataset families' sections) and its cross references (`workflow.checks`), with messages naming the
key; expansion of the declarations (the papers' own, `workflow.paper_hooks`; sweeps, grids) into runs, and
the runs' packing into jobs."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema

from debias_workbench.core.names import GRID_WEIGHTS
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.methods import spec as method_spec

from . import paper_hooks
from .checks import cross_reference_problems, label_problems, scoped_away_problems, switch_problems
from .lookup import dataset_family, dataset_variants, deep_merge
from .schema import load_schema
from .scope import scoped
from .smoke import apply_smoke


class ConfigError(ValueError):
    pass


def _message(error: jsonschema.ValidationError) -> str:
    """The rule a value breaks; for a value that fits none of a key's alternatives (`oneOf`), each
    alternative's complaint (e.g. `arch`: one of the named networks, or timm/<name>)."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        return f"{error.instance!r} is none of: " + "; ".join(sorted({sub.message for sub in error.context}))
    return error.message


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Raise `ConfigError` listing every invalid key (as a dotted path) with the rule it breaks."""
    _raise_problems(schema_problems(config))
    _raise_problems(cross_reference_problems(config))
    return config


def schema_problems(config: dict[str, Any]) -> list[str]:
    """Every key of `config` the schema refuses, as a dotted path with the rule it breaks."""
    errors = sorted(_validator().iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{'.'.join(map(str, e.absolute_path)) or '<top level>'}: {_message(e)}" for e in errors]


@cache
def _validator() -> jsonschema.Draft202012Validator:
    """The schema's validator, made once per process (validation only reads it)."""
    return jsonschema.Draft202012Validator(load_schema())


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """The validated config with only its papers' runs where it says so (`workflow.scope`), smoke mode's counts
    applied (`debias_workbench/workflow/smoke.py`), and the runs the papers' tables add (`workflow.paper_hooks`:
    CLAD Table 5's U2-Net runs), sweep values and grid cells expanded into experiments of their own; raises
    `ConfigError` naming every bad key."""
    if config.get("scope", {}).get("tables_only"):  # a paper config: its tables' runs only (workflow/scope.py),
        # checked once they are scoped: the demo's runs it drops may read variants the config no longer builds
        _raise_problems(schema_problems(config))
        _raise_problems(scoped_away_problems(config))
        config = validate_config(scoped(config))
    else:
        validate_config(config)
    if config.get("smoke"):  # smoke mode's counts must be valid too
        config = validate_config(apply_smoke(config))
    out = expand_grids(expand_sweeps(paper_hooks.expand(config)))
    # expansion adds labels (a sweep's "<label> lambda=0.25", a paper's); switches are checked on every run as it
    # trains: grid cells and sweep values included
    _raise_problems(label_problems(out) + switch_problems(out))
    return out


def _raise_problems(problems: list[str]) -> None:
    """Raise `ConfigError` listing every problem (each names its dotted key), if any."""
    if problems:
        raise ConfigError("invalid workflow config:\n" + "\n".join(f"  {p}" for p in problems))


def expand_grids(config: dict[str, Any]) -> dict[str, Any]:
    """The config with one experiment per grid method and train variant, named
    `<grid>_<method key>_<variant>`: a grid is only a way to declare many runs. Each is scored on
    its own dataset (`eval_dataset`), carries the row tags the report's grid tables group by
    (`tags`: grid, method key, train variant) and the grid's monitors (`curves` on the figure
    variant, `model_selection`: a method's own where an expansion placed one, on its `test_sets` only). Grid runs
    start from random weights unless the grid or the method gives `pretrained`."""
    out = copy.deepcopy(config)
    for name, grid in config.get("grids", {}).items():
        for key, spec in grid["methods"].items():
            for variant in grid["train_variants"]:
                exp = {
                    "method": spec["method"],
                    "dataset": grid["dataset"],
                    "train_variant": variant,
                    "eval_dataset": grid["dataset"],
                    "label": spec["label"],
                    "method_args": copy.deepcopy(spec.get("method_args", {})),
                    "training": deep_merge(
                        GRID_WEIGHTS, deep_merge(grid.get("training", {}), spec.get("training", {}))
                    ),
                    "seeds": grid_method_seeds(config, name, key),
                    "grid": name,
                    "grid_method": key,
                    "tags": {"grid": name, "grid_method": key, "train_variant": variant},
                }
                curves = grid.get("curves")
                if curves and variant == grid.get("figure_variant") and key in curves["methods"]:
                    exp["curves"] = {"test_set": curves["test_set"], "every_steps": curves["every_steps"]}
                # a method's own (a paper's expansion may place it on some methods only), else the grid's
                if selection := spec.get("model_selection", grid.get("model_selection")):
                    exp["model_selection"] = {
                        k: copy.deepcopy(v) for k, v in selection.items() if k in ("every_steps", "test_sets")
                    }
                out["experiments"][grid_experiment(name, key, variant)] = exp
    return out


def grid_experiment(grid: str, method_key: str, variant: str) -> str:
    return f"{grid}_{method_key}_{variant}"


def grid_method_seeds(config: dict[str, Any], grid: str, key: str) -> list[int]:
    """Seeds of one method of a grid: its own `seeds`, else the grid's, else the top-level ones."""
    spec, grid_cfg = config["grids"][grid]["methods"][key], config["grids"][grid]
    return list(spec.get("seeds") or grid_cfg.get("seeds") or config["seeds"])


@dataclass(frozen=True)
class Pack:
    """Runs trained (and then scored) in one process: a scheduling choice, not a kind of run.

    `members`: the experiment names of one job as patterns of the wildcards in `constraints`
    ({wildcard: allowed values}); `name`: the suffix of the pack's `train` / `evaluate` rules.
    The first pack holds every run trained alone: one job per (experiment, seed)."""

    name: str
    members: tuple[str, ...]
    constraints: dict[str, list[str]]

    def experiments(self, wildcards: dict[str, str]) -> list[str]:
        return [m.format(**wildcards) for m in self.members]


def packs(config: dict[str, Any]) -> list[Pack]:
    """Every run of an expanded config in exactly one pack. A grid's runs of one train variant and
    seed share a process, `pack` methods at a time (default: all of them): their networks are
    small, and a process start (interpreter and torch: docs/measurements.md#pilots-on-a-2-core-avx2-machine)
    would cost as much as a run on a CPU. Seeds whose jobs train the same methods share one pack (methods with
    their own `seeds` split a grid's seeds into groups). Every other run is a pack of one."""
    packed = {
        grid_experiment(g, k, v)
        for g, grid in config.get("grids", {}).items()
        for k in grid["methods"]
        for v in grid["train_variants"]
    }
    alone = [e for e in config["experiments"] if e not in packed]
    out = [Pack("", ("{experiment}",), {"experiment": alone})]
    for name, grid in config.get("grids", {}).items():
        groups: dict[tuple[str, ...], list[int]] = {}
        for seed in sorted({s for key in grid["methods"] for s in grid_method_seeds(config, name, key)}):
            keys = tuple(k for k in grid["methods"] if seed in grid_method_seeds(config, name, k))
            groups.setdefault(keys, []).append(seed)
        size = grid.get("pack") or len(grid["methods"])
        chunks = [(seeds, keys[i : i + size]) for keys, seeds in groups.items() for i in range(0, len(keys), size)]
        for part, (seeds, keys) in enumerate(chunks, start=1):
            out.append(
                Pack(
                    f"_{name}" + (f"_{part}" if part > 1 else ""),
                    tuple(grid_experiment(name, k, "{variant}") for k in keys),
                    {"variant": list(grid["train_variants"]), "seed": [str(s) for s in seeds]},
                )
            )
    return out


def pack_jobs(config: dict[str, Any], pack: Pack) -> list[dict[str, str]]:
    """The wildcards of every training job of `pack` (rules/runs.smk): each (experiment, seed) of the
    runs trained alone, each (variant, seed) of a grid's pack."""
    if "experiment" in pack.constraints:
        return [{"experiment": e, "seed": str(s)} for e, s in runs(config) if e in pack.constraints["experiment"]]
    return [{"variant": v, "seed": s} for v in pack.constraints["variant"] for s in pack.constraints["seed"]]


@dataclass(frozen=True)
class ScoringPack:
    """Runs scored in one process (rule `evaluate<name>`): every seed of one experiment trained
    alone, or every seed of a grid pack's runs on one train variant. Torch starts once for them all;
    a retrained seed rescores its siblings (seconds), where a job per run would pay the interpreter,
    torch and the store checks once per run.

    `members` and `constraints` as `Pack`'s, with the one wildcard `experiment` or `variant`;
    `official`: the runs are also scored on the official Background Challenge test images
    (`evaluation.official_dataset`), in the same process."""

    name: str
    members: tuple[str, ...]
    seeds: tuple[int, ...]
    constraints: dict[str, list[str]]
    official: bool

    def experiments(self, wildcards: dict[str, str]) -> list[str]:
        return [m.format(**wildcards) for m in self.members]


def background_challenge_runs(config: dict[str, Any]) -> list[str]:
    """The experiments scored on every variant of `evaluation.dataset` (the Background Challenge runs:
    the analyses, the official test images and the main tables read them)."""
    dataset = config["evaluation"]["dataset"]
    held_out = get_family(dataset_family(config, dataset)).held_out_variants  # scored by their own runs only
    every = {v: v for v in dataset_variants(config, dataset) if v not in held_out}
    return [e for e in config["experiments"] if scoring(config, e)[:2] == (dataset, every)]


def scoring_packs(config: dict[str, Any]) -> list[ScoringPack]:
    """Every run of an expanded config in exactly one scoring pack: the runs trained alone grouped by
    experiment (one rule per distinct (seeds, official) among them: `evaluate`, `evaluate_2`, ...),
    a grid pack's runs by train variant (`evaluate_<grid>`, as its training rule)."""
    official = set(background_challenge_runs(config)) if config["evaluation"].get("official_dataset") else set()
    training = packs(config)
    groups: dict[tuple[tuple[int, ...], bool], list[str]] = {}
    for experiment in training[0].constraints["experiment"]:
        seeds = tuple(config["experiments"][experiment].get("seeds", config["seeds"]))
        groups.setdefault((seeds, experiment in official), []).append(experiment)
    out = [
        ScoringPack("" if i == 0 else f"_{i + 1}", ("{experiment}",), seeds, {"experiment": experiments}, flag)
        for i, ((seeds, flag), experiments) in enumerate(groups.items())
    ]
    for pack in training[1:]:
        runs_ = [pack.experiments({"variant": v}) for v in pack.constraints["variant"]]
        flags = {e in official for experiments in runs_ for e in experiments}  # a grid's runs share their test sets
        out.append(
            ScoringPack(
                pack.name,
                pack.members,
                tuple(map(int, pack.constraints["seed"])),
                {"variant": pack.constraints["variant"]},
                flags == {True},
            )
        )
    return out


def scoring(config: dict[str, Any], experiment: str) -> tuple[str, dict[str, str], bool]:
    """(dataset, {test set name: variant}, group metrics?) a run of `experiment` is scored on: the
    test sets its dataset family declares for its train variant, on its `eval_dataset` (default:
    `evaluation.dataset` for a run on a dataset of that family, the Background Challenge runs; its own
    dataset otherwise); with group metrics (per-cell, bias-conflicting and worst-group
    accuracy) where the family declares them."""
    exp, ev = config["experiments"][experiment], config["evaluation"]["dataset"]
    dataset = exp.get("eval_dataset") or (
        ev if dataset_family(config, exp["dataset"]) == dataset_family(config, ev) else exp["dataset"]
    )
    family = get_family(dataset_family(config, dataset))
    ds = config["datasets"][dataset]
    return dataset, family.test_sets(ds, exp["train_variant"]), family.group_metrics(ds, exp["train_variant"])


def expand_sweeps(config: dict[str, Any]) -> dict[str, Any]:
    """The config with one experiment per sweep value added (`<base>_<arg>_<value>`).

    A sweep value equal to the base experiment's own value is that experiment itself. Each
    expanded experiment records `sweep: {name, value}` for the report; `sweep_points`
    lists (value, experiment) per sweep.
    """
    out = copy.deepcopy(config)
    for name, sweep in config.get("sweeps", {}).items():
        base = config["experiments"][sweep["experiment"]]
        args = {**method_spec(base["method"]).defaults, **base.get("method_args", {})}
        points = []
        for value in sweep["values"]:
            if value == args[sweep["arg"]]:
                points.append([value, sweep["experiment"]])
                continue
            exp_name = f"{sweep['experiment']}_{sweep['arg']}_{_slug(value)}"
            out["experiments"][exp_name] = {
                **copy.deepcopy(base),
                "label": f"{base['label']} {sweep['arg']}={value:g}",
                "method_args": {**base.get("method_args", {}), sweep["arg"]: value},
                "seeds": sweep.get("seeds", base.get("seeds", config["seeds"])),
            }
            points.append([value, exp_name])
        out.setdefault("sweep_points", {})[name] = {"arg": sweep["arg"], "points": points}
    return out


def _slug(value: float) -> str:
    return f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")


def runs(config: dict[str, Any]) -> list[tuple[str, int]]:
    """Every (experiment, seed) training run of an expanded config."""
    return [(name, seed) for name, exp in config["experiments"].items() for seed in exp.get("seeds", config["seeds"])]
