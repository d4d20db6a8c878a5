"""Several small models in one process as one batched model, against training them one after
the other: the lever issue 26 names for seeds of one small model (and BiasEnsemble's committee),
and, with `--compile`, the same steps under `torch.compile` (another lever it names).

    python -m benchmarks.batched_seeds [--models 5] [--channels 16,32,64] [--size 28] [--batch 64]
                                       [--steps 20] [--threads 1] [--device cpu|cuda] [--compile]

K `SmallCNN`s (the demo's network), one Adam step each on its own batch, three ways (four with
`--compile`):
  sequential  K ordinary steps on channels-last batches, as the loader gives them (what the
              workflow does: one model per run);
  vmap        `torch.func.stack_module_state` + `functional_call` under `vmap`, one optimiser over
              the stacked parameters (batch norm's running statistics stacked with them);
  grouped     one wide network: each convolution with groups = K, batch norm over K x C channels
              (per channel, so per model), the K batches side by side as channels;
  compiled    (`--compile`) the sequential steps with each model under `torch.compile` (inductor);
              its compile time, spent in the first two steps, is printed apart: it pays only where
              a run's steps save more than that.
All ways start from the same K initialisations and compute the same K losses on the first two
steps (checked before timing, to float tolerance: the gradients and the updates match as well).
The ways alternate step by step so machine drift hits each alike; the table gives the median
step time and the ratio to sequential (below 1: the way pays).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, stack_module_state, vmap

from debias_workbench.training.models import SmallCNN


def grouped_network(models: list[SmallCNN]) -> nn.Module:
    """One network computing all K `models` at once: (B, K*3, H, W) -> (B, K*classes); the
    weights are the models' own, concatenated along the output channels."""
    k = len(models)
    layers: list[nn.Module] = []
    for i, module in enumerate(models[0].body):
        if isinstance(module, nn.Conv2d):
            conv = nn.Conv2d(k * module.in_channels, k * module.out_channels, module.kernel_size,
                             padding=module.padding, bias=False, groups=k)
            conv.weight.data.copy_(torch.cat([m.body[i].weight.data for m in models]))
            layers.append(conv)
        elif isinstance(module, nn.BatchNorm2d):
            bn = nn.BatchNorm2d(k * module.num_features)
            bn.weight.data.copy_(torch.cat([m.body[i].weight.data for m in models]))
            bn.bias.data.copy_(torch.cat([m.body[i].bias.data for m in models]))
            layers.append(bn)
        else:
            layers.append(copy.deepcopy(module))
    head = nn.Conv1d(k * models[0].feature_dim, k * models[0].head.out_features, 1, groups=k)
    head.weight.data.copy_(torch.cat([m.head.weight.data for m in models])[:, :, None])
    head.bias.data.copy_(torch.cat([m.head.bias.data for m in models]))
    return nn.ModuleDict({"body": nn.Sequential(*layers), "head": head})


def one_by_one(models: list[nn.Module], x: torch.Tensor, y: torch.Tensor,
               wrap: Callable[[nn.Module], Callable] = lambda m: m) -> Callable[[], torch.Tensor]:
    """One Adam step of each of (copies of) `models` in turn, each called through `wrap`; the (K,) losses."""
    own = copy.deepcopy(models)
    calls, opts = [wrap(m) for m in own], [torch.optim.Adam(m.parameters(), 1e-3) for m in own]
    batches = [xi.contiguous(memory_format=torch.channels_last) for xi in x]  # the layout the loader gives

    def step() -> torch.Tensor:
        losses = []
        for call, opt, xi, yi in zip(calls, opts, batches, y):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(call(xi), yi)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return torch.stack(losses)

    return step


