"""Several processes, one per device (`training.gpus`, started by `python -m torch.distributed.run`),
with the semantics of PyTorch's DistributedDataParallel: every process holds the same weights,
reads its own contiguous share of each global batch, and the gradients are averaged across
processes before every optimiser step, so the global batch and the learning rate are those of one
device. Per-sample state (loss EMAs, queues) is updated with the rows of every process
(`gather_rows`), so it stays the same on every process.

Without a process group (one process, the default) every helper here is a no-op and nothing
changes: `world()` is 1, `gather_rows` returns its input, `averaged_gradients` does nothing.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, TypeVar, cast

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn
import torch.nn as nn
from torch.nn.modules.batchnorm import _BatchNorm

#: how long a rank waits in a collective: the others wait at a barrier while rank 0 alone scores a
#: run's monitor stores (learning curves, model selection), which takes longer than the default
#: 10 minutes on ImageNet-size stores
TIMEOUT = timedelta(hours=3)


def init_from_env() -> None:
    """Join the process group that `torch.distributed.run` describes in the environment
    (WORLD_SIZE > 1): NCCL with one GPU per process (cuda:LOCAL_RANK) where CUDA is available,
    else gloo on the CPU. Without WORLD_SIZE, or where a group already exists (a test's), nothing."""
    if dist.is_initialized() or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(local_gpu())
        dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()), timeout=TIMEOUT)
    else:
        dist.init_process_group("gloo", timeout=TIMEOUT)
    atexit.register(dist.destroy_process_group)


def local_gpu() -> int:
    """This process's GPU, cuda:LOCAL_RANK; a clear error where the node shows fewer GPUs than
    processes (CUDA's own is "invalid device ordinal")."""
    local_rank, visible = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
    if local_rank >= visible:
        shown = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise RuntimeError(
            f"process {local_rank} of {os.environ.get('LOCAL_WORLD_SIZE', '?')} on this node needs GPU {local_rank}, "
            "but "
            f"the node shows {visible} GPU(s) (CUDA_VISIBLE_DEVICES={shown!r}): set training.gpus to at most {visible} "
            "for this node, or run where training.gpus GPUs are free (the workflow's gpu resource asks for them)"
        )
    return local_rank


def world() -> int:
    """Processes of the initialised process group (1 without one)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank (0 without a process group)."""
    return dist.get_rank() if world() > 1 else 0


def is_main() -> bool:
    """True on the process that writes the run's files (rank 0)."""
    return rank() == 0


def barrier() -> None:
    """Wait for every process (nothing with one)."""
    if world() > 1:
        dist.barrier()


@torch.no_grad()
def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """Every process's x (B, ...) concatenated in rank order (world B, ...), without gradient; x
    itself with one process. Each process holds a contiguous share of the global batch
    (`ZarrBatches(shard=...)`), so the result is the global batch in the one-process order."""
    if world() == 1:
        return x
    boolean = x.dtype == torch.bool
    x = x.to(torch.uint8) if boolean else x  # gloo gathers no booleans
    parts = [torch.empty_like(x) for _ in range(world())]
    dist.all_gather(parts, x.contiguous())
    out = torch.cat(parts)
    return out.bool() if boolean else out


def own_rows(x: torch.Tensor) -> torch.Tensor:
    """This process's share of a global-batch tensor x (world B, ...) (the inverse of `gather_rows`)."""
    return x.chunk(world())[rank()] if world() > 1 else x


#: gradient bytes per all-reduce (DistributedDataParallel's default bucket size): the first
#: buckets are reduced while backward still computes the earlier layers' gradients
BUCKET_BYTES = 25 * 2**20
#: set once batch norms over the global batch are in use (`synchronise_batch_norm`): their backward
#: all-reduces, so gradient buckets start only after backward (`averaged_gradients`)
_COLLECTIVES_IN_BACKWARD = False


