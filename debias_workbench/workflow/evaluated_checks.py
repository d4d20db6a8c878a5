"""The config's checks of the datasets of the evaluated family (`DatasetFamily.evaluated`: the family whose
test sets the Background Challenge evaluation reads) and of the runs on them, each returning the problems it
finds with their dotted key and fix: the evaluation dataset and the official test images, segmentation where
variants are cut along the foreground, whole-photo training views (`train_views: photo`), and each
experiment's scoring dataset. `workflow.checks` runs them among the cross-reference checks."""

from __future__ import annotations

from typing import Any

from debias_workbench.pipeline.datasets import FAMILIES
from debias_workbench.pipeline.variants import BG_CONFLICT, EXTERNAL, NEEDS_FOREGROUND
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
    """The datasets of the evaluated family (in9): segmented, of photo views, scored by `evaluation`."""
    return [d for d in config["datasets"] if _of_families(config, d, "evaluated")]


def segmentation_problems(config: Config) -> list[str]:
    """Without segmentation the mask is the box: nothing can be cut out along a foreground."""
    problems = []
    for name in _evaluated_datasets(config):
        ds = config["datasets"][name]
        if ds["segmentation"]["method"] == "none" and (
            cut := [v for v in dataset_variants(config, name) if v in NEEDS_FOREGROUND or v.startswith(BG_CONFLICT)]
        ):
            problems.append(
                f"datasets.{name}.variants: {cut} are made from the foreground mask, which "
                "`segmentation.method: none` does not compute; remove them or segment (grabcut, u2net)"
            )
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
        problems.append(
            f"{where}.geometry: train_views: photo scores the centred square of each photo (geometry: "
            "crop, crop_fraction), the authors' test geometry; set geometry: crop"
        )
    if ds["view_source_size"] < ds["image_size"]:
        problems.append(
            f"{where}.view_source_size: {ds['view_source_size']} is under image_size {ds['image_size']}: "
            "every view would be up-sampled from a smaller photo; set it to image_size or more "
            "(256 at 224 px)"
        )
    square = [
        v
        for v in dataset_variants(config, name)
        if v not in (*PHOTO_TRAIN_VARIANTS, *EXTERNAL) and "train" in (ds.get(v) or {}).get("splits", ["train"])
    ]
    if square:
        problems.append(
            f"{where}.variants: {square} would cut their train split from the stored square; under "
            "train_views: photo only original and texture make one: drop them, give a derived one "
            "`splits: [val]`, or set train_views: square"
        )
    return problems


def photo_view_problems(config: Config) -> list[str]:
    """`train_views: photo` (whole training photos): each such dataset fits it (`_photo_dataset`), is trained
    only by methods that cut their views from photos, and is not scored on its training split."""
    photos = [d for d in _evaluated_datasets(config) if config["datasets"][d].get("train_views") == "photo"]
    problems = [p for name in photos for p in _photo_dataset(config, name)]
    trained = [(f"experiments.{name}", exp["method"], exp["dataset"]) for name, exp in config["experiments"].items()]
    trained += [
        (f"grids.{name}.methods.{key}", spec["method"], grid["dataset"])
        for name, grid in config.get("grids", {}).items()
        for key, spec in grid["methods"].items()
    ]
    for where, method, dataset in trained:
        if dataset in photos and method in REGISTRY and not method_spec(method).photo_views:
            problems.append(
                f"{where}.method: {method!r} crops the stored square, and dataset {dataset!r} stores whole "
                "photos for training (train_views: photo), from which only the self-supervised methods "
                "cut their views; set train_views: square for it"
            )
    scored = {exp.get("eval_dataset") or config["evaluation"]["dataset"] for exp in config["experiments"].values()}
    if config["evaluation"]["split"] == "train" and (whole := sorted(scored & set(photos))):
        problems.append(
            f"evaluation.split: train of {whole}, whose training split holds whole photos (train_views: "
            "photo), not test images; score the val split"
        )
    return problems


def _evaluated_experiment(config: Config, name: str, exp: dict[str, Any], evaluated: list[str]) -> list[str]:
    """An experiment on a dataset of the evaluated family (in9): scored on one of its classes, trained on a built
    variant, its style pairs possible."""
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
    if exp["train_variant"] in EXTERNAL:
        problems.append(
            f"experiments.{name}.train_variant: {exp['train_variant']!r} is a test set read as "
            "released (val split only); train on a variant the workflow builds"
        )
    stylized = config["datasets"][exp["dataset"]].get("stylized") or {}
    if (
        exp["method"] in REGISTRY
        and "stylized" in method_spec(exp["method"]).aligned_variants.values()
        and stylized.get("styles", {}).get("kind") == "flat"
    ):
        problems.append(
            f"experiments.{name}: method {exp['method']!r} pairs images by their style's class, and "
            f"the flat styles of datasets.{exp['dataset']}.stylized have none; use styles of kind folder"
        )
    return problems


def evaluated_experiment_problems(config: Config) -> list[str]:
    evaluated = _evaluated_datasets(config)
    return [
        p
        for name, exp in config["experiments"].items()
        if exp["dataset"] in evaluated
        for p in _evaluated_experiment(config, name, exp, evaluated)
    ]
