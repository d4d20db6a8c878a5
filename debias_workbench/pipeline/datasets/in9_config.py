"""What the config layer asks of an in9 dataset beyond its schema (`In9Family`'s hooks): the problems of its
section (segmentation where variants are cut along the foreground, whole-photo training views), the train
variants and aligned stores its runs cannot use, the rules its variants' code fixes that a paper's
protocol may name (`workflow.protocol.code_rules`), and its section's counts in smoke mode."""

from __future__ import annotations

from typing import Any

from ..imageio import TrainPhotos
from ..variants import BG_CONFLICT, EXTERNAL, NEEDS_FOREGROUND

#: the variants with a training split under `train_views: photo`: original (the photos) and texture (its
#: negatives' example patches cut from them); the others would cut theirs from the stored square
PHOTO_TRAIN_VARIANTS = ("original", "texture")

#: {rule: value} of the code of some in9 variants and settings only (`DatasetFamily.conditional_code_rules`)
CONDITIONAL_CODE_RULES = {
    # training/augment.py Augmenter.photo_draw, of whole photos (`train_views: photo`): get_params' tries and fallback
    "random_resized_crop_of_photos": "up to 10 draws, then a centre crop",
    # pipeline/corruptions.py assign_pairs: the (corruption, severity) copies of each val image scored (IN-9-C)
    "corruption_copies": "one drawn pair per image",
    # pipeline/texture_patches.py work_patch_side: the example patches scaled from the photo to the work image
    # (IN-9-Texture)
    "texture_scale": "the work image's, patches scaled to their share of the photo",
}


#: images per class and split read from a folder source (IN-9 folder, ImageNet, ImageNet-100) in smoke mode; 2 val
#: images per class, so that Mixed-Same / Mixed-Rand find a background in every class
SMOKE_FOLDER_IMAGES_PER_CLASS = {"train": 2, "val": 2}
#: synthetic IN-9 in smoke mode: the schema's minimum per class
SMOKE_SYNTHETIC_PER_CLASS = 2
#: GrabCut iterations in smoke mode (the schema's minimum): the same code path, the cost of one iteration, not ten
SMOKE_GRABCUT_ITERATIONS = 1


def smoke_section(ds: dict[str, Any]) -> None:
    """Smoke mode's counts (`workflow.smoke`): one background-biased percentage, a few images per class of the
    source, one GrabCut iteration, two embedded styles per class."""
    if percents := ds.get("bg_conflict_percents"):
        ds["bg_conflict_percents"] = percents[:1]
    if "iterations" in (segmentation := ds.get("segmentation", {})):
        segmentation["iterations"] = SMOKE_GRABCUT_ITERATIONS
    source = ds["source"]
    source["max_per_class"] = dict(SMOKE_FOLDER_IMAGES_PER_CLASS)
    if synthetic := source.get("synthetic"):
        synthetic.update(train_per_class=SMOKE_SYNTHETIC_PER_CLASS, val_per_class=SMOKE_SYNTHETIC_PER_CLASS)
    styles = ds.get("stylized", {}).get("styles")
    if styles and styles.get("kind") == "embedded":
        styles["per_class"] = min(styles["per_class"], 2)


def section_problems(ds: dict[str, Any], where: str, variants: list[str]) -> list[str]:
    """Variants cut along the foreground need segmentation; a section of training photos fits them."""
    problems = []
    if ds["segmentation"]["method"] == "none" and (
        cut := [v for v in variants if v in NEEDS_FOREGROUND or v.startswith(BG_CONFLICT)]
    ):
        problems.append(
            f"{where}.variants: {cut} are made from the foreground mask, which "
            "`segmentation.method: none` does not compute; remove them or segment (grabcut, u2net)"
        )
    return problems + (_photo_problems(ds, where, variants) if TrainPhotos.of(ds) else [])


def _photo_problems(ds: dict[str, Any], where: str, variants: list[str]) -> list[str]:
    """A section of `train_views: photo`: geometry crop (its val split), photos at least the views'
    size, and no variant whose training split would be cut from the stored square."""
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
        for v in variants
        if v not in (*PHOTO_TRAIN_VARIANTS, *EXTERNAL) and "train" in (ds.get(v) or {}).get("splits", ["train"])
    ]
    if square:
        problems.append(
            f"{where}.variants: {square} would cut their train split from the stored square; under "
            "train_views: photo only original and texture make one: drop them, give a derived one "
            "`splits: [val]`, or set train_views: square"
        )
    return problems


def train_variant_problem(variant: str) -> str:
    """An `external` test set is read as released, its val split only."""
    if variant in EXTERNAL:
        return "is a test set read as released (val split only); train on a variant the workflow builds"
    return ""


def aligned_variant_problem(ds: dict[str, Any], where: str, variant: str) -> str:
    """A method pairing images by their Stylized IN-9 style's class needs styles that have one."""
    stylized = ds.get("stylized") or {}
    if variant == "stylized" and stylized.get("styles", {}).get("kind") == "flat":
        return (
            f"pairs images by their style's class, and the flat styles of {where}.stylized have none; use styles "
            "of kind folder"
        )
    return ""
