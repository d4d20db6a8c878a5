"""Loader benchmark: images/s of the zarr loader against decoding the same images from JPEG.

    python -m benchmarks.loader [--n 2000] [--size 224] [--photos DIR] [--codec none|lz4]

Images: the real photographs of `--photos` (default ../shared/data/in9-photos-dev) resized
and repeated up to `--n`, or synthetic images when that folder is absent.

Both sides deliver the same uint8 (H, W, 3) arrays. The JPEG side is the usual
ImageFolder path: open each file with PIL and decode it to a numpy array (one process).
The zarr side is a store in the pipeline's own format, read by the training loader with
shuffling: streaming shard by shard (in_memory_max_gb = 0), and with the split read into
memory once (its epoch 0 includes that read).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import zarr
from PIL import Image

from pipeline.imageio import load_rgb
from pipeline.sources.synthetic import render_sample
from pipeline.store import create_array
from training.data import ZarrBatches


ROOT = Path(__file__).resolve().parents[1]


def _images(photos: Path, n: int, size: int) -> tuple[np.ndarray, str]:
    paths = sorted(photos.rglob("*.JPEG")) if photos.is_dir() else []
    if paths:
        decoded = [cv2.resize(load_rgb(p, 1), (size, size), interpolation=cv2.INTER_AREA) for p in paths]
        return np.stack([decoded[i % len(decoded)] for i in range(n)]), f"{len(paths)} real photos, repeated"
    rng = np.random.default_rng(0)
    return np.stack([render_sample(i % 9, size, 0.9, rng)[0] for i in range(n)]), "synthetic"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--codec", choices=["none", "lz4"], default="none")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    images, source = _images(args.photos, args.n, args.size)
    for i, image in enumerate(images):
        Image.fromarray(image).save(tmp / f"{i:06d}.JPEG", quality=92)
    group = zarr.open_group(str(tmp / "s.zarr"), mode="w")
    group.attrs["classes"] = [str(c) for c in range(9)]
    train = group.create_group("train")
    # the pipeline's own array layout and codecs (32-image chunks, as config/config.yaml)
    create_array(train, "images", images.shape, np.uint8, 32, codec=args.codec)[:] = images
    create_array(train, "labels", (args.n,), np.int64, args.n, args.n)[:] = np.arange(args.n) % 9
    create_array(train, "bias_labels", (args.n,), np.int64, args.n, args.n)[:] = 0

    files = sorted(tmp.glob("*.JPEG"))
    t0 = time.perf_counter()
    for path in files:
        with Image.open(path) as im:
            np.asarray(im.convert("RGB"))
    jpeg = args.n / (time.perf_counter() - t0)

    rates = {}
    for mode, gb in (("streaming", 0.0), ("in memory", 4.0)):
        t0 = time.perf_counter()  # construction (the one-off read for "in memory") is timed too
        loader = ZarrBatches(tmp / "s.zarr", "train", 64, shuffle=True, in_memory_max_gb=gb)
        seen = sum(len(b["index"]) for b in loader.epoch(0))
        rates[f"{mode}, epoch 0"] = seen / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        seen = sum(len(b["index"]) for b in loader.epoch(1))
        rates[f"{mode}, epoch 1"] = seen / (time.perf_counter() - t0)
    print(f"images: {args.n} at {args.size}x{args.size} ({source}), zarr image codec {args.codec}")
    print(f"JPEG decode (PIL):           {jpeg:10.0f} images/s")
    for mode, rate in rates.items():
        print(f"zarr loader, {mode:20s}: {rate:8.0f} images/s {rate / jpeg:6.1f} x JPEG   (goal >= 5 x)")


if __name__ == "__main__":
    main()
