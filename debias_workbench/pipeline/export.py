"""`workbench export STORE --format F --out DIR`: a generated variant in a format other tools read,
with a dataset card.

- `imagefolder`: DIR/<split>/<class>/<row>.png, torchvision's `ImageFolder` layout (class folders
  named so that their sorted order is the store's label order), and DIR/<split>.csv beside it: file,
  id, label, class, bias_label, bias_class (and style_id for Stylized IN-9); masks, where the
  variant has them, as DIR/masks/<split>/<class>/<row>.png.
- `webdataset`: DIR/<split>-NNNNNN.tar shards of `SHARD_ROWS` samples, each sample `<row>.png`,
  `<row>.cls` (the label) and `<row>.json` (id, label, bias label, class names; `<row>.mask.png`
  where the variant has masks): what the `webdataset` library and Hugging Face `datasets`
  (`load_dataset("webdataset", data_files=...)`, or `load_dataset(DIR)` through the card's
  `configs`) read.

Both write DIR/README.md, a dataset card: the store's fingerprint, the config and seed that made
it, the code version, and the licence note of its source (`DatasetFamily.licence`). The store's
fingerprint is verified first, in full: a store that differs from its fingerprint is not exported.
Images are lossless PNG, so pixels round-trip exactly. DIR is written under a temporary name and
renamed when complete.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from PIL import Image

from debias_workbench.core.atomic import atomic_path
from debias_workbench.core.errors import PipelineError

from .datasets import get_family
from .fingerprint import read_fingerprint, rebuild_hint, verify
from .variant_reader import VariantSplit, store_splits

#: samples per WebDataset shard (IN-9's 45,405 training images at 224 px: 5 shards of about 1.4 GB)
SHARD_ROWS = 10_000
#: the PNG settings of every exported image: lossless, and the same bytes for the same pixels
PNG_OPTIONS: dict[str, Any] = {"format": "PNG", "compress_level": 6}


def png_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, **PNG_OPTIONS)
    return buffer.getvalue()


def class_folders(classes: list[str]) -> list[str]:
    """Folder names whose sorted order is the label order (ImageFolder numbers classes by sorted
    folder name): the class names where they already sort so, else `<index>_<name>`."""
    safe = [re.sub(r"[^\w.-]+", "_", c) for c in classes]
    if safe == sorted(safe) and len(set(safe)) == len(safe):
        return safe
    width = len(str(len(classes) - 1))
    return [f"{k:0{width}d}_{name}" for k, name in enumerate(safe)]


def _splits(store: Path) -> dict[str, VariantSplit]:
    """{split: its rows}, for every split the store's fingerprint lists."""
    return {name: VariantSplit(store, name) for name in store_splits(store)}


