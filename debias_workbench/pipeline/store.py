"""Zarr v3 arrays as the stores use them. A store is built under `<name>.tmp-<pid>`, given its
content fingerprint (`pipeline.fingerprint`) and renamed into place once complete (`core.atomic`),
so an existing `<variant>.zarr` is always a finished one, and a checkable one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec

from debias_workbench.core.atomic import atomic_path

from .fingerprint import write_fingerprint

FAST_CODEC = BloscCodec(cname="lz4", clevel=5, shuffle="noshuffle")


def create_array(
    group: zarr.Group,
    name: str,
    shape: tuple[int, ...],
    dtype: Any,
    chunk_rows: int,
    shard_rows: int | None = None,
    codec: str = "lz4",
) -> zarr.Array:
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
    # uint8: blosc-lz4 decodes faster than zarr's default zstd; "none" is faster still and loses little
    # space on photographs (see `image_codec` in config/config.yaml; docs/measurements.md#store-format).
    compressors = "auto" if np.dtype(dtype) != np.uint8 else (FAST_CODEC if codec == "lz4" else None)
    return group.create_array(
        name, shape=shape, dtype=dtype, chunks=chunks, shards=shards, fill_value=0, compressors=compressors
    )


def rows_per_block(chunk_rows: int, block_images: int) -> int:
    """Rows of one parallel block: a whole number of chunks, so blocks never share a chunk."""
    return max(chunk_rows, block_images // chunk_rows * chunk_rows)


@contextmanager
def atomic_store(final: Path) -> Iterator[Path]:
    """`core.atomic.atomic_path` for a zarr store: the block writes the store at the yielded path;
    its fingerprint is written into it before it is moved onto `final`."""
    with atomic_path(final) as tmp:
        yield tmp
        write_fingerprint(tmp)
