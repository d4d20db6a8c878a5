"""MoCo's shuffled batch norm on one device: batch norm with statistics per sub-batch (He et al.
2020, Sec. 3.3, as the authors' one-GPU demo emulates the per-GPU BN of several devices)."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F


class SplitBatchNorm2d(nn.BatchNorm2d):
    """Batch norm with statistics per sub-batch: the per-GPU BN of MoCo's shuffled BN (He et al.
    2020, Sec. 3.3) on one device, as the authors' one-GPU demo emulates it. In training mode the
    batch is cut into s blocks of consecutive rows (the demo takes rows j, j+s, j+2s, ...: any fixed
    partition of a shuffled batch does the same job), each normalised by `F.batch_norm` with its own
    statistics, and the running statistics are the mean of the s blocks' updates. Blocks keep the
    native kernel and the channels-last layout (the demo's reshape into s C channels needs a copy
    each way: +40 % per MoCo step on a CPU, measured). In eval mode it is `nn.BatchNorm2d`
    (running statistics). Parameters and buffers are BatchNorm2d's, so state dicts load either way."""

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
        # each sub-batch its own running statistics, updated from the common ones; their mean is the new state
        running = [(self.running_mean.clone(), self.running_var.clone()) for _ in range(s)]
        out = torch.cat([F.batch_norm(block, mean, var, self.weight, self.bias, True, factor, self.eps)
                         for block, (mean, var) in zip(x.chunk(s), running)])            # (B, C, H, W)
        with torch.no_grad():
            self.running_mean.copy_(torch.stack([mean for mean, _ in running]).mean(0))
            self.running_var.copy_(torch.stack([var for _, var in running]).mean(0))
        return out


def split_batch_norm(module: nn.Module, splits: int) -> nn.Module:
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
