"""Cost of the patch negatives against one MoCo-v2 step at 224 px (Ge et al. call it "negligible").

    python -m benchmarks.patch_negatives [--arch resnet50] [--batch 32] [--size 224] [--repeats 5]

Times, on this machine's device and threads, (a) building the patch negatives of a batch of
normalised query views (`training.negatives.patch_negatives`, d ~ U(16, 72)) and (b) one full
MoCo-v2 training step with patch negatives on the same batch (two aug-plus views, query and key encoders, the
negatives through the key encoder, backward, optimiser, enqueue). Prints both medians and the
ratio (a) / (b): the issue's goal is at most 5 %.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import yaml

from debias_workbench.training.build import pick_device
from debias_workbench.training.methods.ssl import MoCoV2
from debias_workbench.training.negatives import patch_negatives

from .stylize_texture import ROOT


def median_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device = pick_device()
    train_cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["training"]
    train_cfg.update(arch=args.arch, optimizer={"name": "sgd", "lr": 0.03, "momentum": 0.9, "weight_decay": 1e-4})
    method = MoCoV2(9, train_cfg, {"negative": "patch", "queue_size": 4096}).to(device)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (args.batch, args.size, args.size, 3), dtype=torch.uint8, generator=g).to(device)
    batch = {"images": images, "labels": torch.zeros(args.batch, dtype=torch.long, device=device)}
    views = method.views(images, g)                                      # (B, 3, H, W) the query views
    negatives = median_seconds(lambda: patch_negatives(views, g), args.repeats)
    step = median_seconds(lambda: method.update(batch), args.repeats)
    print(f"device {device}, {torch.get_num_threads()} threads, {args.arch}, batch {args.batch} at {args.size} px")
    print(f"patch negatives: {negatives * 1000:.1f} ms per batch; MoCo-v2 step with them: {step * 1000:.0f} ms")
    print(f"patch negatives / MoCo step: {100 * negatives / step:.2f} % (goal: <= 5 %)")


if __name__ == "__main__":
    main()
