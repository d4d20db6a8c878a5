"""The config's cross references, each checked by a function of its own that returns the problems it
finds, every one naming its dotted key and the fix (`workflow.config` raises them all at once):
datasets, variants and methods named by experiments and grids, method arguments, whether each method can
run on its dataset's family (`training.applicability`), sweeps, analyses, labels, switches that must fall
inside a run and the training sections' workflow keys, trackers and timm models; the evaluated family's
datasets and runs (evaluation dataset, each dataset's section as its family checks it, photo views:
`workflow.evaluated_checks`); then each
paper's own checks (`workflow.paper_hooks`: what its report sections need)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from debias_workbench.core.names import IMAGENET_LABEL, TIMM_PREFIX
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.run_length import run_length, switches_outside

from . import paper_hooks
from .evaluated_checks import evaluated_experiment_problems, evaluation_problems, photo_view_problems, section_problems
from .lookup import dataset_family, dataset_variants, deep_merge, test_sets
from .method_checks import grid_applicability_problems, method_problems
from .schema import grid_report

Config = dict[str, Any]


def _experiments(config: Config) -> list[str]:
    """Each experiment's dataset exists, and its method, arguments and train variant fit it."""
    problems = []
    for name, exp in config["experiments"].items():
        known = exp["dataset"] in config["datasets"]
        if not known:
            problems.append(f"experiments.{name}.dataset: {exp['dataset']!r} is not in `datasets`")
        problems += method_problems(
            f"experiments.{name}",
            exp["method"],
            exp.get("method_args", {}),
            exp["dataset"] if known else None,
            exp["train_variant"],
            config,
        )
    return problems


def _grid(config: Config, name: str, grid: dict[str, Any]) -> list[str]:
    """One grid: its dataset builds its train variants, its methods and curves exist (what its report needs:
    its paper's checks, `workflow.paper_hooks`)."""
    built = dataset_variants(config, grid["dataset"])
    problems = [
        f"grids.{name}.train_variants: {missing} are not built by dataset {grid['dataset']!r} (it builds {built})"
        for missing in [[v for v in grid["train_variants"] if v not in built]]
        if missing
    ]
    for key, spec in grid["methods"].items():
        problems += method_problems(
            f"grids.{name}.methods.{key}", spec["method"], spec.get("method_args", {}), None, None, config
        )
        if spec["method"] in REGISTRY:
            problems += grid_applicability_problems(f"grids.{name}.methods.{key}", spec, grid, config)
    sets = test_sets(config, grid["dataset"], grid["train_variants"][0])
    curves = grid.get("curves", {})
    if curves and curves["test_set"] not in sets:
        problems.append(
            f"grids.{name}.curves.test_set: {curves['test_set']!r} is not a test set of "
            f"{grid['dataset']!r} ({sorted(sets)})"
        )
    problems += _curve_methods(name, grid)
    figure = grid.get("figure_variant")
    if figure is None and (curves or grid_report(grid) in paper_hooks.figure_variant_kinds()):
        why = "its learning curves" if curves else f"report kind {grid_report(grid)!r}'s figures"
        problems.append(
            f"grids.{name}.figure_variant: missing; {why} need the train variant they show: "
            f"add figure_variant: one of {grid['train_variants']}"
        )
    elif figure is not None and figure not in grid["train_variants"]:
        problems.append(f"grids.{name}.figure_variant: {figure!r} is not in its train_variants")
    return problems


def _grids(config: Config) -> list[str]:
    problems = []
    for name, grid in config.get("grids", {}).items():
        if grid["dataset"] not in config["datasets"]:
            problems.append(f"grids.{name}.dataset: {grid['dataset']!r} is not in `datasets`")
        else:
            problems += _grid(config, name, grid)
    return problems


def _curve_methods(name: str, grid: dict[str, Any]) -> list[str]:
    """The grid's learning curves name methods of the grid."""
    unknown = set(grid.get("curves", {}).get("methods", [])) - set(grid["methods"])
    return [f"grids.{name}.curves.methods: {sorted(unknown)} are not methods of the grid"] if unknown else []


