"""CLAD step time against an ERM step on the same number of forward images.

    python -m benchmarks.clad_step [--arch resnet18] [--size 112] [--batch 32] [--steps 6] [--threads 2]

A CLAD step forwards B anchors and B positives; the ERM baseline forwards 2B images, so the
networks do the same work and the difference is what CLAD adds: compositing the positives,
choosing partner backgrounds, the dictionary push and lookup and the InfoNCE term (goal <= 5 %).
Also times those CLAD-only parts alone. Inputs are random uint8 images with random box masks
(the step's cost does not depend on the pixels); both sides run the same number of warm-up and
timed steps, alternating, so drift on a shared machine hits both.
"""

from __future__ import annotations

import argparse
import time

import torch
import yaml

from debias_workbench.training.losses import info_nce
from debias_workbench.training.methods import METHODS

from .loader import ROOT


def _batch(b: int, size: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    masks = torch.zeros(b, size, size, dtype=torch.uint8)
    for i in range(b):
        y0, x0 = torch.randint(0, size // 2, (2,), generator=g).tolist()
        masks[i, y0:y0 + size // 2, x0:x0 + size // 2] = 1
    return {"images": torch.randint(0, 256, (b, size, size, 3), dtype=torch.uint8, generator=g),
            "backgrounds": torch.randint(0, 256, (b, size, size, 3), dtype=torch.uint8, generator=g),
            "masks": masks, "labels": torch.randint(0, 9, (b,), generator=g), "index": torch.arange(b)}


def _time(fn, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="resnet18")
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--batch", type=int, default=32, help="CLAD anchors per step (ERM gets twice as many images)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["training"]
    cfg["arch"] = args.arch
    g = torch.Generator().manual_seed(0)
    clad_batch = _batch(args.batch, args.size, g)
    erm_batch = {k: torch.cat([v, v]) for k, v in clad_batch.items() if k in ("images", "labels")}
    clad, erm = METHODS["clad"](9, cfg, {}), METHODS["erm"](9, cfg, {})
    for m, batch in ((clad, clad_batch), (erm, erm_batch)):
        m.train()
        m.update(batch)  # warm-up
    t_clad, t_erm = [], []
    for _ in range(args.steps):  # alternate so that machine drift hits both
        t_erm.append(_time(lambda: erm.update(erm_batch), 1))
        t_clad.append(_time(lambda: clad.update(clad_batch), 1))
    t_clad_med, t_erm_med = sorted(t_clad)[len(t_clad) // 2], sorted(t_erm)[len(t_erm) // 2]

    # the CLAD-only parts on their own
    d = clad.network.feature_dim
    z = torch.randn(2 * args.batch, d)
    y = clad_batch["labels"]

    def extras():
        _, bg_labels, found = clad.make_positives(clad_batch)
        clad.dictionary.push(z[args.batch:][found], bg_labels[found], clad_batch["index"][found])
        neg, usable = clad.dictionary.negatives(y, clad_batch["index"])
        info_nce(z[:args.batch], z[args.batch:], neg, 0.2, usable)

    t_extras = _time(extras, 20)
    print(f"{args.arch} at {args.size} px, {args.threads} threads: CLAD step with {args.batch} anchors + "
          f"{args.batch} positives vs ERM step with {2 * args.batch} images (median of {args.steps})")
    print(f"  ERM  step: median {t_erm_med * 1000:8.1f} ms, min {min(t_erm) * 1000:8.1f} ms")
    print(f"  CLAD step: median {t_clad_med * 1000:8.1f} ms, min {min(t_clad) * 1000:8.1f} ms")
    print(f"  CLAD vs ERM: {100 * (t_clad_med / t_erm_med - 1):+.1f} % (medians), "
          f"{100 * (min(t_clad) / min(t_erm) - 1):+.1f} % (minima); goal <= +5 %")
    print(f"  positives + dictionary + InfoNCE alone: {t_extras * 1000:.2f} ms = "
          f"{100 * t_extras / t_erm_med:.2f} % of the ERM step")


if __name__ == "__main__":
    main()
