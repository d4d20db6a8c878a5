"""Self-supervised pre-training with non-semantic negatives (Ge et al., NeurIPS 2021), then the
linear probe on the frozen backbone.

MoCo-v2 (Chen et al. 2020): a query encoder (the backbone + a 2-layer MLP head), a momentum
key encoder, a FIFO queue of K keys, temperature T and the aug-plus views. BYOL (Grill et al.
2020): an online backbone + projector + predictor against an EMA target, symmetrised over the
two views. A non-semantic negative x_ns of each image (Sec. 2.2-2.3) enters the loss through
Eq. (1) (MoCo) or Eq. (2) (BYOL): the patch negative is made anew every step by tiling the
query view itself (`training.negatives`, as the authors' `nonsem_transform(q)`), the texture
negative is the image's IN-9-Texture copy, read row-aligned. Each negative is seen in the colours
of the view it is contrasted with (Sec. 3.3: "the expected color distribution of our patch-based
negatives is identical to that of the query images"): the patch negative is cut from that view,
its crop included; the texture image gets that view's whole augmentation, as the authors'
loader re-seeds the augmentation for it. Negatives go through the key (target) encoder, get no
gradient and are never enqueued.

MoCo's shuffled batch norm (He et al. 2020, Sec. 3.3; `shuffle_bn`, on by default): the key
encoder's BN statistics must not come from the same batch as the query's, or the model finds
its positive key by them. On one device, as the authors' one-GPU CIFAR-10 demo does, both
encoders compute BN statistics per sub-batch (`SplitBatchNorm2d`, `bn_splits` of them: the
per-GPU BN of MoCo's 8 GPUs, which normalises each GPU's queries over its own share too), and
the key batch is permuted before the key encoder and unpermuted after, so a query's sub-batch
and its key's share about 1/bn_splits of their images; the non-semantic negatives go through
the key encoder the same way, with their own permutation (as in the authors' builder). At the
demo's batch of 64, 8 splits leave 8 images per BN batch (MoCo: 32). With several processes
(`training.gpus`, `training.distributed`) it is MoCo's own multi-GPU code: the key batch is
shuffled across the processes as its builder's `_batch_shuffle_ddp` does
(`shuffled_across_processes`), each process's BN normalises its own share (queries: the
process's own rows; no split), every process enqueues the keys of the whole global batch in
rank order (`concat_all_gather` in `_dequeue_and_enqueue`), and the gradients are averaged before
each step (`Method.step`), so the queue and the weights stay the same on every process.

A training split of whole photos (`train_views: photo`, `data.PhotoSplit`): the views, the probe's
crops included, are cut from each photo in its own proportions and resampled to the test images'
side, as the authors' RandomResizedCrop of the decoded photo (moco-non-sem-neg.py:247,
main_lincls.py:250); the probe's unaugmented features are those of the test view (the centred
square, Resize 256 + CenterCrop 224, main_lincls.py:256-257).

After pre-training, `finish` fits the linear probe on the frozen backbone (`ssl_probe`: the
authors' protocol, main_lincls.py). The probe is `network.head`, so every evaluation of the
workbench scores the model as it scores any other.
"""

from __future__ import annotations

import copy
import math
from typing import Any, TypeVar

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ..data import PhotoSplit
from ..distributed import gather_rows, world
from ..losses import byol_loss, moco_nce
from ..negatives import patch_negatives
from ..settings import TrainingSettings
from .base import Method
from .split_batch_norm import split_batch_norm
from .ssl_augment import AugPlus, ViewParams
from .ssl_probe import fit_linear_probe

# Several processes: MoCo's own shuffled BN across devices (its builder's _batch_shuffle_ddp and
# _batch_unshuffle_ddp).


