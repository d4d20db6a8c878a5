"""A subset of ImageNet-1k read from the user's train/val folders, and other wnid-folder sets.

ImageNet-100 (Ge et al., NeurIPS 2021, Table 1) is the 100 classes of Tian et al.'s CMC list,
packaged as `imagenet100_cmc.txt` beside this module (`cmc_imagenet100_wnids`). The dataset's
`classes` name them `NN_<wnid>` (the wnids sorted, as torchvision's ImageFolder orders them),
so the listing needs nothing but the class list and the folders:

  `<root>/train/<wnid>/*.JPEG` and `<root>/val/<wnid>/*.JPEG` (the usual `valprep` layout;
  the other wnid folders of the full ImageNet are not read)

Boxes, when `annotations` is given, are ImageNet's `<annotations>/<wnid>/<stem>.xml`, then
`<annotations>/<split>/<stem>.xml`, then `<annotations>/<stem>.xml` (as `imagenet.py`).

ImageNet-Sketch (`sketch/<wnid>/*`) and ImageNet-R (`imagenet-r/<wnid>/*`) are read by
`list_wnid_folder`: the images of the dataset's classes, each labelled by its wnid; the folders
of other classes are ignored and counted.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from debias_workbench.core.errors import PipelineError

from .item import SourceItem
from .listing import entry_problem

SPLITS = ("train", "val")
#: the packaged class list (its header names the source repository, path and commit)
CMC_LIST = "imagenet100_cmc.txt"


def cmc_imagenet100_wnids() -> list[str]:
    """The 100 wnids of Tian et al.'s ImageNet-100, in the order of the CMC file."""
    text = resources.files("debias_workbench.pipeline.sources").joinpath(CMC_LIST).read_text()
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def class_wnid(class_name: str) -> str:
    """The wnid of a class folder name `NN_<wnid>`."""
    return class_name.split("_", 1)[1]


def list_imagenet_subset(cfg: dict[str, Any], classes: list[str]) -> list[SourceItem]:
    """Every entry of `<root>/<split>/<wnid>/` for the wnid of each class (label = the class's
    index). A missing split or class folder stops the run naming it; an empty class folder is
    allowed (printed), as the subset may be partly downloaded."""
    root = Path(cfg["root"]).expanduser()
    annotations = Path(cfg["annotations"]).expanduser() if cfg.get("annotations") else None
    if annotations is not None and not annotations.is_dir():
        raise PipelineError(
            f"annotation folder {annotations} does not exist; fix "
            "`source.imagenet_subset.annotations` or set it to null (a centred fallback box)"
        )
    items: list[SourceItem] = []
    for split in SPLITS:
        split_dir = root / split
        if not split_dir.is_dir():
            raise PipelineError(
                f"{split_dir} does not exist; `source.imagenet_subset.root` must hold train/<wnid>/ "
                "and val/<wnid>/ folders of ImageNet-1k images (the val images sorted into wnid "
                "folders)"
            )
        missing = [class_wnid(c) for c in classes if not (split_dir / class_wnid(c)).is_dir()]
        if missing:
            raise PipelineError(
                f"{len(missing)} of the {len(classes)} class folders are missing in {split_dir}: "
                f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}; place each class's "
                f"ImageNet {split} images in {split_dir}/<wnid>/"
            )
        empty = []
        for label, cls in enumerate(classes):
            wnid = class_wnid(cls)
            entries = sorted(p for p in (split_dir / wnid).iterdir() if not p.name.startswith("."))
            if not entries:
                empty.append(wnid)
            for path in entries:
                items.append(
                    SourceItem.of_file(
                        path, split, cls, label, _find_box(annotations, wnid, split, path.stem), entry_problem(path)
                    )
                )
        if empty:
            print(
                f"note: {len(empty)} class folder(s) of {split_dir} are empty: {', '.join(empty[:5])}"
                f"{' ...' if len(empty) > 5 else ''}",
                file=sys.stderr,
            )
    return items


def _find_box(annotations: Path | None, wnid: str, split: str, stem: str) -> Path | None:
    if annotations is None:
        return None
    for cand in (annotations / wnid / f"{stem}.xml", annotations / split / f"{stem}.xml", annotations / f"{stem}.xml"):
        if cand.is_file():
            return cand
    return None


@dataclass(frozen=True)
class WnidFolderListing:
    """The entries of a `<root>/<wnid>/*` set that belong to the dataset's classes, and what was
    left out: the folders of other wnids and the entries they hold."""

    entries: list[tuple[int, Path, str]]  # (label, path, item id "val/<class>/<stem>")
    ignored_folders: int
    ignored_images: int
    classes_found: int


def list_wnid_folder(root: Path, classes: list[str], what: str) -> WnidFolderListing:
    """The images of `root/<wnid>/` for every class `NN_<wnid>` of `classes` (in label, then name
    order); the other wnid folders are counted, not read (ImageNet-R holds 200 classes, the
    subset's models know only theirs). `what` names the set in the error messages."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise PipelineError(
            f"{what} folder {root} does not exist; point it at the folder holding one <wnid>/ folder "
            "of images per class, or set it to null"
        )
    label_of = {class_wnid(c): k for k, c in enumerate(classes)}
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    entries: list[tuple[int, Path, str]] = []
    ignored_folders = ignored_images = found = 0
    for folder in folders:
        if folder.name not in label_of:
            ignored_folders += 1
            ignored_images += sum(1 for e in os.scandir(folder) if not e.name.startswith("."))
            continue
        found += 1
        label = label_of[folder.name]
        entries += [
            (label, path, f"val/{classes[label]}/{path.stem}")
            for path in sorted(folder.iterdir())
            if not path.name.startswith(".")
        ]
    if not found:
        raise PipelineError(
            f"{root} holds no folder named after a wnid of the dataset's classes "
            f"({', '.join(class_wnid(c) for c in classes[:3])}, ...); point {what} at the folder of "
            "<wnid>/ folders (ImageNet-Sketch: its sketch/ folder)"
        )
    return WnidFolderListing(sorted(entries, key=lambda e: (e[0], e[1].name)), ignored_folders, ignored_images, found)