def steps(models: list[SmallCNN], x: torch.Tensor, y: torch.Tensor,
          compiled: bool = False) -> dict[str, Callable[[], torch.Tensor]]:
    """{way: one training step of all K models, returning the (K,) losses}; x (K, B, 3, H, W), y (K, B)."""
    k, b, _, h, w = x.shape
    sequential = one_by_one(models, x, y)

    params, buffers = stack_module_state(copy.deepcopy(models))
    params = {n: p.detach().requires_grad_() for n, p in params.items()}
    skeleton = copy.deepcopy(models[0]).to("meta")
    vmap_opt = torch.optim.Adam(params.values(), 1e-3)

    def one_loss(p, bufs, xi, yi):  # (B, 3, H, W) -> ()
        return F.cross_entropy(functional_call(skeleton, (p, bufs), (xi,)), yi)

    losses_of = vmap(one_loss)

    def vmapped() -> torch.Tensor:
        vmap_opt.zero_grad(set_to_none=True)
        losses = losses_of(params, buffers, x, y)  # (K,)
        losses.sum().backward()  # disjoint parameters: each model gets its own loss's gradient
        vmap_opt.step()
        return losses.detach()

    wide = grouped_network(models).to(x.device)
    wide_opt = torch.optim.Adam(wide.parameters(), 1e-3)
    x_wide = x.permute(1, 0, 2, 3, 4).reshape(b, k * 3, h, w)  # (B, K*3, H, W)
    x_wide = x_wide.contiguous(memory_format=torch.channels_last)

    def grouped() -> torch.Tensor:
        wide_opt.zero_grad(set_to_none=True)
        logits = wide["head"](wide["body"](x_wide)[:, :, None]).reshape(b, k, -1).transpose(0, 1)  # (K, B, classes)
        losses = F.cross_entropy(logits.reshape(k * b, -1), y.reshape(-1), reduction="none").reshape(k, b).mean(1)
        losses.sum().backward()
        wide_opt.step()
        return losses.detach()

    ways = {"sequential": sequential, "vmap": vmapped, "grouped": grouped}
    if compiled:
        ways["compiled"] = one_by_one(models, x, y, torch.compile)
    return ways


def timed(step: Callable[[], torch.Tensor], device: torch.device) -> tuple[torch.Tensor, float]:
    """(the step's losses, its wall seconds), the device synchronised on both sides."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    losses = step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return losses, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--channels", default="16,32,64")
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true", help="time the sequential steps under torch.compile too")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    channels = tuple(int(c) for c in args.channels.split(","))
    models = [SmallCNN(10, channels).to(device) for _ in range(args.models)]
    x = torch.randn(args.models, args.batch, 3, args.size, args.size, device=device)
    y = torch.randint(0, 10, (args.models, args.batch), device=device)
    ways = steps(models, x, y, args.compile)
    # the same K losses from the same weights, and again after one step (the gradients and the update match too)
    first_steps = {name: 0.0 for name in ways}  # seconds: the compiled way compiles here (forward, then backward)
    for step_no in (1, 2):
        losses = {}
        for name, step in ways.items():
            losses[name], seconds = timed(step, device)
            first_steps[name] += seconds
        for name in set(ways) - {"sequential"}:
            if not torch.allclose(losses[name], losses["sequential"], rtol=1e-3, atol=1e-4):
                raise SystemExit(f"{name} computes other losses than sequential at step {step_no}: {losses[name]} "
                                 f"vs {losses['sequential']}")
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.steps):
        for name, step in ways.items():
            times[name].append(timed(step, device)[1])
    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.models} x SmallCNN {list(channels)} at {args.size} px, batch {args.batch}, {args.device}, "
          f"{args.threads} thread(s); median of {args.steps} steps each (losses of two steps checked equal first)")
    print(f"{'way':12s} {'ms / step of all K':>19s} {'vs sequential':>14s}")
    for name, median in medians.items():
        print(f"{name:12s} {1000 * median:19.1f} {median / medians['sequential']:13.2f}x")
    if "compiled" in ways:
        extra = first_steps["compiled"] - first_steps["sequential"]
        print(f"compiling: {extra:.1f} s for the K models (their first two steps beyond sequential's), "
              "paid once per process")
    return {name: median / medians["sequential"] for name, median in medians.items()}


if __name__ == "__main__":
    main()