@torch.no_grad()
def shuffled_across_processes(encode, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """encode(x) (B, dim) with the global batch shuffled across processes before `encode` (rank 0's
    permutation, broadcast) and unshuffled after: each process's BN sees a random 1/world of it."""
    rank, b = dist.get_rank(), len(x)
    everything = gather_rows(x)  # (world B, 3, H, W)
    perm = torch.randperm(len(everything), generator=g).to(x.device, non_blocking=True)
    dist.broadcast(perm, src=0)
    encoded = gather_rows(encode(everything[perm.view(-1, b)[rank]]))  # (world B, dim), permuted order
    return encoded[torch.argsort(perm).view(-1, b)[rank]]  # (B, dim), this process's rows


def mlp(d_in: int, d_hidden: int, d_out: int, batch_norm: bool) -> nn.Sequential:
    """Linear-(BN)-ReLU-Linear: MoCo-v2's head has no BN, BYOL's projector and predictor do."""
    middle = [nn.BatchNorm1d(d_hidden)] if batch_norm else []
    return nn.Sequential(nn.Linear(d_in, d_hidden), *middle, nn.ReLU(inplace=True), nn.Linear(d_hidden, d_out))


M = TypeVar("M", bound=nn.Module)


class SelfSupervised(Method):
    """Shared parts: aug-plus views, the non-semantic negative, the momentum copy, the linear probe."""

    scores_similarity = True  # `embed` (in each subclass) is scored against positives and negatives

    steps_done: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        if self.args["negative"] not in ("none", "patch", "texture"):
            raise ValueError(f"negative must be none, patch or texture, not {self.args['negative']!r}")
        if (self.args["negative"] == "texture") != ("textures" in self.aligned_variants):
            takes = "texture" if self.aligned_variants else "none or patch"
            raise ValueError(
                f"{type(self).__name__} takes negative: {takes}"
                " (texture negatives are the moco_v2_texture method, which reads IN-9-Texture)"
            )
        norm = train_cfg["normalize"]
        self.views = AugPlus(norm["mean"], norm["std"])
        self.photos: PhotoSplit | None = None  # the training split's photos, if it holds them (`setup`)
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.long))

    def setup(self, batches) -> dict[str, float]:
        """Keep whether the training split holds whole photos (`data.PhotoSplit`): the views' side then."""
        self.photos = batches.photos
        return {}

    def view_params(self, batch: dict[str, torch.Tensor]) -> ViewParams:
        """One aug-plus view of each image of `batch` (self.generator): of its stored square, or of its
        whole photo in the photo's proportions (the batch's `aspects`), at the test images' side."""
        images, aspects = batch["images"], batch.get("aspects")
        if aspects is None:
            size = images.shape[1]
        else:
            assert self.photos is not None  # a batch has aspects only from a split of whole photos
            size = self.photos.view_size
        return self.views.sample(len(images), size, self.generator, aspects)

    def unaugmented(self, batch: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
        """The batch's images as the network sees a test image: as stored, or a photo's test view."""
        images = batch["images"].to(device)
        if self.photos is None:
            return self.views.plain(images)
        return self.views.test_view(images, batch["aspects"], self.photos.fraction, self.photos.view_size)

    def negative_inputs(
        self, batch: dict[str, torch.Tensor], queries: torch.Tensor, *views: ViewParams
    ) -> torch.Tensor | None:
        """The method's non-semantic negative of each query view, or None without one. queries:
        the normalised query views (len(views) B, 3, H, W), the B images' views `views` in order.
        "patch": a patch tiling of each query view (`negatives.patch_negatives`, self.generator);
        "texture": the batch's IN-9-Texture copies in each view of `views`."""
        kind = self.args["negative"]
        if kind == "none":
            return None
        if kind == "patch":
            return patch_negatives(queries, self.generator)
        return torch.cat([self.views.apply(batch["textures"], view.in_square()) for view in views])

    @staticmethod
    @torch.no_grad()
    def momentum_update(online: nn.Module, target: nn.Module, m: float) -> None:
        """target <- m target + (1 - m) online for every parameter (buffers copied), as MoCo's
        `_momentum_update_key_encoder`, in a few multi-tensor (foreach) kernels instead of three per
        parameter: the same arithmetic (a multiply, then an add). Buffers are copied in one list per
        dtype (CUDA's multi-tensor copy falls back to a launch per tensor when a list mixes the float
        running statistics with the integer batch counts)."""
        p_t: list[torch.Tensor] = list(target.parameters())
        p_o = [p.detach() for p in online.parameters()]
        torch._foreach_mul_(p_t, m)
        torch._foreach_add_(p_t, p_o, alpha=1 - m)
        by_dtype: dict[torch.dtype, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for b_t, b_o in zip(target.buffers(), online.buffers(), strict=True):
            into, source = by_dtype.setdefault(b_t.dtype, ([], []))
            into.append(b_t)
            source.append(b_o)
        for into, source in by_dtype.values():  # a projector has none
            torch._foreach_copy_(into, source)

    @staticmethod
    def frozen_copy(module: M) -> M:
        twin = copy.deepcopy(module)
        for p in twin.parameters():
            p.requires_grad_(False)
        return twin

    def backbone_parameters(self) -> list[nn.Parameter]:
        """The network's parameters without the probe (`network.head`), which pre-training never uses."""
        head = {id(p) for p in self.network.head.parameters()}
        return [p for p in self.network.parameters() if id(p) not in head]

    def finish(self, batches) -> dict[str, float]:
        """Fit the linear probe (`network.head`) on the frozen backbone (eval mode); returns its final
        training loss and accuracy on the unaugmented training images, and the loss of predicting
        the training class shares (`probe_prior_loss`, the entropy of the labels: the best a
        constant does). With `probe_augment` as the authors' main_lincls.py: every epoch a fresh
        RandomResizedCrop (0.08-1) + flip of every training image through the backbone, in the
        training loader's batches; without it, on features of the unaugmented images computed once
        (seconds instead of 60 passes of the backbone: the demo's probe)."""
        return fit_linear_probe(self, batches)


class MoCoV2(SelfSupervised):
    """MoCo-v2 with an optional non-semantic negative, Eq. (1). `method_args`: alpha, tau, queue_size,
    momentum, proj_dim, negative (none | patch), shuffle_bn, bn_splits, probe_*."""

    queue: torch.Tensor  # a buffer (register_buffer)
    queue_ptr: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        settings = TrainingSettings.of(train_cfg)
        if settings.sync_bn and settings.gpus > 1 and self.args["shuffle_bn"]:
            raise ValueError(
                "training.sync_bn: true contradicts MoCo's shuffled batch norm (its key statistics must "
                "come from another set of images than the queries'): set method_args.shuffle_bn: false "
                "or training.sync_bn: false for this experiment"
            )
        d = self.network.feature_dim
        self.projector = mlp(d, d, self.args["proj_dim"], batch_norm=False)
        splits = self.key_bn_splits(train_cfg["batch_size"])
        if splits > 1:  # both encoders, as the authors' one-GPU demo (and MoCo's per-GPU BN, queries included)
            self.network = split_batch_norm(self.network, splits)
        self.key_network, self.key_projector = self.frozen_copy(self.network), self.frozen_copy(self.projector)
        queue = F.normalize(torch.randn(self.args["queue_size"], self.args["proj_dim"]), dim=1)
        self.register_buffer("queue", queue)  # (K, dim): MoCo starts from random keys
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.optimizer = self.make_optimizer([*self.backbone_parameters(), *self.projector.parameters()])

    def key_bn_splits(self, batch_size: int) -> int:
        """Sub-batches of the encoders' BN: `bn_splits` with shuffled BN on one process, else 1.
        A batch size that is not a multiple of bn_splits is an error (no silent fallback)."""
        if not self.args["shuffle_bn"] or world() > 1:
            return 1
        splits = self.args["bn_splits"]
        if batch_size % splits:
            raise ValueError(
                f"MoCo's shuffled batch norm splits each key batch into bn_splits = {splits} equal "
                f"sub-batches: batch_size {batch_size} is not a multiple of it; change batch_size "
                "or bn_splits (or set shuffle_bn: false)"
            )
        return splits

    def key(self, x: torch.Tensor) -> torch.Tensor:
        """Keys (B, dim) of normalised images x, in x's order and batch (no shuffling)."""
        return self.key_projector(self.key_network.features(x))

    @torch.no_grad()
    def shuffled_key(self, x: torch.Tensor) -> torch.Tensor:
        """Keys (B, dim) of x with shuffled BN (He et al. Sec. 3.3): on one process x is permuted
        (self.generator), keyed by the split-BN key encoder and unpermuted; across processes it is
        `shuffled_across_processes`. Without `shuffle_bn`, `key(x)`."""
        if not self.args["shuffle_bn"]:
            return self.key(x)
        if world() > 1:
            return shuffled_across_processes(self.key, x, self.generator)
        perm = torch.randperm(len(x), generator=self.generator).to(x.device, non_blocking=True)
        shuffled = x[perm].contiguous(memory_format=torch.channels_last)  # indexing drops the layout the encoders want
        return self.key(shuffled)[torch.argsort(perm)]  # (B, dim), rows of x again

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Replace the oldest entries of the queue by `keys` (B, dim)."""
        k = len(self.queue)
        keys = F.normalize(keys[-k:].float(), dim=1)
        ptr, n = self.host_count("queue_ptr"), len(keys)  # slices from a host pointer: no index read back
        first = min(n, k - ptr)
        self.queue[ptr : ptr + first] = keys[:first]
        self.queue[: n - first] = keys[first:]
        self.count_step("queue_ptr", n, k)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        images = batch["images"]  # (B, H, W, 3) uint8
        p_q, p_k = self.view_params(batch), self.view_params(batch)
        v_q, v_k = self.views.apply(images, p_q), self.views.apply(images, p_k)  # (B, 3, S, S) each
        ns = self.negative_inputs(batch, v_q, p_q)  # (B, 3, H, W) from v_q
        with self.autocast():
            q = self.projector(self.network.features(v_q))  # (B, dim)
            with torch.no_grad():
                self.momentum_update(self.network, self.key_network, self.args["momentum"])
                self.momentum_update(self.projector, self.key_projector, self.args["momentum"])
                k = self.shuffled_key(v_k)  # (B, dim)
                z_ns = self.shuffled_key(ns) if ns is not None else None  # (B, dim), no gradient
        loss = moco_nce(q, k, self.queue, self.args["tau"], z_ns, self.args["alpha"])
        self.step(self.optimizer, loss)
        self.enqueue(gather_rows(k))  # every process's keys, in rank order; negatives are never enqueued
        self.count_step("steps_done")
        stats: dict[str, torch.Tensor | float] = {"loss": loss.detach()}
        with torch.no_grad():
            qn = F.normalize(q.float(), dim=1)
            stats["sim_positive"] = (qn * F.normalize(k.float(), dim=1)).sum(1).mean()
            if z_ns is not None:
                stats["sim_nonsemantic"] = (qn * F.normalize(z_ns.float(), dim=1)).sum(1).mean()
        return stats

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The contrastive embedding (B, dim) of normalised images x, L2-normalised (Figs. 2-3)."""
        with self.autocast():
            return F.normalize(self.projector(self.network.features(x)).float(), dim=1)


class MoCoV2Texture(MoCoV2):
    """MoCo-v2 with the texture negative: the image's IN-9-Texture copy (read row-aligned)."""


class BYOL(SelfSupervised):
    """BYOL with an optional patch negative, Eq. (2). `method_args`: alpha, momentum (tau_base,
    raised to 1 with BYOL's cosine schedule), proj_dim, hidden_dim, negative (none | patch), probe_*.

    Our reading of Eq. (2) in the symmetrised loss (the BYOL variant has no public code): the
    term of view 1's prediction has view 1 as its query, so its negative is a tiling of view 1,
    and the term of view 2's prediction a tiling of view 2 (each drawn anew)."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        d, h, p = self.network.feature_dim, self.args["hidden_dim"], self.args["proj_dim"]
        self.projector, self.predictor = mlp(d, h, p, batch_norm=True), mlp(p, h, p, batch_norm=True)
        self.target_network, self.target_projector = self.frozen_copy(self.network), self.frozen_copy(self.projector)
        self.optimizer = self.make_optimizer(
            [*self.backbone_parameters(), *self.projector.parameters(), *self.predictor.parameters()]
        )

    def target_momentum(self) -> float:
        """BYOL's tau = 1 - (1 - tau_base) (cos(pi k / K) + 1) / 2 at step k of K."""
        total = max(1, self.total_steps)
        k = min(self.host_count("steps_done"), total)
        return 1 - (1 - self.args["momentum"]) * (math.cos(math.pi * k / total) + 1) / 2

    def target(self, x: torch.Tensor) -> torch.Tensor:
        return self.target_projector(self.target_network.features(x))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        images, b = batch["images"], len(batch["images"])  # (B, H, W, 3) uint8
        p_1, p_2 = self.view_params(batch), self.view_params(batch)
        views = torch.cat([self.views.apply(images, p_1), self.views.apply(images, p_2)])  # (2B, 3, S, S)
        ns = self.negative_inputs(batch, views, p_1, p_2)  # (2B, 3, H, W), row i from views[i]
        with self.autocast():
            p = self.predictor(self.projector(self.network.features(views)))  # (2B, proj)
            with torch.no_grad():
                z = self.target(views)  # (2B, proj)
                z_ns = self.target(ns) if ns is not None else None  # (2B, proj), no gradient
        z_swapped = torch.cat([z[b:], z[:b]])  # view 1 predicts view 2's target and vice versa
        loss = 2 * byol_loss(p, z_swapped, z_ns, self.args["alpha"])  # symmetrised: L(v1,v2) + L(v2,v1)
        self.step(self.optimizer, loss)
        m = self.target_momentum()
        self.momentum_update(self.network, self.target_network, m)
        self.momentum_update(self.projector, self.target_projector, m)
        self.count_step("steps_done")
        return {"loss": loss.detach(), "target_momentum": m}

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The online prediction (B, proj), L2-normalised: the space Eq. (2) compares in."""
        with self.autocast():
            return F.normalize(self.predictor(self.projector(self.network.features(x))).float(), dim=1)
