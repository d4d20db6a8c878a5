"""A folder in the ImageNet-9 (Background Challenge) layout.

Accepted layouts under `root` (checked in this order):
  `original/<split>/<NN_class>/<image>`   (the released Background-Challenge layout)
  `<split>/<NN_class>/<image>`
  `<NN_class>/<image>`                    (no splits: each image goes to `val` with
                                           probability `val_fraction`, decided by its name)
Every configured class has its folder in every split (a missing or unknown class folder is an
error). Every entry of a class folder but hidden files is an item: broken links, sub-folders and
unreadable files become skipped items with the reason. Annotations, when given, are looked up as
`<annotations>/<split>/<NN_class>/<stem>.xml`, then `<annotations>/<wnid>/<stem>.xml` (ImageNet's own
layout, wnid = stem prefix), then `<annotations>/<stem>.xml`. True masks as
`<masks>/<split>/<NN_class>/<stem>.(png|npy)`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.seeding import name_seed

from .item import SourceItem
from .listing import class_folders, entry_problem

SPLITS = ("train", "val")


def list_in9_folder(cfg: dict[str, Any], classes: list[str]) -> list[SourceItem]:
    root = Path(cfg["root"]).expanduser()
    if not root.is_dir():
        raise PipelineError(
            f"source folder {root} does not exist; set `source.in9_folder.root` to a folder holding "
            "original/<split>/<NN_class>/*.JPEG (or <NN_class>/*.JPEG)"
        )
    base = root / "original" if (root / "original").is_dir() else root
    annotations = Path(cfg["annotations"]).expanduser() if cfg.get("annotations") else None
    masks = Path(cfg["masks"]).expanduser() if cfg.get("masks") else None
    if annotations is not None and not annotations.is_dir():
        raise PipelineError(f"annotation folder {annotations} does not exist; fix `annotations` or set it to null")
    split_dirs = [s for s in SPLITS if (base / s).is_dir()]
    items: list[SourceItem] = []
    if split_dirs:
        for split in split_dirs:
            items += _list_classes(base / split, classes, lambda stem, s=split: s, annotations, masks)
    else:
        val_fraction = float(cfg.get("val_fraction", 0.3))
        items += _list_classes(base, classes, lambda stem: _hash_split(stem, val_fraction), annotations, masks)
    if not items:
        raise PipelineError(f"no files found under {base}; expected <NN_class>/<image> folders named {classes[:2]}...")
    return items


def _hash_split(stem: str, val_fraction: float) -> str:
    return "val" if (name_seed("split", stem) % 10_000) < val_fraction * 10_000 else "train"


def _list_classes(
    base: Path, classes: list[str], split_of, annotations: Path | None, masks: Path | None
) -> list[SourceItem]:
    items = []
    for label, cls_dir in enumerate(class_folders(base, classes)):
        cls = cls_dir.name
        for path in sorted(cls_dir.iterdir()):
            if path.name.startswith("."):
                continue  # hidden files (.DS_Store) are not items
            split = split_of(path.stem)
            items.append(
                SourceItem.of_file(
                    path,
                    split,
                    cls,
                    label,
                    _find_annotation(annotations, split, cls, path.stem),
                    entry_problem(path),
                    true_mask=_find_mask(masks, split, cls, path.stem),
                )
            )
    return items


def _find_annotation(annotations: Path | None, split: str, cls: str, stem: str) -> Path | None:
    if annotations is None:
        return None
    wnid = stem.split("_")[0]
    for cand in (
        annotations / split / cls / f"{stem}.xml",
        annotations / wnid / f"{stem}.xml",
        annotations / f"{stem}.xml",
    ):
        if os.path.lexists(cand):  # a broken link or a folder of that name is found, and skipped as unreadable
            return cand
    return None


def _find_mask(masks: Path | None, split: str, cls: str, stem: str) -> Path | None:
    if masks is None:
        return None
    for suffix in (".png", ".npy"):
        cand = masks / split / cls / f"{stem}{suffix}"
        if cand.is_file():
            return cand
    return None
