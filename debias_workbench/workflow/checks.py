"""The config's cross references, each checked by a function of its own that returns the problems it
finds, every one naming its dotted key and the fix (`workflow.config` raises them all at once):
datasets, variants and methods named by experiments and grids, method arguments, whether each method can
run on its dataset's family (`training.applicability`), sweeps, analyses,
the evaluation datasets, segmentation, labels, and switches that must fall inside a run; then each
paper's own checks (`workflow.paper_hooks`: what its report sections need)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from debias_workbench.core.names import IMAGENET_LABEL, TIMM_PREFIX
from debias_workbench.pipeline.datasets import FAMILIES, get_family
from debias_workbench.pipeline.variants import BG_CONFLICT, EXTERNAL, NEEDS_FOREGROUND
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.run_length import run_length, switches_outside

from . import paper_hooks
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
        problems += method_problems(f"experiments.{name}", exp["method"], exp.get("method_args", {}),
                                    exp["dataset"] if known else None, exp["train_variant"], config)
    return problems


def _grid(config: Config, name: str, grid: dict[str, Any]) -> list[str]:
    """One grid: its dataset builds its train variants, its methods and curves exist (what its report needs:
    its paper's checks, `workflow.paper_hooks`)."""
    built = dataset_variants(config, grid["dataset"])
    problems = [f"grids.{name}.train_variants: {missing} are not built by dataset {grid['dataset']!r} (it builds "
                f"{built})" for missing in [[v for v in grid["train_variants"] if v not in built]] if missing]
    for key, spec in grid["methods"].items():
        problems += method_problems(f"grids.{name}.methods.{key}", spec["method"], spec.get("method_args", {}), None,
                                    None, config)
        if spec["method"] in REGISTRY:
            problems += grid_applicability_problems(f"grids.{name}.methods.{key}", spec, grid, config)
    sets = test_sets(config, grid["dataset"], grid["train_variants"][0])
    curves = grid.get("curves", {})
    if curves and curves["test_set"] not in sets:
        problems.append(f"grids.{name}.curves.test_set: {curves['test_set']!r} is not a test set of "
                        f"{grid['dataset']!r} ({sorted(sets)})")
    problems += _curve_methods(name, grid)
    figure = grid.get("figure_variant")
    if figure is None and (curves or grid_report(grid) in paper_hooks.figure_variant_kinds()):
        why = "its learning curves" if curves else f"report kind {grid_report(grid)!r}'s figures"
        problems.append(f"grids.{name}.figure_variant: missing; {why} need the train variant they show: "
                        f"add figure_variant: one of {grid['train_variants']}")
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
            problems.append(f"sweeps.{name}.arg: {base['method']!r} takes no argument {sweep['arg']!r} "
                            f"(it takes {sorted(method_spec(base['method']).args)})")
    return problems


def _analyses(config: Config) -> list[str]:
    """The analysed experiments exist and are scored on the evaluation dataset, whose stores the analyses read."""
    problems, ev = [], config["evaluation"]["dataset"]
    for analysis in ("saliency", "texture"):
        for name in config["analyses"][analysis]["experiments"]:
            if name not in config["experiments"]:
                problems.append(f"analyses.{analysis}.experiments: {name!r} is not in `experiments`")
            elif config["experiments"][name].get("eval_dataset") not in (None, ev):
                problems.append(f"analyses.{analysis}.experiments: {name!r} is scored on another dataset than "
                                f"evaluation.dataset ({ev!r}); the analyses read only that one's stores")
    return problems


def _scope(config: Config) -> list[str]:
    """Each run `scope.extra` keeps exists: an experiment, a grid's method as `<grid>/<method>`, or a grid."""
    problems = []
    for run in config.get("scope", {}).get("extra", {}):
        grid, _, method = run.partition("/")
        known = (method in config.get("grids", {}).get(grid, {}).get("methods", {}) if method
                 else run in config["experiments"] or run in config.get("grids", {}))
        if not known:
            problems.append(f"scope.extra: {run!r} is neither an experiment, a <grid>/<method> nor a grid here")
    return problems


def _families(flag: str) -> list[str]:
    """The registered dataset families whose class sets `flag` (`DatasetFamily.evaluated`, `official_test_images`)."""
    return [name for name, family in FAMILIES.items() if getattr(family, flag)]


def _of_families(config: Config, name: str, flag: str) -> bool:
    return dataset_family(config, name) in _families(flag)


def _evaluation(config: Config) -> list[str]:
    """The evaluation dataset is of the evaluated family (in9); the official images are a dataset of the official
    test images' family (bg_challenge) with its classes and size."""
    problems, ev = [], config["evaluation"]["dataset"]
    if ev not in config["datasets"]:
        problems.append(f"evaluation.dataset: {ev!r} is not in `datasets`")
    elif not _of_families(config, ev, "evaluated"):
        problems.append(f"evaluation.dataset: {ev!r} is a {dataset_family(config, ev)} dataset; the Background "
                        f"Challenge evaluation needs an {' or '.join(_families('evaluated'))} dataset (grids evaluate "
                        "on their own test sets)")
    official = config["evaluation"].get("official_dataset")
    if official is None:
        return problems
    if official not in config["datasets"] or not _of_families(config, official, "official_test_images"):
        problems.append(f"evaluation.official_dataset: {official!r} is not a "
                        f"{' or '.join(_families('official_test_images'))} dataset of `datasets`")
    elif ev in config["datasets"]:
        for key in ("classes", "image_size"):
            if config["datasets"][official][key] != config["datasets"][ev][key]:
                problems.append(f"datasets.{official}.{key}: must equal datasets.{ev}.{key} (the models' "
                                f"{'classes' if key == 'classes' else 'input size'})")
    return problems


def _evaluated_datasets(config: Config) -> list[str]:
    """The datasets of the evaluated family (in9): segmented, of photo views, scored by `evaluation`."""
    return [d for d in config["datasets"] if _of_families(config, d, "evaluated")]


def _segmentation(config: Config) -> list[str]:
    """Without segmentation the mask is the box: nothing can be cut out along a foreground."""
    problems = []
    for name in _evaluated_datasets(config):
        ds = config["datasets"][name]
        if ds["segmentation"]["method"] == "none" and (cut := [v for v in dataset_variants(config, name)
                                                           if v in NEEDS_FOREGROUND or v.startswith(BG_CONFLICT)]):
            problems.append(f"datasets.{name}.variants: {cut} are made from the foreground mask, which "
                            "`segmentation.method: none` does not compute; remove them or segment (grabcut, u2net)")
    return problems


#: the in9 variants with a training split under `train_views: photo`: original (the photos) and texture
#: (its negatives' example patches cut from them); the others would cut theirs from the stored square
PHOTO_TRAIN_VARIANTS = ("original", "texture")


def _photo_dataset(config: Config, name: str) -> list[str]:
    """A dataset of `train_views: photo`: geometry crop (its val split), photos at least the views'
    size, and no variant whose training split would be cut from the stored square."""
    ds, where = config["datasets"][name], f"datasets.{name}"
    problems = []
    if ds["geometry"] != "crop":
        problems.append(f"{where}.geometry: train_views: photo scores the centred square of each photo (geometry: "
                        "crop, crop_fraction), the authors' test geometry; set geometry: crop")
    if ds["view_source_size"] < ds["image_size"]:
        problems.append(f"{where}.view_source_size: {ds['view_source_size']} is under image_size {ds['image_size']}: "
                        "every view would be up-sampled from a smaller photo; set it to image_size or more "
                        "(256 at 224 px)")
    square = [v for v in dataset_variants(config, name) if v not in (*PHOTO_TRAIN_VARIANTS, *EXTERNAL)
              and "train" in (ds.get(v) or {}).get("splits", ["train"])]
    if square:
        problems.append(f"{where}.variants: {square} would cut their train split from the stored square; under "
                        "train_views: photo only original and texture make one: drop them, give a derived one "
                        "`splits: [val]`, or set train_views: square")
    return problems


def _photo_views(config: Config) -> list[str]:
    """`train_views: photo` (whole training photos): each such dataset fits it (`_photo_dataset`), is trained
    only by methods that cut their views from photos, and is not scored on its training split."""
    photos = [d for d in _evaluated_datasets(config) if config["datasets"][d].get("train_views") == "photo"]
    problems = [p for name in photos for p in _photo_dataset(config, name)]
    trained = [(f"experiments.{name}", exp["method"], exp["dataset"]) for name, exp in config["experiments"].items()]
    trained += [(f"grids.{name}.methods.{key}", spec["method"], grid["dataset"])
                for name, grid in config.get("grids", {}).items() for key, spec in grid["methods"].items()]
    for where, method, dataset in trained:
        if dataset in photos and method in REGISTRY and not method_spec(method).photo_views:
            problems.append(f"{where}.method: {method!r} crops the stored square, and dataset {dataset!r} stores whole "
                            "photos for training (train_views: photo), from which only the self-supervised methods "
                            "cut their views; set train_views: square for it")
    scored = {exp.get("eval_dataset") or config["evaluation"]["dataset"] for exp in config["experiments"].values()}
    if config["evaluation"]["split"] == "train" and (whole := sorted(scored & set(photos))):
        problems.append(f"evaluation.split: train of {whole}, whose training split holds whole photos (train_views: "
                        "photo), not test images; score the val split")
    return problems


def _evaluated_experiment(config: Config, name: str, exp: dict[str, Any], evaluated: list[str]) -> list[str]:
    """An experiment on a dataset of the evaluated family (in9): scored on one of its classes, trained on a built
    variant, its style pairs possible."""
    problems, target = [], exp.get("eval_dataset") or config["evaluation"]["dataset"]
    if target not in evaluated:
        if exp.get("eval_dataset"):
            problems.append(f"experiments.{name}.eval_dataset: {target!r} is not an "
                            f"{' or '.join(_families('evaluated'))} dataset of `datasets`")
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
                        f"the flat styles of datasets.{exp['dataset']}.stylized have none; use styles of kind folder")
    return problems