class averaged_gradients:
    """`with averaged_gradients(params): loss.backward()` leaves each parameter's gradient the mean
    over the processes (DistributedDataParallel's all-reduce), so the step is the one-device step
    on the global batch. The parameters are cut into buckets of about `BUCKET_BYTES` in reverse
    order (backward produces the last layers' gradients first); a bucket's all-reduce starts
    asynchronously as soon as backward has produced all its gradients, and the buckets start in
    one fixed order on every process (a bucket waits for the ones before it), so the collectives
    pair up. At the end the rest start (a parameter without a gradient counts as zero there; one
    without a gradient on every process keeps none, as Adam skips it on one device) and all are
    awaited. Nothing happens with one process."""

    def __init__(self, params: Iterable[nn.Parameter], bucket_bytes: int = BUCKET_BYTES):
        self.buckets: list[list[nn.Parameter]] = []
        if world() == 1:
            return
        size = 0
        for p in reversed(list(dict.fromkeys(p for p in params if p.requires_grad))):  # each once
            if (
                not self.buckets
                or size + p.numel() * p.element_size() > bucket_bytes
                or p.dtype != self.buckets[-1][0].dtype
            ):
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()

    def __enter__(self) -> averaged_gradients:
        self.pending = [{id(p) for p in bucket} for bucket in self.buckets]
        self.works: list[tuple[Any, torch.Tensor]] = []
        # a batch norm over the global batch all-reduces inside backward: the buckets then all start after
        # it, or a process whose bucket waits (a parameter without a gradient there) would pair its
        # collectives with another's in another order
        self.hooks = (
            []
            if _COLLECTIVES_IN_BACKWARD
            else [
                p.register_post_accumulate_grad_hook(lambda param, b=b: self._produced(b, param))
                for b, bucket in enumerate(self.buckets)
                for p in bucket
            ]
        )
        return self

    def _produced(self, b: int, param: nn.Parameter) -> None:
        self.pending[b].discard(id(param))  # a hook firing twice counts once
        while len(self.works) < len(self.buckets) and not self.pending[len(self.works)]:
            self._start(len(self.works))

    @torch.no_grad()
    def _start(self, b: int) -> None:
        group = self.buckets[b]
        # built on the host and sent without waiting (a device tensor made from a list waits for the GPU)
        has = torch.tensor([p.grad is not None for p in group], dtype=group[0].dtype).to(
            group[0].device, non_blocking=True
        )
        flat = torch.cat(
            [
                *(
                    p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel(), dtype=p.dtype, device=p.device)
                    for p in group
                ),
                has,
            ]
        )
        self.works.append((dist.all_reduce(flat, async_op=True), flat))  # the gradients and who had one

    @torch.no_grad()
    def __exit__(self, *exc) -> None:
        for hook in self.hooks:
            hook.remove()
        if exc[0] is not None:
            return
        while len(self.works) < len(self.buckets):
            self._start(len(self.works))
        for group, (work, flat) in zip(self.buckets, self.works):
            work.wait()
            used = flat[-len(group) :] > 0
            offset = 0
            for p, any_grad in zip(group, used.tolist()):  # once a step, after the wait
                if any_grad:
                    mean = flat[offset : offset + p.numel()].view_as(p).div_(world())
                    if p.grad is None:
                        p.grad = mean.clone(memory_format=torch.preserve_format)
                    else:
                        p.grad.copy_(mean)
                offset += p.numel()


@torch.no_grad()
def sum_over_processes(x: torch.Tensor) -> torch.Tensor:
    """x summed over the processes (x itself with one), the same on every process."""
    if world() > 1:
        x = x.clone()
        dist.all_reduce(x)
    return x


def main_decides(flag: bool, device: torch.device) -> bool:
    """Rank 0's `flag` on every process (`flag` itself with one): a decision all processes take
    together, such as stopping a run for the next job (each process's clock differs a little)."""
    if world() == 1:
        return flag
    decision = torch.tensor([float(flag)], device=device)
    dist.broadcast(decision, src=0)
    return bool(decision.item())


def broadcast_state_(module: nn.Module) -> None:
    """Copy rank 0's parameters and buffers to every process (weights start name-seeded and
    equal anyway; this makes it a guarantee)."""
    if world() == 1:
        return
    for tensor in [*module.parameters(), *module.buffers()]:
        dist.broadcast(tensor.data, src=0)


@torch.no_grad()
def broadcast_batch_norm_(module: nn.Module) -> None:
    """Copy rank 0's batch-norm running statistics to every process, after each step: what
    DistributedDataParallel's `broadcast_buffers` does before each forward. Without it each
    process's running statistics would follow its own share of the batches, and every use of
    them on a process (eval-mode scoring, ReBias's fixed G) would differ between processes. Batch
    norms over the global batch (`training.sync_bn`) are left out: their statistics are already
    the same on every process."""
    if world() == 1:
        return
    stats = [
        t
        for m in module.modules()
        if isinstance(m, _BatchNorm)
        and m.track_running_stats
        and not isinstance(m, (nn.SyncBatchNorm, GlobalBatchNorm))
        for t in (m.running_mean, m.running_var)
        if t is not None  # (always, with track_running_stats)
    ]
    if not stats:
        return
    flat = torch.cat([t.reshape(-1) for t in stats])
    dist.broadcast(flat, src=0)
    offset = 0
    for t in stats:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()


