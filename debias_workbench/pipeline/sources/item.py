from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceItem:
    """One source image. `id` is `<split>/<class>/<stem>` and unique within a dataset."""

    id: str
    path: Path
    split: str
    label: int
    annotation: Path | None  # VOC XML with the object's bounding box(es), if any
    true_mask: Path | None = None  # ground-truth foreground mask, for measuring segmentation
    problem: str | None = None  # why the entry cannot be an image (a broken link): a skipped item

    @classmethod
    def of_file(
        cls,
        path: Path,
        split: str,
        class_name: str,
        label: int,
        annotation: Path | None,
        problem: str | None,
        true_mask: Path | None = None,
    ) -> SourceItem:
        """The item of the file `path` in the folder of `class_name`: its id from the split, class and file stem."""
        return cls(f"{split}/{class_name}/{path.stem}", path, split, label, annotation, true_mask, problem)
