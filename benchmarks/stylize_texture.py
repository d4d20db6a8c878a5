"""Stylized IN-9 and IN-9-Texture generation speed at 224 px, on 1 and 2 worker processes.

    python -m benchmarks.stylize_texture [--photos DIR] [--n 186] [--size 224]

Runs the derived stage itself (`run_derived_stage`: AdaIN with the packaged weights and the
embedded styles; G'MIC through the subprocess wrapper) on `n` photos segmented once beforehand,
first on 1 worker, then on 2 (one shard per worker, one thread each, as the workflow's
per-shard jobs run). Prints images/s per core for each and the 2-worker speed-up, the
baseline being the same stage on 1 worker in the same run, and the implied CPU cost of full
IN-9 and of ImageNet on a 32-core node.
"""

from __future__ import annotations

import argparse
import copy
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from debias_workbench.pipeline.derived_stage import run_derived_stage
from debias_workbench.pipeline.segment_stage import run_segment_stage
from debias_workbench.pipeline.sources import list_source_items

ROOT = Path(__file__).resolve().parents[1]
#: IN-9 train + val images (Xiao et al. 2021: 5,045 + 450 per class), and ImageNet-1k train + val
IN9_IMAGES, IMAGENET_IMAGES = 9 * (5_045 + 450), 1_281_167 + 50_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--photos", type=Path, default=ROOT.parent / "shared" / "data" / "in9-photos-dev")
    parser.add_argument("--n", type=int, default=186)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["in9"]
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(args.photos), "val_fraction": 0.5}}
    items = list_source_items(cfg["source"], cfg["classes"])
    items = [items[i] for i in np.linspace(0, len(items) - 1, min(args.n, len(items))).astype(int)]
    # two shards of n/2 images: one per worker
    cfg.update(image_size=args.size, block_images=-(-len(items) // 2), chunk_images=8)
    cfg["segmentation"]["iterations"] = 2
    cfg["stylized"].update(work_size=args.size, splits=["train", "val"])
    cfg["stylized"]["styles"].update(size=256, per_class=2)
    cfg["texture"].update(work_size=None, splits=["train", "val"])
    work = Path(tempfile.mkdtemp())
    try:
        seg = work / "seg" / "segmented.zarr"
        run_segment_stage(items, cfg, 0, seg, seg.parent / "q.jsonl", seg.parent / "segmented.manifest.json", 2)
        print(f"{len(items)} photos at {args.size} px, 2 shards; images/s per core (1 worker = 1 core)")
        for kind in ("stylized", "texture"):
            seconds = {}
            for workers in (1, 2):
                out = work / f"{kind}{workers}.zarr"
                t0 = time.perf_counter()
                run_derived_stage(kind, seg, seg.parent / "segmented.manifest.json", copy.deepcopy(cfg), 0, out,
                                  work / f"{kind}{workers}.json", workers)
                seconds[workers] = time.perf_counter() - t0
            n = len(items)
            per_core = n / seconds[1]
            print(f"{kind:9s} 1 worker {per_core:6.2f} img/s | 2 workers {n / seconds[2]:6.2f} img/s "
                  f"({n / seconds[2] / 2:5.2f} per core) | speed-up {seconds[1] / seconds[2]:.2f}x")
            for name, total in (("IN-9", IN9_IMAGES), ("ImageNet", IMAGENET_IMAGES)):
                print(f"          {name} on a 32-core node at this rate per core: "
                      f"{total / (per_core * 32) / 3600:.1f} h")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
