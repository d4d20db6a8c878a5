"""ImageNet-9 Background Challenge: source -> listing -> segmented shards -> intermediate store
-> 8 variants (and the derived ones, and the background-biased `bg_conflict_<p>` variants).

The family also builds other ImageNet subsets the same way (ImageNet-100, source
`imagenet_subset`), and the test sets of their classes read from the user's folders as released
(`external`: ImageNet-Sketch, ImageNet-R; val split only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_workbench.core.atomic import atomic_path, write_json
from debias_workbench.core.provenance import code_version, config_hash

from ..derived_stage import DERIVED, derived_gather, derived_shard, run_derived_stage
from ..segment_stage import gather_shards, run_segment_stage, segment_shard, shard_items
from ..sources import list_source_items
from ..sources.imagenet_subset import list_wnid_folder
from ..sources.listing import read_listing, write_listing
from ..sources.synthetic import make_synthetic_in9
from ..variant_stage import run_variant_stage
from ..variants import BG_CONFLICT, EXTERNAL, bg_conflict_variants
from .base import DatasetFamily
from ..imageio import Geometry
from .bg_challenge import read_val_images, write_val_store


class In9Family(DatasetFamily):
    name = "in9"
    #: the Background Challenge's columns (Xiao et al.; CLAD's Table 2): BG-GAP = Mixed-Same - Mixed-Rand
    headline = ("original", "only_fg", "mixed_rand", "mixed_same", "only_bg_t", "bg_gap")
    val_split = "backgrounds as biased as the train split"
    whole_variants = False  # listing, segmentation shards and gathers: rules/in9_data.smk, in9_derived.smk
    #: training images of the sources whose size the config does not give (the Background
    #: Challenge's IN-9 train split; ImageNet's 370 IN-9 classes; ImageNet-100's train split)
    FOLDER_TRAIN_IMAGES = {"in9_folder": 45_405, "imagenet": 481_000, "imagenet_subset": 126_689}

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        source = ds_cfg["source"]
        if source["kind"] == "synthetic":
            syn = source["synthetic"]
            return len(ds_cfg["classes"]) * syn["train_per_class" if split == "train" else "val_per_class"]
        images = self.FOLDER_TRAIN_IMAGES[source["kind"]]
        return images if split == "train" else images // 10

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return (list(ds_cfg["variants"]) + bg_conflict_variants(ds_cfg.get("bg_conflict_percents", []))
                + external_variants(ds_cfg))

    def test_sets(self, ds_cfg: dict[str, Any], train_variant: str) -> dict[str, str]:
        """A background-biased train variant: "valid" (its val split, biased alike) and "unbiased"
        (Mixed-Rand: backgrounds independent of the class); otherwise every variant."""
        if train_variant.startswith(BG_CONFLICT):
            return {"valid": train_variant, "unbiased": "mixed_rand"}
        return {v: v for v in self.variants(ds_cfg)}

    def group_metrics(self, ds_cfg: dict[str, Any], train_variant: str) -> bool:
        """The background-biased train variants (Park et al.'s Waterbirds analogue) are scored as the
        conflict-ratio families are; the Background Challenge columns need none."""
        return train_variant.startswith(BG_CONFLICT)

    def run_step(self, step: str, ds_cfg: dict[str, Any], seed: int, out: Path, inputs: list[Path],
                 workers: int = 1, variant: str | None = None, shard: int | None = None) -> None:
        """Steps: `source` (the synthetic set), `list` (inputs: the synthetic folder, if any),
        `segment-shard` (inputs: the listing), `segment-gather` (inputs: the listing, then every
        shard in order), `segment` (list + all shards + gather in one process) and `variant`
        (inputs: the segmented store and its manifest; for an `external` variant, its folder)."""
        quality, manifest = out.parent / "segmentation_quality.jsonl", out.parent / "segmented.manifest.json"
        if step == "source":
            with atomic_path(out) as tmp:
                make_synthetic_in9(tmp, ds_cfg["source"]["synthetic"], ds_cfg["classes"], seed)
        elif step == "list":
            write_listing(list_source_items(ds_cfg["source"], ds_cfg["classes"], inputs[0] if inputs else None), out)
        elif step == "segment-shard":
            segment_shard(shard_items(read_listing(inputs[0]), ds_cfg, shard), ds_cfg, seed, out)
        elif step == "segment-gather":
            gather_shards(read_listing(inputs[0]), inputs[1:], ds_cfg, seed, out, quality, manifest)
        elif step == "segment":
            items = list_source_items(ds_cfg["source"], ds_cfg["classes"], inputs[0] if inputs else None)
            run_segment_stage(items, ds_cfg, seed, out, quality, manifest, workers)
        elif step == "variant" and variant in EXTERNAL:
            build_external(variant, inputs[0], ds_cfg, seed, out)
        elif step == "variant" and variant in DERIVED:
            seg_store, seg_manifest = inputs
            run_derived_stage(variant, seg_store, seg_manifest, ds_cfg, seed, out,
                              out.parent / f"{variant}.manifest.json", workers)
        elif step == "variant":
            seg_store, seg_manifest = inputs
            run_variant_stage(seg_store, seg_manifest, variant, ds_cfg, seed, out,
                              out.parent / f"{variant}.manifest.json", workers, self.name)
        elif step == "derived-shard":
            derived_shard(variant, inputs[0], ds_cfg, seed, shard, out)
        elif step == "derived-gather":
            derived_gather(variant, inputs[0], inputs[1], inputs[2:], ds_cfg, seed, out,
                           out.parent / f"{variant}.manifest.json")
        else:
            raise ValueError(step)


def external_variants(ds_cfg: dict[str, Any]) -> list[str]:
    """The `external` test sets given a folder (ImageNet-Sketch, ImageNet-R), in `EXTERNAL` order."""
    given = ds_cfg.get("external") or {}
    return [name for name in EXTERNAL if given.get(name)]


def build_external(variant: str, folder: Path, ds_cfg: dict[str, Any], seed: int, out: Path) -> None:
    """An `external` test set's store (val split; bias label -1: none) from `<folder>/<wnid>/*`
    (the folder `external.<variant>` names; the job gets it as its input, not from its config):
    the images of the dataset's classes, each labelled by its wnid, resized to `image_size` as
    the Background Challenge's released images are. Scoring them takes the model's argmax over
    all the dataset's classes, on the images of the classes the set shares with it (ImageNet-R
    holds 200 ImageNet classes, a subset of the 100 has images there). The manifest counts the
    folders and entries of other classes, which are not read."""
    classes, size = list(ds_cfg["classes"]), int(ds_cfg["image_size"])
    listing = list_wnid_folder(Path(folder), classes, f"external.{variant}")
    images, labels, ids, skipped = read_val_images(listing.entries, size, Geometry.of(ds_cfg), int(ds_cfg["min_image_side"]))
    attrs = {"classes": classes, "bias_classes": classes, "variant": variant, "family": "in9", "image_size": size,
             "provenance": {"config_hash": config_hash(ds_cfg), "seed": seed, "code_version": code_version()}}
    write_val_store(out, images, labels, [-1] * len(images), ids, attrs, int(ds_cfg["chunk_images"]),
                    ds_cfg["image_codec"])
    write_json(out.parent / f"{variant}.manifest.json",
               {"val": {"inputs": len(listing.entries), "outputs": len(images), "skipped": skipped,
                        "classes_found": listing.classes_found, "ignored_class_folders": listing.ignored_folders,
                        "ignored_entries": listing.ignored_images}})
