"""What `training.trackers: [tensorboard]` costs a demo-sized run: the same run trained with no tracker
and with TensorBoard, alternating, in one process (so machine drift hits both).

    python -m benchmarks.trackers [--repeats 4] [--epochs 4] [--per-class 60]

Builds a small synthetic IN-9 store (the demo's 32 px, `--per-class` training images per class),
then trains the default config's `base_in9` run `--epochs` epochs with a monitor point every epoch,
`--repeats` times each way after one untimed warm-up run. Prints each way's median seconds and the ratio TensorBoard / none: the
demo leaves trackers off, so the goal is a ratio within the runs' own spread.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.trainer import Monitor, train
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.slices import run_config

from .loader import ROOT


def small_store(root: Path, per_class: int) -> Path:
    """The default config's IN-9 section at 32 px with `per_class` synthetic training images per class."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["in9"]
    cfg.update(image_size=32, chunk_images=32, block_images=64)
    cfg["source"]["synthetic"].update(image_size=32, train_per_class=per_class, val_per_class=4)
    family = get_family("in9")
    family.run_step("source", cfg, 0, root / "src", [], 1, None)
    family.run_step("segment", cfg, 0, root / "seg.zarr", [root / "src"], 1, None)
    family.run_step("variant", cfg, 0, root / "original.zarr", [root / "seg.zarr", root / "segmented.manifest.json"],
                    1, "original")
    return root / "original.zarr"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--per-class", type=int, default=60)
    args = ap.parse_args(argv)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    config["training"]["epochs"] = args.epochs
    run = run_config(resolve_config(copy.deepcopy(config)), "base_in9", 0)
    seconds: dict[str, list[float]] = {"none": [], "tensorboard": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = small_store(Path(tmp), args.per_class)
        steps = args.per_class * 9 // run["training"]["batch_size"]
        train(run, store, Path(tmp) / "warm-up")  # first-use costs (imports, allocator) out of the timed runs
        for k in range(args.repeats):
            for way, trackers in (("none", []), ("tensorboard", ["tensorboard"])):
                t0 = time.perf_counter()
                train(run, store, Path(tmp) / f"{way}{k}", monitor=Monitor({"original": store}, every_steps=steps),
                      trackers=trackers)
                seconds[way].append(time.perf_counter() - t0)
    for way, values in seconds.items():
        print(f"{way:12s} median {statistics.median(values):.2f} s over {len(values)} runs "
              f"(min {min(values):.2f}, max {max(values):.2f})")
    none, tensorboard = statistics.median(seconds["none"]), statistics.median(seconds["tensorboard"])
    spread = (max(seconds["none"]) - min(seconds["none"])) / none
    print(f"tensorboard / none: {tensorboard / none:.3f}x (the untracked runs' own spread: {spread:.1%})")


if __name__ == "__main__":
    main()
