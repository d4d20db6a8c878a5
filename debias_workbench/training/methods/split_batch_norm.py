"""MoCo's shuffled batch norm on one device: batch norm with statistics per sub-batch (He et al.
2020, Sec. 3.3, as the authors' one-GPU demo emulates the per-GPU BN of several devices)."""

from __future__ import annotations

import copy
from typing import Any, TypeVar

import torch
import torch.nn as nn
import torch.nn.functional as F


def _side_by_side(x: torch.Tensor, s: int) -> torch.Tensor:
    """(s b, C, H, W) -> (b, s C, H, W): sub-batch i's channels at i C .. (i+1) C - 1, in x's
    memory format (one copy)."""
    n, c, h, w = x.shape
    if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
        nhwc = x.permute(0, 2, 3, 1).reshape(s, n // s, h, w, c)  # memory order of x
        return nhwc.permute(1, 2, 3, 0, 4).reshape(n // s, h, w, s * c).permute(0, 3, 1, 2)
    return x.reshape(s, n // s, c, h, w).transpose(0, 1).reshape(n // s, s * c, h, w)


def _stacked(y: torch.Tensor, s: int) -> torch.Tensor:
    """The inverse of `_side_by_side`: (b, s C, H, W) -> (s b, C, H, W), in y's memory format."""
    b, sc, h, w = y.shape
    c = sc // s
    if y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous():
        nhwc = y.permute(0, 2, 3, 1).reshape(b, h, w, s, c).permute(3, 0, 1, 2, 4)  # (s, b, H, W, C)
        return nhwc.reshape(s * b, h, w, c).permute(0, 3, 1, 2)
    return y.reshape(b, s, c, h, w).transpose(0, 1).reshape(s * b, c, h, w)


def grouped_batch_norm(bn: SplitBatchNorm2d, x: torch.Tensor, s: int, factor: float) -> torch.Tensor:
    """Training-mode batch norm of x (B, C, H, W) with statistics per block of B/s consecutive rows
    in ONE `F.batch_norm` call: the blocks laid side by side as s C channels (`_side_by_side`,
    the reshape of the authors' demo), weight, bias and running statistics repeated s times; the
    running statistics become the mean of the s blocks' updates. A constant number of kernels per
    layer whatever s (the GPU path: `per_block_batch_norm` launches about 4 s)."""
    c = x.shape[1]
    mean, var = bn.running_mean.repeat(s), bn.running_var.repeat(s)  # (s C,) each, updated in place
    out = F.batch_norm(_side_by_side(x, s), mean, var, bn.weight.repeat(s), bn.bias.repeat(s), True, factor, bn.eps)
    with torch.no_grad():
        bn.running_mean.copy_(mean.view(s, c).mean(0))
        bn.running_var.copy_(var.view(s, c).mean(0))
    return _stacked(out, s)  # (B, C, H, W)


def per_block_batch_norm(bn: SplitBatchNorm2d, x: torch.Tensor, s: int, factor: float) -> torch.Tensor:
    """The same as `grouped_batch_norm` with one `F.batch_norm` call per block: each block keeps
    the native kernel and the channels-last layout without a copy each way (the CPU path: the grouped
    reshape made a MoCo step slower, docs/measurements.md#shuffled-batch-norm-on-and-off), at 4 s kernels per
    layer."""
    running = [(bn.running_mean.clone(), bn.running_var.clone()) for _ in range(s)]
    out = torch.cat(
        [
            F.batch_norm(block, mean, var, bn.weight, bn.bias, True, factor, bn.eps)
            for block, (mean, var) in zip(x.chunk(s), running)
        ]
    )  # (B, C, H, W)
    with torch.no_grad():
        bn.running_mean.copy_(torch.stack([mean for mean, _ in running]).mean(0))
        bn.running_var.copy_(torch.stack([var for _, var in running]).mean(0))
    return out


#: the training-mode path per device type (any other device: per block); `benchmarks.gpu_throughput
#: --split-bn` swaps it to measure the other on a card
PATH_BY_DEVICE = {"cuda": grouped_batch_norm, "cpu": per_block_batch_norm}


class SplitBatchNorm2d(nn.BatchNorm2d):
    """Batch norm with statistics per sub-batch: the per-GPU BN of MoCo's shuffled BN (He et al.
    2020, Sec. 3.3) on one device, as the authors' one-GPU demo emulates it. In training mode the
    batch is cut into s blocks of consecutive rows (the demo takes rows j, j+s, j+2s, ...: any fixed
    partition of a shuffled batch does the same job), each normalised with its own statistics, and
    the running statistics are the mean of the s blocks' updates: on CUDA in one call over the
    blocks side by side (`grouped_batch_norm`: launches, not arithmetic, bound a GPU step), on the
    CPU one call per block (`per_block_batch_norm`). In eval mode it is `nn.BatchNorm2d` (running
    statistics). Parameters and buffers are BatchNorm2d's, so state dicts load either way."""

    # BatchNorm2d's running statistics, never None here: split batch norm tracks them
    running_mean: torch.Tensor
    running_var: torch.Tensor
    num_batches_tracked: torch.Tensor

    def __init__(self, num_features: int, splits: int, **kwargs: Any):
        super().__init__(num_features, **kwargs)
        self.splits = splits

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return super().forward(x)
        n, s = len(x), self.splits
        if n % s:
            raise ValueError(f"split batch norm: a batch of {n} does not split into {s} equal sub-batches")
        self.num_batches_tracked.add_(1)
        factor = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        return PATH_BY_DEVICE.get(x.device.type, per_block_batch_norm)(self, x, s, factor)


M = TypeVar("M", bound=nn.Module)


def split_batch_norm(module: M, splits: int) -> M:
    """A copy of `module` whose `nn.BatchNorm2d` layers are `SplitBatchNorm2d`s of `splits`
    sub-batches, with the same parameters and buffers."""
    twin = copy.deepcopy(module)
    for name, bn in list(twin.named_modules()):
        if type(bn) is nn.BatchNorm2d:
            if not (bn.affine and bn.track_running_stats):
                raise ValueError(f"{name}: split batch norm needs an affine batch norm with running statistics")
            split = SplitBatchNorm2d(bn.num_features, splits, eps=bn.eps, momentum=bn.momentum)
            split.load_state_dict(bn.state_dict())
            twin.set_submodule(name, split.to(bn.weight.device))
    return twin
