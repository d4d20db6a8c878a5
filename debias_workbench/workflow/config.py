"""Validation of the workflow config against its schema (`workbench.schema`: config/schema.yaml and the
dataset families' sections), with messages naming the key; expansion of the declarations into runs."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.variants import BG_CONFLICT, EXTERNAL, NEEDS_FOREGROUND
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.run_length import run_length, switches_outside

from .schema import load_schema
from .smoke import apply_smoke

#: label of the ImageNet-model row (evaluation.imagenet_model), reserved
BASE_IN_LABEL = "Base (IN)"


class ConfigError(ValueError):
    pass


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """Raise `ConfigError` listing every invalid key (as a dotted path) with the rule it breaks."""
    errors = sorted(_validator().iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    _raise_problems([f"{'.'.join(map(str, e.absolute_path)) or '<top level>'}: {e.message}" for e in errors])
    _check_cross_references(config)
    return config


@cache
def _validator() -> jsonschema.Draft202012Validator:
    """The schema's validator, made once per process (validation only reads it)."""
    return jsonschema.Draft202012Validator(load_schema())


def resolve_config(config: dict[str, Any]) -> dict[str, Any]:
    """The validated config with smoke mode's counts applied (`workbench/smoke.py`), and Table 5's
    U2-Net runs, sweep values and grid cells expanded into experiments of their own; raises
    `ConfigError` naming every bad key."""
    validate_config(config)
    if config.get("smoke"):  # smoke mode's counts must be valid too
        config = validate_config(apply_smoke(config))
    out = expand_grids(expand_sweeps(expand_segmentation_comparison(config)))
    problems: list[str] = []
    _check_labels(out, problems)  # expansion adds labels ("CLAD lambda=0.25", "CLAD (U2-Net)")
    _check_switches(out, problems)  # on every run as it trains: grid cells and sweep values included
    _raise_problems(problems)
    return out


def _check_switches(config: dict[str, Any], problems: list[str]) -> None:
    """Every method argument that names a point of the run (`x-within-run`: Park et al.'s T1, T2)
    falls inside it: the run's steps from `training.iterations`, or its epochs times the batches of
    the training split the dataset family expects (an estimate for folder sources: the trainer
    checks again with the real count)."""
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
        where = (f"grids.{exp['grid']}.methods.{exp['grid_method']}" if "grid" in exp else f"experiments.{name}")
        for arg, outside in switches_outside(args, within, run_length(training, batches)).items():
            how = ("training.iterations" if training.get("iterations") else
                   f"{training['epochs']} epochs of about {batches:,} batches of {training['batch_size']} "
                   f"({images:,} training images expected)")
            problem = (f"{where}.method_args.{arg}: {outside} ({how}); set training.iterations to the paper's run "
                       f"length, or move the switch inside the run")
            if problem not in problems:  # a grid method's train variants share it
                problems.append(problem)