class GlobalBatchNorm(_BatchNorm):
    """Batch norm with the statistics of the global batch (every process's rows), for the devices
    torch's `nn.SyncBatchNorm` refuses (CPU tensors over gloo). The per-channel sum and count, then
    the sum of squared deviations, are summed across processes with the differentiable
    `torch.distributed.nn` all-reduce, so the gradient is that of one batch norm over the global
    batch (Ioffe & Szegedy 2015, Alg. 1); the running variance is the unbiased one, as in
    `nn.BatchNorm2d`. In eval mode, or in one process, it is a plain batch norm. Parameters and
    buffers are those of the batch norm it replaces, so state dicts load either way."""

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() < 2:
            raise ValueError(f"GlobalBatchNorm expects (N, C, ...) input, got {x.dim()}-D")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or world() == 1:
            return super().forward(x)
        self._check_input_dim(x)
        dims, shape = [0, *range(2, x.dim())], (1, x.shape[1]) + (1,) * (x.dim() - 2)
        xf = x.float()
        count = torch.tensor([x.numel() // x.shape[1]], dtype=xf.dtype, device=x.device)
        totals = dist_nn.all_reduce(torch.cat([xf.sum(dims), count]))  # (C + 1,)
        n = totals[-1]
        mean = totals[:-1] / n
        centred = xf - mean.view(shape)
        var = dist_nn.all_reduce(centred.square().sum(dims)) / n  # biased, as BN normalises
        y = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        running_mean, running_var, batches = self.running_mean, self.running_var, self.num_batches_tracked
        if running_mean is not None and running_var is not None and batches is not None:  # track_running_stats
            with torch.no_grad():
                batches.add_(1)
                factor = self.momentum if self.momentum is not None else 1.0 / float(batches)
                running_mean.mul_(1 - factor).add_(mean.detach(), alpha=factor)
                running_var.mul_(1 - factor).add_(var.detach() * n / (n - 1).clamp_min(1), alpha=factor)
        return y.to(x.dtype)


def _global_batch_norm(module: nn.Module) -> nn.Module:
    """`module` with every batch norm replaced by a `GlobalBatchNorm` that shares its parameters
    and buffers (the optimiser keeps its references), as `nn.SyncBatchNorm.convert_sync_batchnorm`."""
    out = module
    if isinstance(module, _BatchNorm) and not isinstance(module, GlobalBatchNorm):
        out = GlobalBatchNorm(
            module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats
        )
        if module.affine:
            out.weight, out.bias = module.weight, module.bias
        if module.track_running_stats:
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
        out.train(module.training)
    for name, child in module.named_children():
        out.add_module(name, _global_batch_norm(child))
    return out


M = TypeVar("M", bound=nn.Module)


def synchronise_batch_norm(module: M, on: torch.device) -> M:
    """`module` with batch norm over the global batch (`training.sync_bn`): `nn.SyncBatchNorm`
    on CUDA, `GlobalBatchNorm` elsewhere. Parameters and buffers are shared with the originals."""
    global _COLLECTIVES_IN_BACKWARD
    _COLLECTIVES_IN_BACKWARD = True
    # both replace the batch norms inside `module` and return `module` itself (a method is no batch norm)
    if on.type == "cuda":
        return cast(M, nn.SyncBatchNorm.convert_sync_batchnorm(module))
    return cast(M, _global_batch_norm(module))


def mean_over_processes(sums: dict[str, float], counts: dict[str, int]) -> dict[str, float]:
    """{statistic: mean over every logged value of every process} from each process's sums and
    counts (processes may log different statistics: some are logged only when a batch has rows of
    a group)."""
    gathered: list = [None] * world()
    if world() > 1:
        dist.all_gather_object(gathered, (sums, counts))
    else:
        gathered = [(sums, counts)]
    total: dict[str, float] = {}
    n: dict[str, int] = {}
    for part_sums, part_counts in gathered:
        for key, value in part_sums.items():
            total[key] = total.get(key, 0.0) + value
            n[key] = n.get(key, 0) + part_counts[key]
    return {k: total[k] / n[k] for k in total}
