"""The config's checks of the datasets of the evaluated family (`DatasetFamily.evaluated`: the family whose
test sets the Background Challenge evaluation reads) and of the runs on them, each returning the problems it
finds with their dotted key and fix: the evaluation dataset and the official test images, each dataset's section
as its family checks it, whole-photo training views (`DatasetFamily.train_photos`), each experiment's scoring
dataset, train variant and aligned stores. `workflow.checks` runs them among the cross-reference checks."""

from __future__ import annotations

from typing import Any

from debias_workbench.pipeline.datasets import FAMILIES, get_family, train_photos
from debias_workbench.pipeline.imageio import TrainPhotos
from debias_workbench.training.methods import REGISTRY
from debias_workbench.training.methods import spec as method_spec

from .lookup import dataset_family, dataset_variants

Config = dict[str, Any]


def _families(flag: str) -> list[str]:
    """The registered dataset families whose class sets `flag` (`DatasetFamily.evaluated`, `official_test_images`)."""
    return [name for name, family in FAMILIES.items() if getattr(family, flag)]


def _of_families(config: Config, name: str, flag: str) -> bool:
    return dataset_family(config, name) in _families(flag)


def evaluation_problems(config: Config) -> list[str]:
    """The evaluation dataset is of the evaluated family (in9); the official images are a dataset of the official
    test images' family (bg_challenge) with its classes and size."""
    problems, ev = [], config["evaluation"]["dataset"]
    if ev not in config["datasets"]:
        problems.append(f"evaluation.dataset: {ev!r} is not in `datasets`")
    elif not _of_families(config, ev, "evaluated"):
        problems.append(
            f"evaluation.dataset: {ev!r} is a {dataset_family(config, ev)} dataset; the Background "
            f"Challenge evaluation needs an {' or '.join(_families('evaluated'))} dataset (grids evaluate "
            "on their own test sets)"
        )
    official = config["evaluation"].get("official_dataset")
    if official is None:
        return problems
    if official not in config["datasets"] or not _of_families(config, official, "official_test_images"):
        problems.append(
            f"evaluation.official_dataset: {official!r} is not a "
            f"{' or '.join(_families('official_test_images'))} dataset of `datasets`"
        )
    elif ev in config["datasets"]:
        for key in ("classes", "image_size"):
            if config["datasets"][official][key] != config["datasets"][ev][key]:
                problems.append(
                    f"datasets.{official}.{key}: must equal datasets.{ev}.{key} (the models' "
                    f"{'classes' if key == 'classes' else 'input size'})"
                )
    return problems


def _evaluated_datasets(config: Config) -> list[str]:
    """The datasets of the evaluated family (in9), scored by `evaluation`."""
    return [d for d in config["datasets"] if _of_families(config, d, "evaluated")]


def section_problems(config: Config) -> list[str]:
    """Each dataset's section as its family checks it (`DatasetFamily.section_problems`)."""
    return [
        p
        for name, ds in config["datasets"].items()
        for p in get_family(dataset_family(config, name)).section_problems(
            ds, f"datasets.{name}", dataset_variants(config, name)
        )
    ]


def _whole_photo_datasets(config: Config) -> list[str]:
    """The datasets whose training split holds whole photos (`DatasetFamily.train_photos`)."""
    return [name for name, ds in config["datasets"].items() if train_photos(ds)]


def photo_view_problems(config: Config) -> list[str]:
    """A dataset of whole training photos (`DatasetFamily.train_photos`) is trained only by methods that cut their
    views from photos, and not scored on its training split."""
    photos = _whole_photo_datasets(config)
    trained = [(f"experiments.{name}", exp["method"], exp["dataset"]) for name, exp in config["experiments"].items()]
    trained += [
        (f"grids.{name}.methods.{key}", spec["method"], grid["dataset"])
        for name, grid in config.get("grids", {}).items()
        for key, spec in grid["methods"].items()
    ]
    problems = []
    for where, method, dataset in trained:
        if dataset in photos and method in REGISTRY and not method_spec(method).photo_views:
            problems.append(
                f"{where}.method: {method!r} crops the stored square, and dataset {dataset!r} stores whole "
                f"photos for training ({TrainPhotos.SETTING}), from which only the self-supervised methods "
                f"cut their views; set {TrainPhotos.UNSET} for it"
            )
    scored = {exp.get("eval_dataset") or config["evaluation"]["dataset"] for exp in config["experiments"].values()}
    if config["evaluation"]["split"] == "train" and (whole := sorted(scored & set(photos))):
        problems.append(
            f"evaluation.split: train of {whole}, whose training split holds whole photos ({TrainPhotos.SETTING}), "
            "not test images; score the val split"
        )
    return problems


def _evaluated_experiment(config: Config, name: str, exp: dict[str, Any], evaluated: list[str]) -> list[str]:
    """An experiment on a dataset of the evaluated family (in9): scored on one of its classes."""
    problems, target = [], exp.get("eval_dataset") or config["evaluation"]["dataset"]
    if target not in evaluated:
        if exp.get("eval_dataset"):
            problems.append(
                f"experiments.{name}.eval_dataset: {target!r} is not an "
                f"{' or '.join(_families('evaluated'))} dataset of `datasets`"
            )
    elif config["datasets"][target]["classes"] != config["datasets"][exp["dataset"]]["classes"]:
        problems.append(
            f"experiments.{name}: trained on {exp['dataset']!r} "
            f"({len(config['datasets'][exp['dataset']]['classes'])} classes) but scored on {target!r} "
            f"({len(config['datasets'][target]['classes'])} classes); set "
            f"experiments.{name}.eval_dataset to a dataset with the same classes (e.g. its own)"
        )
    return problems


def _trained_data(config: Config, name: str, exp: dict[str, Any]) -> list[str]:
    """An experiment trains on a variant its family lets a run train on (`DatasetFamily.train_variant_problem`),
    and its method's aligned stores are ones the family can pair (`aligned_variant_problem`)."""
    if exp["dataset"] not in config["datasets"]:
        return []
    ds, family = config["datasets"][exp["dataset"]], get_family(dataset_family(config, exp["dataset"]))
    problems = []
    if why := family.train_variant_problem(ds, exp["train_variant"]):
        problems.append(f"experiments.{name}.train_variant: {exp['train_variant']!r} {why}")
    aligned = method_spec(exp["method"]).aligned_variants.values() if exp["method"] in REGISTRY else ()
    for variant in aligned:
        if why := family.aligned_variant_problem(ds, f"datasets.{exp['dataset']}", variant):
            problems.append(f"experiments.{name}: method {exp['method']!r} {why}")
    return problems


def evaluated_experiment_problems(config: Config) -> list[str]:
    evaluated = _evaluated_datasets(config)
    return [
        p
        for name, exp in config["experiments"].items()
        for p in (_evaluated_experiment(config, name, exp, evaluated) if exp["dataset"] in evaluated else [])
        + _trained_data(config, name, exp)
    ]
