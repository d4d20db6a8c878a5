"""The listing of a source: every item (or skipped entry) in id order, as a JSON file that the
per-shard segmentation jobs share, so they all agree on which item is in which shard."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from debias_workbench.core.atomic import write_text_atomic
from debias_workbench.core.errors import PipelineError

from .item import SourceItem

PATH_FIELDS = ("path", "annotation", "true_mask")


def write_listing(items: list[SourceItem], path: Path) -> None:
    rows = [{k: (str(v) if k in PATH_FIELDS and v is not None else v) for k, v in asdict(it).items()} for it in items]
    write_text_atomic(path, json.dumps({"items": rows}, indent=0) + "\n")


def _with_paths(row: dict[str, Any]) -> dict[str, Any]:
    """A listing row with its path fields as Paths again."""
    return {k: (Path(v) if k in PATH_FIELDS and v is not None else v) for k, v in row.items()}


def read_listing(path: Path) -> list[SourceItem]:
    rows = json.loads(Path(path).read_text())["items"]
    return [
        # a row holds SourceItem's fields (`write_listing` wrote it from the dataclass)
        SourceItem(**_with_paths(row))
        for row in rows
    ]


def entry_problem(path: Path) -> str | None:
    """Why a class-folder entry cannot be read as an image file, or None if it can be tried.
    Such entries become skipped items, so images in = images out + skipped holds."""
    if path.is_symlink() and not path.exists():
        return f"broken symbolic link (to {os.readlink(path)}); fix the link or delete it"
    if path.is_dir():
        return f"a folder inside a class folder; move its images up into {path.parent}"
    if not path.is_file():
        return "not a regular file; delete it from the class folder"
    if not os.access(path, os.R_OK):
        return "not readable (permissions); make it readable (chmod a+r) or delete it"
    return None


def class_folders(base: Path, classes: list[str]) -> list[Path]:
    """`base/<class>` for every class, in label order. A folder of another name, or a class
    without its folder, is a `PipelineError` naming it: a model must not silently train or be
    scored on fewer classes than the config declares."""
    found = sorted(p.name for p in base.iterdir() if p.is_dir())
    if unknown := [name for name in found if name not in classes]:
        raise PipelineError(
            f"folder(s) {unknown} in {base} are not among the configured classes {classes}; "
            "rename them or fix `classes` in the dataset config"
        )
    if absent := [cls for cls in classes if cls not in found]:
        raise PipelineError(
            f"class folder(s) {[str(base / cls) for cls in absent]} are missing: every split holds "
            "every configured class; restore them (an interrupted copy?) or fix `classes`"
        )
    return [base / cls for cls in classes]


def folder_fingerprint(paths: list[str], depth: int = 3) -> str:
    """A hash of the modification times of `paths` and of their folders down to `depth` (the
    class folders of every supported layout): adding, removing or renaming an image changes
    it, without reading every file. Missing paths hash as missing."""
    digest = hashlib.sha256()
    for top in paths:
        root = Path(top).expanduser()
        stack = [(root, 0)]
        while stack:
            path, level = stack.pop()
            try:
                info = path.stat()
            except OSError:
                digest.update(f"{path}:missing\n".encode())
                continue
            digest.update(f"{path.relative_to(root)}:{info.st_mtime_ns}\n".encode())
            if level < depth and path.is_dir():
                stack += sorted(((Path(e.path), level + 1) for e in os.scandir(path) if e.is_dir()), reverse=True)
    return digest.hexdigest()[:16]
