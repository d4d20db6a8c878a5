"""Loader benchmark: images/s of the zarr loader against decoding the same images from JPEG.

    python -m benchmarks.loader [--n 2000] [--size 224] [--photos DIR] [--codec none|lz4] [--window-gb 0.1]

Images: the real photographs of `--photos` (default ../shared/data/in9-photos-dev) resized
and repeated up to `--n`, or synthetic images when that folder is absent.

Both sides deliver the same uint8 (H, W, 3) arrays. The JPEG side is the usual
ImageFolder path: open each file with PIL and decode it to a numpy array (one process).
The zarr side is a store in the pipeline's own format (rows in class order, as the pipeline
writes them), read by the training loader with shuffling: streaming (in_memory_max_gb = 0) in
windows of units dealt at random from the whole split (today's loader), streaming in windows of
two 8-chunk runs (the loader before 2026-11-26, whose batches held one or two classes), and with
the split read into memory once (its epoch 0 includes that read). Each line also gives the mean
number of distinct classes per batch of 64: i.i.d. sampling (the in-memory path) is the reference.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import zarr
from PIL import Image

from debias_workbench.pipeline.fingerprint import write_fingerprint
from debias_workbench.pipeline.imageio import load_rgb
from debias_workbench.pipeline.sources.synthetic import render_sample
from debias_workbench.pipeline.store import create_array
from debias_workbench.training.data import UNITS_PER_CLASS, ZarrBatches


ROOT = Path(__file__).resolve().parents[1]


def _images(photos: Path, n: int, size: int) -> tuple[np.ndarray, str]:
    paths = sorted(photos.rglob("*.JPEG")) if photos.is_dir() else []
    if paths:
        decoded = [cv2.resize(load_rgb(p, 1), (size, size), interpolation=cv2.INTER_AREA) for p in paths]
        return np.stack([decoded[i % len(decoded)] for i in range(n)]), f"{len(paths)} real photos, repeated"
    rng = np.random.default_rng(0)
    return np.stack([render_sample(i % 9, size, 0.9, rng)[0] for i in range(n)]), "synthetic"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--codec", choices=["none", "lz4"], default="none")
    parser.add_argument("--window-gb", type=float, default=0.1,
                        help="today's streamed window (the training default is 1.0; smaller than the split here, as at "
                             "paper scale, so that windows are drawn from it)")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp())
    try:
        images, source = _images(args.photos, args.n, args.size)
        for i, image in enumerate(images):
            Image.fromarray(image).save(tmp / f"{i:06d}.JPEG", quality=92)
        group = zarr.open_group(str(tmp / "s.zarr"), mode="w")
        group.attrs["classes"] = [str(c) for c in range(9)]
        train = group.create_group("train")
        # the pipeline's own array layout and codecs (32-image chunks, as config/config.yaml)
        create_array(train, "images", images.shape, np.uint8, 32, codec=args.codec)[:] = images
        create_array(train, "labels", (args.n,), np.int64, args.n, args.n)[:] = np.arange(args.n) * 9 // args.n
        create_array(train, "bias_labels", (args.n,), np.int64, args.n, args.n)[:] = 0
        write_fingerprint(tmp / "s.zarr")  # the loader reads only stores whose fingerprint it can check

        files = sorted(tmp.glob("*.JPEG"))
        t0 = time.perf_counter()
        for path in files:
            with Image.open(path) as im:
                np.asarray(im.convert("RGB"))
        jpeg = args.n / (time.perf_counter() - t0)

        row_bytes = args.size * args.size * 3
        modes = {  # name: (in_memory_max_gb, read_chunks, window_gb, units_per_class)
            "streaming, random units": (0.0, 1, args.window_gb, UNITS_PER_CLASS),
            "streaming, 2 runs of 8 chunks (before)": (0.0, 8, 2 * 8 * 32 * row_bytes / 2**30, 0),
            "in memory": (4.0, 1, 1.0, UNITS_PER_CLASS)}
        rates, classes = {}, {}
        # every mode then reads a warm page cache
        zarr.open_array(str(tmp / "s.zarr" / "train" / "images"), mode="r")[:]
        for mode, (gb, read_chunks, window_gb, units_per_class) in modes.items():
            t0 = time.perf_counter()  # construction (the one-off read for "in memory") is timed too
            loader = ZarrBatches(tmp / "s.zarr", "train", 64, shuffle=True, in_memory_max_gb=gb,
                                 read_chunks=read_chunks,
                                 window_gb=window_gb, units_per_class=units_per_class, fields=("images", "labels"))
            seen = sum(len(b["index"]) for b in loader.epoch(0))
            rates[f"{mode}, epoch 0"] = seen / (time.perf_counter() - t0)
            later, distinct = [], []
            for epoch in (1, 2, 3):  # the median of three later epochs: one epoch of a few thousand images is short
                t0 = time.perf_counter()
                distinct += [len(np.unique(b["labels"].numpy())) for b in loader.epoch(epoch)]
                later.append(args.n / (time.perf_counter() - t0))
            rates[f"{mode}, epochs 1-3"] = float(np.median(later))
            classes[f"{mode}, epoch 0"] = classes[f"{mode}, epochs 1-3"] = float(np.mean(distinct))
        print(f"images: {args.n} at {args.size}x{args.size} ({source}), zarr image codec {args.codec}, "
              "9 classes in row order, "
              f"streamed window {args.window_gb} GB")
        print(f"JPEG decode (PIL):           {jpeg:10.0f} images/s")
        for mode, rate in rates.items():
            print(f"zarr loader, {mode:45s}: {rate:8.0f} images/s {rate / jpeg:6.1f} x JPEG   (goal >= 5 x)"
                  f"   {classes[mode]:.2f} classes per batch of 64")
    finally:  # the store and JPEG files are hundreds of MB at the default size
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
