"""Where source images come from. Each source kind lists `SourceItem`s in a fixed order.

Kinds: `synthetic` (made by the workflow, written in the IN-9 folder layout), `in9_folder`
(a Background-Challenge style folder, with or without split folders and boxes),
`imagenet` (ImageNet train/val folders, their XML boxes and the IN-1k to IN-9 mapping) and
`imagenet_subset` (the ImageNet train/val folders of the dataset's `NN_<wnid>` classes, e.g.
ImageNet-100).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .folder import list_in9_folder
from .imagenet import list_imagenet
from .imagenet_subset import list_imagenet_subset
from .item import SourceItem

__all__ = ["SourceItem", "list_source_items"]


def list_source_items(
    source: dict[str, Any], classes: list[str], synthetic_root: Path | None = None
) -> list[SourceItem]:
    """All items of a source config, sorted by id (the order never depends on the file system)."""
    kind = source["kind"]
    if kind == "synthetic":
        assert synthetic_root is not None, "the synthetic source needs the folder its rule wrote"
        items = list_in9_folder(
            {
                "root": str(synthetic_root),
                "annotations": str(synthetic_root / "annotations"),
                "masks": str(synthetic_root / "fg_mask"),
            },
            classes,
        )
    elif kind == "in9_folder":
        items = list_in9_folder(source["in9_folder"], classes)
    elif kind == "imagenet":
        items = list_imagenet(source["imagenet"], classes)
    elif kind == "imagenet_subset":
        items = list_imagenet_subset(source["imagenet_subset"], classes)
    else:  # the schema rejects other kinds before we get here
        raise ValueError(kind)
    return first_per_class(sorted(items, key=lambda it: it.id), source.get("max_per_class"))


def first_per_class(items: list[SourceItem], caps: dict[str, int] | None) -> list[SourceItem]:
    """The first `caps[split]` items of each (split, class) of the sorted `items` (smoke mode's
    few images per class); all of them without a cap. The listing is the generation plan, so
    the cap reaches segmentation and every variant."""
    if not caps:
        return items
    taken: dict[tuple[str, int], int] = {}
    out = []
    for item in items:
        key = (item.split, item.label)
        if taken.get(key, 0) < caps.get(item.split, len(items)):
            taken[key] = taken.get(key, 0) + 1
            out.append(item)
    return out