def _raise_problems(problems: list[str]) -> None:
    """Raise `ConfigError` listing every problem (each names its dotted key), if any."""
    if problems:
        raise ConfigError("invalid workflow config:\n" + "\n".join(f"  {p}" for p in problems))


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` applied key by key (nested dicts merged, other values replaced)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def dataset_family(config: dict[str, Any], dataset: str) -> str:
    return config["datasets"][dataset].get("family", "in9")


def dataset_variants(config: dict[str, Any], dataset: str) -> list[str]:
    """The variant stores the workflow builds for `dataset`."""
    return get_family(dataset_family(config, dataset)).variants(config["datasets"][dataset])


def test_sets(config: dict[str, Any], dataset: str, train_variant: str) -> dict[str, str]:
    """{test set name: variant} a run trained on `train_variant` is scored on (its family's declaration)."""
    return get_family(dataset_family(config, dataset)).test_sets(config["datasets"][dataset], train_variant)


def _check_method(where: str, method_name: str, method_args: dict, dataset: str | None, variant: str | None,
                  config: dict[str, Any], problems: list[str]) -> None:
    """A registered method, `method_args` of the types and ranges it declares, and the variants
    it reads built by its dataset."""
    if method_name not in REGISTRY:
        problems.append(f"{where}.method: {method_name!r} is not a registered method {sorted(REGISTRY)}")
        return
    declared = method_spec(method_name)
    for error in jsonschema.Draft202012Validator(declared.schema()).iter_errors(method_args):
        key = ".".join(map(str, error.absolute_path))
        if error.validator == "additionalProperties":
            problems.append(f"{where}.method_args: {error.message}; {method_name!r} takes {sorted(declared.args)}")
        else:
            problems.append(f"{where}.method_args.{key}: {error.message}")
    if dataset is None:
        return
    built = dataset_variants(config, dataset)
    if variant not in built:
        problems.append(f"{where}.train_variant: {variant!r} is not a variant dataset {dataset!r} builds "
                        f"({built}); pick one of those or add it to datasets.{dataset}.variants")
    for needed in declared.aligned_variants.values():
        if needed not in built:
            problems.append(f"{where}.method: {method_name!r} reads variant {needed!r}, which dataset "
                            f"{dataset!r} does not build (it builds {built}); add it to datasets.{dataset}.variants")


def _check_labels(config: dict[str, Any], problems: list[str]) -> None:
    """Labels name rows in the report's tables: two experiments with one label would read as one."""
    seen: dict[str, str] = {BASE_IN_LABEL: "evaluation.imagenet_model"}
    for name, exp in config["experiments"].items():
        if "grid" in exp:  # a grid method's runs share its label (checked per grid below)
            continue
        if exp["label"] in seen:
            problems.append(f"experiments.{name}.label: {exp['label']!r} is also the label of {seen[exp['label']]}; "
                            "give each experiment its own label")
        seen.setdefault(exp["label"], f"experiments.{name}")
    for grid_name, grid in config.get("grids", {}).items():
        seen_grid: dict[str, str] = {}
        for key, method in grid["methods"].items():
            if method["label"] in seen_grid:
                problems.append(f"grids.{grid_name}.methods.{key}.label: {method['label']!r} is also the label of "
                                f"{seen_grid[method['label']]}; give each method its own label")
            seen_grid.setdefault(method["label"], key)


def _check_cross_references(config: dict[str, Any]) -> None:
    problems: list[str] = []
    for name, exp in config["experiments"].items():
        known = exp["dataset"] in config["datasets"]
        if not known:
            problems.append(f"experiments.{name}.dataset: {exp['dataset']!r} is not in `datasets`")
        _check_method(f"experiments.{name}", exp["method"], exp.get("method_args", {}),
                      exp["dataset"] if known else None, exp["train_variant"], config, problems)
    for name, grid in config.get("grids", {}).items():
        if grid["dataset"] not in config["datasets"]:
            problems.append(f"grids.{name}.dataset: {grid['dataset']!r} is not in `datasets`")
            continue
        built = dataset_variants(config, grid["dataset"])
        if missing := [v for v in grid["train_variants"] if v not in built]:
            problems.append(f"grids.{name}.train_variants: {missing} are not built by dataset {grid['dataset']!r} "
                            f"(it builds {built})")
        for key, spec in grid["methods"].items():
            _check_method(f"grids.{name}.methods.{key}", spec["method"], spec.get("method_args", {}), None, None,
                          config, problems)
        sets = test_sets(config, grid["dataset"], grid["train_variants"][0])
        curves = grid.get("curves", {})
        if curves and curves["test_set"] not in sets:
            problems.append(f"grids.{name}.curves.test_set: {curves['test_set']!r} is not a test set of "
                            f"{grid['dataset']!r} ({sorted(sets)})")
        if unknown := set(curves.get("methods", [])) - set(grid["methods"]):
            problems.append(f"grids.{name}.curves.methods: {sorted(unknown)} are not methods of the grid")
        if grid["figure_variant"] not in grid["train_variants"]:
            problems.append(f"grids.{name}.figure_variant: {grid['figure_variant']!r} is not in its train_variants")
        if grid.get("report") in ("park", "park_ablation") and ({"valid", "unbiased"} - set(sets)
                                                                 or not grid.get("model_selection")):
            problems.append(f"grids.{name}.report: {grid['report']} needs a dataset with `valid` and `unbiased` test sets (a "
                            f"colored_mnist one; {grid['dataset']!r} has {sorted(sets)}) and `model_selection`")
    for name, sweep in config.get("sweeps", {}).items():
        base = config["experiments"].get(sweep["experiment"])
        if base is None:
            problems.append(f"sweeps.{name}.experiment: {sweep['experiment']!r} is not in `experiments`")
        elif base["method"] in REGISTRY and sweep["arg"] not in method_spec(base["method"]).args:
            problems.append(f"sweeps.{name}.arg: {base['method']!r} takes no argument {sweep['arg']!r} "
                            f"(it takes {sorted(method_spec(base['method']).args)})")
    for analysis in ("saliency", "texture"):
        for name in config["analyses"][analysis]["experiments"]:
            if name not in config["experiments"]:
                problems.append(f"analyses.{analysis}.experiments: {name!r} is not in `experiments`")
    ev = config["evaluation"]["dataset"]
    if ev not in config["datasets"]:
        problems.append(f"evaluation.dataset: {ev!r} is not in `datasets`")
    elif dataset_family(config, ev) != "in9":
        problems.append(f"evaluation.dataset: {ev!r} is a {dataset_family(config, ev)} dataset; the Background "
                        "Challenge evaluation needs an in9 dataset (grids evaluate on their own test sets)")
    official = config["evaluation"].get("official_dataset")
    if official is not None:
        if official not in config["datasets"] or dataset_family(config, official) != "bg_challenge":
            problems.append(f"evaluation.official_dataset: {official!r} is not a bg_challenge dataset of `datasets`")
        elif ev in config["datasets"]:
            for key in ("classes", "image_size"):
                if config["datasets"][official][key] != config["datasets"][ev][key]:
                    problems.append(f"datasets.{official}.{key}: must equal datasets.{ev}.{key} (the models' "
                                    f"{'classes' if key == 'classes' else 'input size'})")
    in9 = [d for d in config["datasets"] if dataset_family(config, d) == "in9"]
    for name in in9:  # without segmentation the mask is the box: nothing can be cut out along a foreground
        ds = config["datasets"][name]
        if ds["segmentation"]["method"] == "none" and (cut := [v for v in dataset_variants(config, name)
                                                           if v in NEEDS_FOREGROUND or v.startswith(BG_CONFLICT)]):
            problems.append(f"datasets.{name}.variants: {cut} are made from the foreground mask, which "
                            "`segmentation.method: none` does not compute; remove them or segment (grabcut, u2net)")
    for name, exp in config["experiments"].items():
        if exp["dataset"] not in in9:
            continue
        target = exp.get("eval_dataset") or ev
        if target not in in9:
            if exp.get("eval_dataset"):
                problems.append(f"experiments.{name}.eval_dataset: {target!r} is not an in9 dataset of `datasets`")
        elif config["datasets"][target]["classes"] != config["datasets"][exp["dataset"]]["classes"]:
            problems.append(f"experiments.{name}: trained on {exp['dataset']!r} "
                            f"({len(config['datasets'][exp['dataset']]['classes'])} classes) but scored on {target!r} "
                            f"({len(config['datasets'][target]['classes'])} classes); set "
                            f"experiments.{name}.eval_dataset to a dataset with the same classes (e.g. its own)")
        if exp["train_variant"] in EXTERNAL:
            problems.append(f"experiments.{name}.train_variant: {exp['train_variant']!r} is a test set read as "
                            "released (val split only); train on a variant the workflow builds")
        stylized = config["datasets"][exp["dataset"]].get("stylized") or {}
        if (exp["method"] in REGISTRY and "stylized" in method_spec(exp["method"]).aligned_variants.values()
                and stylized.get("styles", {}).get("kind") == "flat"):
            problems.append(f"experiments.{name}: method {exp['method']!r} pairs images by their style's class, and "
                            f"the flat styles of datasets.{exp['dataset']}.stylized have none; use styles of kind "
                            "folder")
    for analysis in ("saliency", "texture"):
        for name in config["analyses"][analysis]["experiments"]:
            if (config["experiments"].get(name) or {}).get("eval_dataset") not in (None, ev):
                problems.append(f"analyses.{analysis}.experiments: {name!r} is scored on another dataset than "
                                f"evaluation.dataset ({ev!r}); the analyses read only that one's stores")
    _check_labels(config, problems)
    _raise_problems(problems)


#: a grid trains its own architecture on its own dataset: it never inherits the top-level
#: `training.pretrained` (an ImageNet ResNet-50 in config/imagenet9.yaml) unless it names weights itself
GRID_WEIGHTS = {"pretrained": None, "pretrained_sha256": None}


def expand_grids(config: dict[str, Any]) -> dict[str, Any]:
    """The config with one experiment per grid method and train variant, named
    `<grid>_<method key>_<variant>`: a grid is only a way to declare many runs. Each is scored on
    its own dataset (`eval_dataset`), carries the row tags the report's grid tables group by
    (`tags`: grid, method key, train variant) and the grid's monitors (`curves` on the figure
    variant, `model_selection`). Grid runs start from random weights unless the grid or the
    method gives `pretrained`."""
    out = copy.deepcopy(config)
    for name, grid in config.get("grids", {}).items():
        for key, spec in grid["methods"].items():
            for variant in grid["train_variants"]:
                exp = {"method": spec["method"], "dataset": grid["dataset"], "train_variant": variant,
                       "eval_dataset": grid["dataset"], "label": spec["label"],
                       "method_args": copy.deepcopy(spec.get("method_args", {})),
                       "training": deep_merge(GRID_WEIGHTS, deep_merge(grid.get("training", {}), spec.get("training", {}))),
                       "seeds": grid_method_seeds(config, name, key), "grid": name, "grid_method": key,
                       "tags": {"grid": name, "grid_method": key, "train_variant": variant}}
                curves = grid.get("curves")
                if curves and variant == grid["figure_variant"] and key in curves["methods"]:
                    exp["curves"] = {"test_set": curves["test_set"], "every_steps": curves["every_steps"]}
                if selection := grid.get("model_selection"):
                    exp["model_selection"] = {"every_steps": selection["every_steps"]}
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
    small, and a process start (~7 s of interpreter and torch) would cost as much as a run on a
    CPU. Seeds whose jobs train the same methods share one pack (methods with their own `seeds`
    split a grid's seeds into groups). Every other run is a pack of one."""
    packed = {grid_experiment(g, k, v) for g, grid in config.get("grids", {}).items() for k in grid["methods"]
              for v in grid["train_variants"]}
    alone = [e for e in config["experiments"] if e not in packed]
    out = [Pack("", ("{experiment}",), {"experiment": alone})]
    for name, grid in config.get("grids", {}).items():
        groups: dict[tuple[str, ...], list[int]] = {}
        for seed in sorted({s for key in grid["methods"] for s in grid_method_seeds(config, name, key)}):
            keys = tuple(k for k in grid["methods"] if seed in grid_method_seeds(config, name, k))
            groups.setdefault(keys, []).append(seed)
        size = grid.get("pack") or len(grid["methods"])
        chunks = [(seeds, keys[i:i + size]) for keys, seeds in groups.items() for i in range(0, len(keys), size)]
        for part, (seeds, keys) in enumerate(chunks, start=1):
            out.append(Pack(f"_{name}" + (f"_{part}" if part > 1 else ""),
                            tuple(grid_experiment(name, k, "{variant}") for k in keys),
                            {"variant": list(grid["train_variants"]), "seed": [str(s) for s in seeds]}))
    return out


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
    every = {v: v for v in dataset_variants(config, dataset)}
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
    out = [ScoringPack("" if i == 0 else f"_{i + 1}", ("{experiment}",), seeds, {"experiment": experiments}, flag)
           for i, ((seeds, flag), experiments) in enumerate(groups.items())]
    for pack in training[1:]:
        runs_ = [pack.experiments({"variant": v}) for v in pack.constraints["variant"]]
        flags = {e in official for experiments in runs_ for e in experiments}  # a grid's runs share their test sets
        out.append(ScoringPack(pack.name, pack.members, tuple(map(int, pack.constraints["seed"])),
                               {"variant": pack.constraints["variant"]}, flags == {True}))
    return out


def scoring(config: dict[str, Any], experiment: str) -> tuple[str, dict[str, str], bool]:
    """(dataset, {test set name: variant}, group metrics?) a run of `experiment` is scored on: the
    test sets its dataset family declares for its train variant, on its `eval_dataset` (default:
    `evaluation.dataset` for a run on a dataset of that family, the Background Challenge runs; its own
    dataset otherwise); with group metrics (per-cell, bias-conflicting and worst-group
    accuracy) where the family declares them."""
    exp, ev = config["experiments"][experiment], config["evaluation"]["dataset"]
    dataset = exp.get("eval_dataset") or (ev if dataset_family(config, exp["dataset"]) == dataset_family(config, ev)
                                          else exp["dataset"])
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
                **copy.deepcopy(base), "label": f"{base['label']} {sweep['arg']}={value:g}",
                "method_args": {**base.get("method_args", {}), sweep["arg"]: value},
                "seeds": sweep.get("seeds", base.get("seeds", config["seeds"])),
            }
            points.append([value, exp_name])
        out.setdefault("sweep_points", {})[name] = {"arg": sweep["arg"], "points": points}
    return out


def expand_segmentation_comparison(config: dict[str, Any]) -> dict[str, Any]:
    """Table 5 (GrabCut vs U2-Net): with `analyses.u2net_model` set, the evaluation dataset is
    also built with U2-Net masks (`<dataset>_u2net`, the variants CLAD trains on) and every
    CLAD / CLAD+ experiment on it is repeated there (`<experiment>_u2net`). Evaluation stays on
    the GrabCut-built test set, so the two differ only in the training masks."""
    model = config["analyses"].get("u2net_model")
    if not model:
        return config
    out = copy.deepcopy(config)
    base = config["evaluation"]["dataset"]
    ds = copy.deepcopy(config["datasets"][base])
    ds["segmentation"].update(method="u2net", u2net_model=model)
    ds["variants"] = ["original", "only_bg_t"]
    out["datasets"][f"{base}_u2net"] = ds
    for name, exp in config["experiments"].items():
        if exp["method"] in ("clad", "clad_plus") and exp["dataset"] == base:
            out["experiments"][f"{name}_u2net"] = {**copy.deepcopy(exp), "dataset": f"{base}_u2net",
                                                   "label": f"{exp['label']} (U2-Net)"}
    return out


def _slug(value: float) -> str:
    return f"{value:g}".replace("-", "m").replace(".", "p").replace("+", "")


def runs(config: dict[str, Any]) -> list[tuple[str, int]]:
    """Every (experiment, seed) training run of an expanded config."""
    return [(name, seed) for name, exp in config["experiments"].items() for seed in exp.get("seeds", config["seeds"])]
