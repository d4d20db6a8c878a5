"""Run independent blocks of work with dask, with a progress bar.

Blocks are fixed by the data (one per zarr shard), never by the worker count, and each
block writes its own shard: results are byte-identical for any number of workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def run_blocks(fn: Callable[..., Any], blocks: Sequence[tuple], workers: int, label: str) -> list[Any]:
    """`[fn(*args) for args in blocks]`, on `workers` processes (in this one, in order, for 1: no
    dask needed, as on the GPU test machine, which lacks it)."""
    print(f"{label}: {len(blocks)} blocks on {workers} worker(s)", flush=True)
    if workers <= 1:
        return [fn(*args) for args in blocks]
    import dask
    from dask.diagnostics import ProgressBar

    tasks = [dask.delayed(fn)(*args) for args in blocks]
    with ProgressBar(minimum=1.0, dt=1.0):
        # chunksize=1: a block is seconds of work, and dask's default batches 6 blocks per
        # submission, which leaves workers idle when there are few blocks.
        return list(dask.compute(*tasks, scheduler="processes", num_workers=workers, chunksize=1))


def worker_setup() -> None:
    """Called at the start of every block: one OpenCV thread per worker process, as the
    parallelism is across blocks (nested threading only oversubscribes the cores)."""
    import cv2

    cv2.setNumThreads(1)
