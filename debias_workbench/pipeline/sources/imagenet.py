"""ImageNet-1k train/val folders plus their XML boxes, mapped to the 9 IN-9 classes.

Expected: `<root>/train/<wnid>/*.JPEG` and `<root>/val/<wnid>/*.JPEG` (the usual
`valprep` layout), 1000 wnid folders whose sorted order is the IN-1k class index, and
`mapping` = in_to_in9.json (IN-1k index -> IN-9 label or -1). Boxes: ImageNet's
`Annotation/<wnid>/<stem>.xml` (train) and `val/<stem>.xml` under `annotations`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from debias_workbench.core.errors import PipelineError

from .item import SourceItem
from .listing import entry_problem


def load_in1k_to_in9(mapping_path: Path) -> dict[int, int]:
    try:
        raw = json.loads(Path(mapping_path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PipelineError(
            f"cannot read the IN-1k to IN-9 mapping {mapping_path} ({exc}); "
            "point `mapping` at in_to_in9.json from the Background Challenge release"
        ) from exc
    try:  # a JSON file of the wrong shape (a list, word keys, null labels) is named as well
        mapping = {int(k): int(v) for k, v in raw.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise PipelineError(
            f"{mapping_path} is not a JSON object of IN-1k index -> IN-9 label ({exc}); "
            "point `mapping` at in_to_in9.json from the Background Challenge release"
        ) from exc
    if sorted(mapping) != list(range(1000)) or not set(mapping.values()) <= set(range(-1, 9)):
        raise PipelineError(f"{mapping_path} must map every IN-1k index 0..999 to an IN-9 label 0..8 or -1")
    return mapping


def list_imagenet(cfg: dict[str, Any], classes: list[str]) -> list[SourceItem]:
    root = Path(cfg["root"]).expanduser()
    mapping = load_in1k_to_in9(Path(cfg["mapping"]).expanduser())
    annotations = Path(cfg["annotations"]).expanduser() if cfg.get("annotations") else None
    items: list[SourceItem] = []
    for split in ("train", "val"):
        split_dir = root / split
        if not split_dir.is_dir():
            raise PipelineError(
                f"{split_dir} does not exist; `source.imagenet.root` must hold train/ and val/ wnid folders"
            )
        wnids = sorted(p.name for p in split_dir.iterdir() if p.is_dir())
        if len(wnids) != 1000:
            raise PipelineError(f"{split_dir} holds {len(wnids)} class folders, expected the 1000 ImageNet wnids")
        for index, wnid in enumerate(wnids):
            label = mapping[index]
            if label < 0:
                continue
            for path in sorted((split_dir / wnid).iterdir()):
                if path.name.startswith("."):
                    continue
                ann = None
                if annotations is not None:
                    for cand in (
                        annotations / wnid / f"{path.stem}.xml",
                        annotations / split / f"{path.stem}.xml",
                        annotations / f"{path.stem}.xml",
                    ):
                        if cand.is_file():
                            ann = cand
                            break
                items.append(SourceItem.of_file(path, split, classes[label], label, ann, entry_problem(path)))
    return items
