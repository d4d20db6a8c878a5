"""HSIC's share of a ReBias step, and training throughput against Vanilla (F alone).

    python -m benchmarks.rebias_step [--setting mnist|images] [--batch 256] [--steps 5] [--threads 2]

mnist: F = SimpleConvNet 7x7, G = 1x1, the paper's widths 16-128, 28 px, sigma = 1.
images: F = ResNet18, G = BagNet18, --size px (default 64), sigma = median heuristic.
A ReBias step evaluates HSIC twice (G's update, then F's), each with its backward pass; the
share is (2 x the time of one HSIC forward + backward on the step's pooled features) / (the
step's time) (goal <= 5 % at batch 256). Images/s are the batch over the median step time;
Vanilla and ReBias alternate step by step so that machine drift hits both.
"""

from __future__ import annotations

import argparse
import time

import torch
import yaml

from debias_workbench.training.losses import hsic
from debias_workbench.training.methods import METHODS

from .loader import ROOT

SETTINGS = {
    "mnist": {"arch": "simple_cnn7", "biased_arch": "simple_cnn1", "size": 28, "sigma": 1.0,
              "simple_cnn_channels": [16, 32, 64, 128]},
    "images": {"arch": "resnet18", "biased_arch": "bagnet18", "size": 64, "sigma": None},
}


def _times(fn, steps: int) -> list[float]:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--setting", choices=sorted(SETTINGS), default="mnist")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, help="image side (default: 28 for mnist, 64 for images)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    s = SETTINGS[args.setting]
    size = args.size or s["size"]
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["training"]
    cfg.update(arch=s["arch"], augment={"crop_scale": [1.0, 1.0], "hflip": False})
    if "simple_cnn_channels" in s:
        cfg["simple_cnn_channels"] = s["simple_cnn_channels"]
    g = torch.Generator().manual_seed(0)
    batch = {"images": torch.randint(0, 256, (args.batch, size, size, 3), dtype=torch.uint8, generator=g),
             "labels": torch.randint(0, 10, (args.batch,), generator=g)}
    rebias = METHODS["rebias"](10, cfg, {"biased_arch": s["biased_arch"], "sigma_f": s["sigma"],
                                         "sigma_g": s["sigma"]})
    vanilla = METHODS["vanilla"](10, cfg, {})
    for m in (rebias, vanilla):
        m.train()
        m.update(batch)  # warm-up
    t_rebias, t_vanilla = [], []
    for _ in range(args.steps):
        t_vanilla += _times(lambda: vanilla.update(batch), 1)
        t_rebias += _times(lambda: rebias.update(batch), 1)
    step, base = _median(t_rebias), _median(t_vanilla)

    zf = torch.randn(args.batch, rebias.network.feature_dim, requires_grad=True)
    zg = torch.randn(args.batch, rebias.biased.feature_dim, requires_grad=True)
    t_hsic = _median(_times(lambda: hsic(zf, zg, s["sigma"], s["sigma"]).backward(), 20))
    print(f"{args.setting}: F = {s['arch']}, G = {s['biased_arch']}, {size} px, batch {args.batch}, "
          f"{args.threads} threads, features {zf.shape[1]} / {zg.shape[1]}")
    print(f"  ReBias step  {step * 1e3:8.1f} ms   {args.batch / step:7.0f} images/s")
    print(f"  Vanilla step {base * 1e3:8.1f} ms   {args.batch / base:7.0f} images/s   (ReBias / Vanilla = "
          f"{step / base:.2f}x; F and G each take a forward and a backward pass)")
    print(f"  HSIC forward + backward {t_hsic * 1e3:.2f} ms, twice per step: {100 * 2 * t_hsic / step:.1f} % of "
          "the ReBias step (goal <= 5 %)")


if __name__ == "__main__":
    main()
