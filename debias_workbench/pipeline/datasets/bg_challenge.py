"""The official Background Challenge test set (Xiao et al., ICLR 2021) read as released:
`<root>/<variant>/val/<NN_class>/<image>`, no segmentation or compositing of ours, so our models
can be scored on the authors' images beside the variants we regenerate.

Each image is decoded and, if its side differs from `image_size`, resized (area filter when
shrinking); unreadable entries become skipped items of the manifest. Background labels follow
from the variant's definition: the image's own class where object and background come from one
image or from the same class, (y + 1) mod 9 for MIXED_NEXT, unknown (-1) for MIXED_RAND and ONLY_FG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import zarr

from debias_workbench.core.atomic import write_json
from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.core.provenance import store_provenance

from ..imageio import MIN_PICTURE_SIDE, Geometry, load_rgb
from ..sources.imagenet_subset import list_wnid_folder
from ..sources.listing import class_folders, entry_problem
from ..store import atomic_store, create_array
from .base import DatasetFamily, StepJob

OWN_BACKGROUND = ("original", "no_fg", "only_bg_b", "only_bg_t", "mixed_same")


def bias_label(variant: str, label: int, n_classes: int) -> int:
    if variant in OWN_BACKGROUND:
        return label
    if variant == "mixed_next":
        return (label + 1) % n_classes
    return -1


class BgChallengeFamily(DatasetFamily):
    name = "bg_challenge"
    official_test_images = True
    licence = (
        "the Background Challenge's released test images (Xiao et al. 2021), made from ImageNet "
        "photographs: ImageNet's terms of access apply, non-commercial research and educational use only"
    )

    def input_paths(self, ds_cfg: dict[str, Any], variant: str) -> list[str]:
        return [str(Path(ds_cfg["root"]).expanduser() / variant / "val")]

    def expected_images(self, ds_cfg: dict[str, Any], split: str) -> int:
        return 0 if split == "train" else 4_050  # the released test set: 450 images per class

    def variants(self, ds_cfg: dict[str, Any]) -> list[str]:
        return list(ds_cfg["variants"])

    def build_variant(self, job: StepJob) -> None:
        variant, ds_cfg, seed, out = self.known_variant(job), job.ds_cfg, job.seed, job.out
        folder = Path(ds_cfg["root"]).expanduser() / variant / "val"
        if not folder.is_dir():
            raise PipelineError(
                f"{folder} does not exist; `root` must hold the released <variant>/val/<NN_class>/ "
                "folders of the Background Challenge (bg_challenge/)"
            )
        classes, size = list(ds_cfg["classes"]), int(ds_cfg["image_size"])
        entries = [
            (label, path, f"val/{cls_dir.name}/{path.stem}")
            for label, cls_dir in enumerate(class_folders(folder, classes))
            for path in sorted(cls_dir.iterdir())
            if not path.name.startswith(".")
        ]
        images, labels, ids, skipped = read_val_images(entries, size, Geometry.of(ds_cfg), MIN_PICTURE_SIDE)
        attrs = {
            "classes": classes,
            "bias_classes": classes,
            "variant": variant,
            "family": self.name,
            "image_size": size,
            "provenance": store_provenance(ds_cfg, seed),
        }
        write_val_store(
            out,
            images,
            labels,
            [bias_label(variant, y, len(classes)) for y in labels],
            ids,
            attrs,
            int(ds_cfg["chunk_images"]),
        )
        write_json(
            out.parent / f"{variant}.manifest.json",
            {"val": {"inputs": len(entries), "outputs": len(images), "skipped": skipped}},
        )


def read_val_images(
    entries: list[tuple[int, Path, str]], size: int, geometry: Geometry, min_side: int
) -> tuple[list[np.ndarray], list[int], list[str], list[dict[str, Any]]]:
    """Decode every (label, path, item id) entry of a released test set, made size x size by
    `geometry` when it is not already (area filter when shrinking); unreadable entries become skipped items
    {id, path, reason}. Returns (images, labels, ids, skipped)."""
    images, labels, ids, skipped = [], [], [], []
    for label, path, item_id in entries:
        try:
            if (problem := entry_problem(path)) is not None:
                raise SkipItem(problem)
            image = load_rgb(path, min_side)
        except SkipItem as exc:
            skipped.append({"id": item_id, "path": str(path), "reason": exc.reason})
            continue
        images.append(geometry.apply(image, size))
        labels.append(label)
        ids.append(item_id)
    return images, labels, ids, skipped


def write_val_store(
    out: Path,
    images: list[np.ndarray],
    labels: list[int],
    bias_labels: list[int],
    ids: list[str],
    attrs: dict[str, Any],
    chunk_images: int,
    codec: str = "lz4",
) -> None:
    """A store with one `val` split (images, labels, bias_labels, ids) and the group `attrs`,
    written atomically: the layout every evaluation reads."""
    n = len(images)
    size = int(attrs["image_size"])
    with atomic_store(out) as tmp:
        group = zarr.open_group(tmp, mode="w")
        group.attrs.update(attrs)
        val = group.create_group("val")
        create_array(val, "images", (n, size, size, 3), np.uint8, chunk_images, codec=codec)[:] = (
            np.stack(images) if n else np.zeros((0, size, size, 3), np.uint8)
        )
        create_array(val, "labels", (n,), np.int64, max(n, 1), max(n, 1))[:] = np.array(labels, np.int64)
        create_array(val, "bias_labels", (n,), np.int64, max(n, 1), max(n, 1))[:] = np.array(bias_labels, np.int64)
        create_array(val, "ids", (n,), str, max(n, 1), max(n, 1))[:] = np.array(ids, dtype=str)


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
    images, labels, ids, skipped = read_val_images(
        listing.entries, size, Geometry.of(ds_cfg), int(ds_cfg["min_image_side"])
    )
    attrs = {
        "classes": classes,
        "bias_classes": classes,
        "variant": variant,
        "family": "in9",
        "image_size": size,
        "provenance": store_provenance(ds_cfg, seed),
    }
    write_val_store(
        out, images, labels, [-1] * len(images), ids, attrs, int(ds_cfg["chunk_images"]), ds_cfg["image_codec"]
    )
    write_json(
        out.parent / f"{variant}.manifest.json",
        {
            "val": {
                "inputs": len(listing.entries),
                "outputs": len(images),
                "skipped": skipped,
                "classes_found": listing.classes_found,
                "ignored_class_folders": listing.ignored_folders,
                "ignored_entries": listing.ignored_images,
            }
        },
    )