def _imagefolder(splits: dict[str, VariantSplit], out: Path) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for split, rows in splits.items():
        folders, bias_classes = class_folders(rows.classes), rows.bias_classes
        for folder in folders:  # every class, images or not: ImageFolder numbers the folders it finds
            (out / split / folder).mkdir(parents=True, exist_ok=True)
        width = len(str(max(len(rows) - 1, 0)))
        with open(out / f"{split}.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            extra = ["style_id"] if "style_ids" in rows.fields else []
            writer.writerow(["file", "id", "label", "class", "bias_label", "bias_class", *extra])
            for k, row in enumerate(rows.rows()):
                name = f"{split}/{folders[row['label']]}/{k:0{width}d}.png"
                (out / name).write_bytes(png_bytes(row["image"]))
                if "mask" in row:  # outside the split's folder, so that no reader takes masks for images
                    mask = out / "masks" / split / folders[row["label"]] / f"{k:0{width}d}.png"
                    mask.parent.mkdir(parents=True, exist_ok=True)
                    mask.write_bytes(png_bytes(row["mask"]))
                bias = row["bias_label"]
                writer.writerow(
                    [
                        name,
                        row["id"],
                        row["label"],
                        rows.classes[row["label"]],
                        bias,
                        bias_classes[bias] if bias >= 0 else "",
                        *([row["style_id"]] if extra else []),
                    ]
                )
        files[split] = [f"{split}/**/*.png"] if len(rows) else []
    return files


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o644  # no clock in the bytes: same store, same shards
    tar.addfile(info, io.BytesIO(data))


def _webdataset(splits: dict[str, VariantSplit], out: Path) -> dict[str, list[str]]:
    files: dict[str, list[str]] = {}
    for split, rows in splits.items():
        files[split] = [f"{split}-{start // SHARD_ROWS:06d}.tar" for start in range(0, len(rows), SHARD_ROWS)]
        for shard, start in zip(files[split], range(0, len(rows), SHARD_ROWS)):
            with tarfile.open(out / shard, "w", format=tarfile.USTAR_FORMAT) as tar:
                for k in range(start, min(start + SHARD_ROWS, len(rows))):
                    _add_sample(tar, k, rows[k], rows)
    return files


def _add_sample(tar: tarfile.TarFile, k: int, row: dict, rows: VariantSplit) -> None:
    """Row `k` as the files of one WebDataset sample: <key>.png, .cls, .json (and .mask.png)."""
    key, bias = f"{k:08d}", row["bias_label"]
    meta = {
        "id": row["id"],
        "label": row["label"],
        "class": rows.classes[row["label"]],
        "bias_label": bias,
        "bias_class": rows.bias_classes[bias] if bias >= 0 else None,
        **({"style_id": row["style_id"]} if "style_id" in row else {}),
    }
    _add(tar, f"{key}.png", png_bytes(row["image"]))
    _add(tar, f"{key}.cls", str(row["label"]).encode())
    _add(tar, f"{key}.json", json.dumps(meta, sort_keys=True).encode())
    if "mask" in row:
        _add(tar, f"{key}.mask.png", png_bytes(row["mask"]))


FORMATS: dict[str, Callable[[dict[str, VariantSplit], Path], dict[str, list[str]]]] = {
    "imagefolder": _imagefolder,
    "webdataset": _webdataset,
}


def dataset_card(store: Path, fmt: str, splits: dict[str, VariantSplit], files: dict[str, list[str]]) -> str:
    """README.md of an export: Hugging Face's card front matter (the licence note, each split's
    files, so that `load_dataset(DIR)` reads exactly them), then the store's fingerprint, provenance
    and the config that made it."""
    attrs = next(iter(splits.values())).attrs
    provenance = attrs.get("provenance", {})
    family = attrs.get("family")
    licence = get_family(family).licence if family else "see the source of the images"
    title = f"{family or 'dataset'} / {attrs.get('variant', store.stem)}"
    data_files = [{"split": split, "path": paths} for split, paths in files.items() if paths]
    front = {
        "pretty_name": title,
        "license": "other",
        "license_name": "source-terms",
        "license_details": licence,
        "configs": [{"config_name": "default", "data_files": data_files}],
    }
    config = provenance.get("config")
    sizes = ", ".join(f"{s}: {len(r)} images" for s, r in splits.items())
    lines = [
        "---",
        yaml.safe_dump(front, sort_keys=False).strip(),
        "---",
        "",
        f"# {title}",
        "",
        f"Exported by `workbench export` ({fmt}) from `{store.name}`, generated by the debiasing workbench. "
        f"{sizes}; classes: {', '.join(attrs['classes'])}.",
        "",
        f"- Fingerprint (`workbench verify`): `{read_fingerprint(store)['digest']}`",
        f"- Config hash `{provenance.get('config_hash')}`, seed {provenance.get('seed')}, code version "
        f"`{provenance.get('code_version')}`",
        f"- Licence of the source: {licence}",
        "",
        "## The config that made it",
        "",
    ]
    lines += (
        ["```yaml", yaml.safe_dump(config, sort_keys=True).strip(), "```", ""]
        if config is not None
        else ["Not recorded: the store was made before stores kept their config (its hash is above).", ""]
    )
    return "\n".join(lines)


def export(store: Path, fmt: str, out: Path) -> Path:
    """Write the variant store `store` to the folder `out` in format `fmt` (`FORMATS`) with its card;
    returns `out`."""
    if fmt not in FORMATS:
        raise PipelineError(f"export format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if out.exists():
        raise PipelineError(f"{out} exists: export into a new folder (or remove it first)")
    if problems := verify(store):
        raise PipelineError(
            f"{store} differs from its fingerprint, so it is not exported:\n  "
            + "\n  ".join(problems)
            + f"\n{rebuild_hint(store)}"
        )
    splits = _splits(store)
    with atomic_path(out) as tmp:
        tmp.mkdir()
        files = FORMATS[fmt](splits, tmp)
        (tmp / "README.md").write_text(dataset_card(store, fmt, splits, files))
    return out