def scoped_away_problems(config: Config) -> list[str]:
    """What `workflow.scope.scoped` drops without a word (curve methods, sweeps, analysed experiments), checked on
    the whole config before it, so that a typo is refused, not scoped away."""
    curves = [p for name, grid in config.get("grids", {}).items() for p in _curve_methods(name, grid)]
    return curves + _sweeps(config) + _analyses(config)


def _sweeps(config: Config) -> list[str]:
    """Each sweep names an experiment and an argument its method takes."""
    problems = []
    for name, sweep in config.get("sweeps", {}).items():
        base = config["experiments"].get(sweep["experiment"])
        if base is None:
            problems.append(f"sweeps.{name}.experiment: {sweep['experiment']!r} is not in `experiments`")
        elif base["method"] in REGISTRY and sweep["arg"] not in method_spec(base["method"]).args:
            problems.append(
                f"sweeps.{name}.arg: {base['method']!r} takes no argument {sweep['arg']!r} "
                f"(it takes {sorted(method_spec(base['method']).args)})"
            )
    return problems


def _analyses(config: Config) -> list[str]:
    """The experiments each analysis lists (`analyses.<analysis>.experiments`) exist and are scored on the
    evaluation dataset, whose stores the analyses read."""
    problems, ev = [], config["evaluation"]["dataset"]
    listed = {name: section for name, section in config["analyses"].items() if isinstance(section, dict)}
    for analysis, section in listed.items():
        for name in section.get("experiments", []):
            if name not in config["experiments"]:
                problems.append(f"analyses.{analysis}.experiments: {name!r} is not in `experiments`")
            elif config["experiments"][name].get("eval_dataset") not in (None, ev):
                problems.append(
                    f"analyses.{analysis}.experiments: {name!r} is scored on another dataset than "
                    f"evaluation.dataset ({ev!r}); the analyses read only that one's stores"
                )
    return problems


def _scope(config: Config) -> list[str]:
    """Each run `scope.extra` keeps exists: an experiment, a grid's method as `<grid>/<method>`, or a grid."""
    problems = []
    for run in config.get("scope", {}).get("extra", {}):
        grid, _, method = run.partition("/")
        known = (
            method in config.get("grids", {}).get(grid, {}).get("methods", {})
            if method
            else run in config["experiments"] or run in config.get("grids", {})
        )
        if not known:
            problems.append(f"scope.extra: {run!r} is neither an experiment, a <grid>/<method> nor a grid here")
    return problems


def label_problems(config: Config) -> list[str]:
    """Labels name rows in the report's tables: two experiments with one label would read as one."""
    problems: list[str] = []
    seen: dict[str, str] = {IMAGENET_LABEL: "evaluation.imagenet_model"}
    for name, exp in config["experiments"].items():
        if "grid" in exp:  # a grid method's runs share its label (checked per grid below)
            continue
        if exp["label"] in seen:
            problems.append(
                f"experiments.{name}.label: {exp['label']!r} is also the label of {seen[exp['label']]}; "
                "give each experiment its own label"
            )
        seen.setdefault(exp["label"], f"experiments.{name}")
    for grid_name, grid in config.get("grids", {}).items():
        seen_grid: dict[str, str] = {}
        for key, method in grid["methods"].items():
            if method["label"] in seen_grid:
                problems.append(
                    f"grids.{grid_name}.methods.{key}.label: {method['label']!r} is also the label of "
                    f"{seen_grid[method['label']]}; give each method its own label"
                )
            seen_grid.setdefault(method["label"], key)
    return problems


