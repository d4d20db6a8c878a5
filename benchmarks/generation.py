"""Generation benchmark: pipeline time per image against raw cv2.grabCut, and 2-core speed-up.

    python -m benchmarks.generation [--photos DIR] [--n 60] [--size 224] [--iterations 10]

Baseline: cv2.grabCut alone on the same images, already decoded and resized in memory, with
the same box and iterations. Pipeline: the segmentation stage (decode, validate, resize,
GrabCut, ONLY_BG_T, zarr write, quality records) on 1 worker, then on 2 workers.
Prints seconds per image, the pipeline's overhead over raw GrabCut and the speed-up.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import yaml

from debias_workbench.pipeline.imageio import load_rgb
from debias_workbench.pipeline.segment_stage import run_segment_stage
from debias_workbench.pipeline.segmentation import fallback_box, grabcut
from debias_workbench.pipeline.sources import list_source_items

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--n", type=int, default=60)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["in9"]
    cfg.update(image_size=args.size, block_images=8, chunk_images=8)
    cfg["segmentation"]["iterations"] = args.iterations
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(args.photos)}}
    items = list_source_items(cfg["source"], cfg["classes"])
    items = [items[i] for i in np.linspace(0, len(items) - 1, min(args.n, len(items))).astype(int)]
    cv2.setNumThreads(1)

    images = [cv2.resize(load_rgb(it.path, 1), (args.size, args.size), interpolation=cv2.INTER_AREA) for it in items]
    box = [fallback_box(args.size, args.size, cfg["segmentation"]["fallback_box_fraction"])]
    t0 = time.perf_counter()
    for k, image in enumerate(images):
        grabcut(image, box, args.iterations, k)
    raw = time.perf_counter() - t0

    timings = {}
    for workers in (1, 2):
        out = Path(tempfile.mkdtemp())
        t0 = time.perf_counter()
        run_segment_stage(items, cfg, 0, out / "seg.zarr", out / "q.jsonl", out / "m.json", workers)
        timings[workers] = time.perf_counter() - t0
        shutil.rmtree(out)
    n = len(items)
    print(f"images: {n} at {args.size}x{args.size}, GrabCut {args.iterations} iterations")
    print(f"raw cv2.grabCut (decoded, resized):  {raw / n * 1000:8.1f} ms/image")
    print(f"pipeline segment stage, 1 worker:    {timings[1] / n * 1000:8.1f} ms/image")
    print(f"pipeline segment stage, 2 workers:   {timings[2] / n * 1000:8.1f} ms/image")
    print(f"pipeline overhead over raw GrabCut:  {(timings[1] / raw - 1) * 100:+8.1f} %   (goal <= 10 %)")
    print(f"speed-up 2 workers vs 1:             {timings[1] / timings[2]:8.2f} x   (goal >= 1.8 x)")


if __name__ == "__main__":
    main()