def _evaluated_experiments(config: Config) -> list[str]:
    evaluated = _evaluated_datasets(config)
    return [p for name, exp in config["experiments"].items() if exp["dataset"] in evaluated
            for p in _evaluated_experiment(config, name, exp, evaluated)]


def label_problems(config: Config) -> list[str]:
    """Labels name rows in the report's tables: two experiments with one label would read as one."""
    problems: list[str] = []
    seen: dict[str, str] = {IMAGENET_LABEL: "evaluation.imagenet_model"}
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
        where = (f"grids.{exp['grid']}.methods.{exp['grid_method']}" if "grid" in exp else f"experiments.{name}")
        for arg, outside in switches_outside(args, within, run_length(training, batches)).items():
            how = ("training.iterations" if training.get("iterations") else
                   f"{training['epochs']} epochs of about {batches:,} batches of {training['batch_size']} "
                   f"({images:,} training images expected)")
            problem = (f"{where}.method_args.{arg}: {outside} ({how}); set training.iterations to the paper's run "
                       f"length, or move the switch inside the run")
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
    problems = [f"{where}.{key}: set {key} in the top-level training section (it applies to every run)"
                for where, section in _training_sections(config) if where != "training"
                for key in WORKFLOW_TRAINING_KEYS if key in section]
    for tracker in config["training"].get("trackers", []):
        if importlib.util.find_spec(TRACKER_MODULES[tracker]) is None:
            problems.append(f"training.trackers: {tracker} needs the {TRACKER_MODULES[tracker]} package: "
                            "pip install -e '.[trackers]' (or remove it from the list)")
    return problems


def _timm_models(config: Config) -> list[str]:
    """Each `timm/<name>` arch names a model timm has (timm, and so torch, imported only when one is named)."""
    named = [(f"{where}.arch", section["arch"][len(TIMM_PREFIX):]) for where, section in _training_sections(config)
             if isinstance(section.get("arch"), str) and section["arch"].startswith(TIMM_PREFIX)]
    if not named:
        return []
    import timm

    return [f"{where}: timm has no model {name!r} (timm.list_models('{name[:4]}*') lists the names near it)"
            for where, name in named if not timm.is_model(name)]


#: the cross-reference checks of a validated config, in the order their problems are listed
CROSS_REFERENCE_CHECKS: tuple[Callable[[Config], list[str]], ...] = (
    _experiments, _grids, _sweeps, _scope, _evaluation, _segmentation, _photo_views, _evaluated_experiments, _analyses,
    label_problems, _trackers, _timm_models)


def cross_reference_problems(config: Config) -> list[str]:
    """Every problem of every check, the papers' own last (an empty list: the config's names all resolve)."""
    return [p for check in (*CROSS_REFERENCE_CHECKS, *paper_hooks.checks()) for p in check(config)]