def switch_problems(config: Config) -> list[str]:
    """Every method argument that names a point of the run (`x-within-run`: Park et al.'s T1, T2)
    falls inside it: the run's steps from `training.iterations`, or its epochs times the batches of
    the training split the dataset family expects (an estimate for folder sources: the trainer
    checks again with the real count)."""
    problems: list[str] = []
    for name, exp in config["experiments"].items():
        if exp["method"] not in REGISTRY or not (within := method_spec(exp["method"]).within_run):
            continue
        training = deep_merge(config["training"], exp.get("training", {}))
        ds = config["datasets"][exp["dataset"]]
        images = get_family(dataset_family(config, exp["dataset"])).expected_images(ds, "train")
        batches = images // training["batch_size"]
        if training.get("steps_per_epoch"):
            batches = min(batches, training["steps_per_epoch"])
        args = {**method_spec(exp["method"]).defaults, **exp.get("method_args", {})}
        where = f"grids.{exp['grid']}.methods.{exp['grid_method']}" if "grid" in exp else f"experiments.{name}"
        for arg, outside in switches_outside(args, within, run_length(training, batches)).items():
            how = (
                "training.iterations"
                if training.get("iterations")
                else f"{training['epochs']} epochs of about {batches:,} batches of {training['batch_size']} "
                f"({images:,} training images expected)"
            )
            problem = (
                f"{where}.method_args.{arg}: {outside} ({how}); set training.iterations to the paper's run "
                f"length, or move the switch inside the run"
            )
            if problem not in problems:  # a grid method's train variants share it
                problems.append(problem)
    return problems


#: tracker -> the module it needs (an optional extra of the package)
TRACKER_MODULES = {"tensorboard": "tensorboard"}


def _training_sections(node: Any, where: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(dotted key, section) of every `training` section of the config: the top level's, each
    experiment's, each grid's and grid method's."""
    if not isinstance(node, dict):
        return []
    found = [(where.removesuffix("."), node)] if where.endswith("training.") else []
    return found + [hit for key, value in node.items() for hit in _training_sections(value, f"{where}{key}.")]


#: training keys that are the workflow's, not a run's: set once, at the top level (the jobs read them from the
#: environment)
WORKFLOW_TRAINING_KEYS = ("trackers", "runs_per_gpu")


def _trackers(config: Config) -> list[str]:
    """Trackers and runs per GPU are the workflow's, set once (the jobs get them from the top-level
    section), and the trackers' packages are installed."""
    problems = [
        f"{where}.{key}: set {key} in the top-level training section (it applies to every run)"
        for where, section in _training_sections(config)
        if where != "training"
        for key in WORKFLOW_TRAINING_KEYS
        if key in section
    ]
    for tracker in config["training"].get("trackers", []):
        if importlib.util.find_spec(TRACKER_MODULES[tracker]) is None:
            problems.append(
                f"training.trackers: {tracker} needs the {TRACKER_MODULES[tracker]} package: "
                "pip install -e '.[trackers]' (or remove it from the list)"
            )
    return problems


def _timm_models(config: Config) -> list[str]:
    """Each `timm/<name>` arch names a model timm has (timm, and so torch, imported only when one is named)."""
    named = [
        (f"{where}.arch", section["arch"][len(TIMM_PREFIX) :])
        for where, section in _training_sections(config)
        if isinstance(section.get("arch"), str) and section["arch"].startswith(TIMM_PREFIX)
    ]
    if not named:
        return []
    import timm

    return [
        f"{where}: timm has no model {name!r} (timm.list_models('{name[:4]}*') lists the names near it)"
        for where, name in named
        if not timm.is_model(name)
    ]


#: the cross-reference checks of a validated config, in the order their problems are listed
CROSS_REFERENCE_CHECKS: tuple[Callable[[Config], list[str]], ...] = (
    _experiments,
    _grids,
    _sweeps,
    _scope,
    evaluation_problems,
    section_problems,
    photo_view_problems,
    evaluated_experiment_problems,
    _analyses,
    label_problems,
    _trackers,
    _timm_models,
)


def cross_reference_problems(config: Config) -> list[str]:
    """Every problem of every check, the papers' own last (an empty list: the config's names all resolve)."""
    return [p for check in (*CROSS_REFERENCE_CHECKS, *paper_hooks.checks()) for p in check(config)]
