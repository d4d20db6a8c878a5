"""Zarr v3 stores and JSON files written atomically: a killed run leaves only `*.tmp-*`.

A store is built under `<name>.tmp-<pid>` and renamed into place once complete, so an
existing `<variant>.zarr` is always a finished one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import zarr
from zarr.codecs import BloscCodec

import pipeline

FAST_CODEC = BloscCodec(cname="lz4", clevel=5, shuffle="noshuffle")


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling path; move it onto `final` only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    _remove(final)
    os.rename(tmp, final)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text)


def write_json(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def create_array(group: zarr.Group, name: str, shape: tuple[int, ...], dtype: Any, chunk_rows: int,
                 shard_rows: int | None = None, codec: str = "lz4") -> zarr.Array:
    """An array chunked along its first axis: `chunk_rows` items a chunk, and `shard_rows`
    items a shard file if given. Unsharded arrays read about twice as fast with zarr-python
    3.1, so only stores read at scattered single rows (many tiny chunks) are sharded.
    `codec` ("lz4" or "none") applies to uint8 arrays; other dtypes use zarr's default."""
    chunk_rows = max(1, min(chunk_rows, shape[0] or 1))
    chunks = (chunk_rows, *shape[1:])
    if dtype is str:
        return group.create_array(name, shape=shape, dtype=str, chunks=chunks)
    shards = None
    if shard_rows is not None:
        shards = (max(chunk_rows, (min(shard_rows, max(shape[0], 1)) // chunk_rows) * chunk_rows), *shape[1:])
    # uint8: blosc-lz4 decodes ~1.7x faster than zarr's default zstd; "none" is faster still
    # and loses little space on photographs (see `image_codec` in config/config.yaml).
    compressors = "auto" if np.dtype(dtype) != np.uint8 else (FAST_CODEC if codec == "lz4" else None)
    return group.create_array(name, shape=shape, dtype=dtype, chunks=chunks, shards=shards, fill_value=0,
                              compressors=compressors)


def rows_per_block(chunk_rows: int, block_images: int) -> int:
    """Rows of one parallel block: a whole number of chunks, so blocks never share a chunk."""
    return max(chunk_rows, block_images // chunk_rows * chunk_rows)


def code_version() -> str:
    """Package version plus the git commit of the checkout (with +dirty if modified)."""
    root = Path(pipeline.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                                text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return f"{pipeline.__version__}+{commit}{'.dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return pipeline.__version__


def file_digest(path: Path, algorithm: str) -> str:
    """Hex digest of a file (md5/sha256), read in 1 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_hash(cfg: Any) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]
