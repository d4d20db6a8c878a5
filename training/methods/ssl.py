"""Self-supervised pre-training with non-semantic negatives (Ge et al., NeurIPS 2021), then the
linear probe on the frozen backbone.

MoCo-v2 (Chen et al. 2020): a query encoder (the backbone + a 2-layer MLP head), a momentum
key encoder, a FIFO queue of K keys, temperature T and the aug-plus views. BYOL (Grill et al.
2020): an online backbone + projector + predictor against an EMA target, symmetrised over the
two views. A non-semantic negative x_ns of each image (Sec. 2.2-2.3) enters the loss through
Eq. (1) (MoCo) or Eq. (2) (BYOL): the patch negative is made anew every step from the stored
image (`training.negatives`), the texture negative is the image's IN-9-Texture copy, read
row-aligned. Negatives go through the key (target) encoder without augmentation: their colour
statistics stay the query image's, which is what makes them a shortcut detector (Sec. 3.5);
they get no gradient and are never enqueued.

On one device MoCo's shuffled batch norm (which needs several GPUs) is not done: the key
encoder's batch norm sees the whole key batch, as in single-GPU reimplementations.

After pre-training, `finish` fits the linear probe (the paper's protocol: SGD lr 10,
momentum 0.9, 60 epochs, lr x 0.1 at epochs 30, 40, 50) on the frozen backbone's features of
the training images; the features are computed once, without augmentation (the paper's probe
augments each epoch; on cached features 60 epochs take seconds). The probe is
`network.head`, so every evaluation of the workbench scores the model as it scores any other.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from pipeline.seeding import name_seed

from ..losses import byol_loss, moco_nce
from ..negatives import patch_negatives
from ..ssl_augment import AugPlus
from .base import Method


def mlp(d_in: int, d_hidden: int, d_out: int, batch_norm: bool) -> nn.Sequential:
    """Linear-(BN)-ReLU-Linear: MoCo-v2's head has no BN, BYOL's projector and predictor do."""
    middle = [nn.BatchNorm1d(d_hidden)] if batch_norm else []
    return nn.Sequential(nn.Linear(d_in, d_hidden), *middle, nn.ReLU(inplace=True), nn.Linear(d_hidden, d_out))


class SelfSupervised(Method):
    """Shared parts: aug-plus views, the non-semantic negative, the momentum copy, the linear probe."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        if self.args["negative"] not in ("none", "patch", "texture"):
            raise ValueError(f"negative must be none, patch or texture, not {self.args['negative']!r}")
        if (self.args["negative"] == "texture") != ("textures" in self.aligned_variants):
            raise ValueError(f"{type(self).__name__} takes negative: {'texture' if self.aligned_variants else 'none or patch'}"
                             " (texture negatives are the moco_v2_texture method, which reads IN-9-Texture)")
        norm = train_cfg["normalize"]
        self.views = AugPlus(norm["mean"], norm["std"])
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.long))

    def negative_inputs(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """Normalised non-semantic negatives (B, 3, H, W) of the batch, or None."""
        kind = self.args["negative"]
        if kind == "none":
            return None
        images = batch["textures"] if kind == "texture" else patch_negatives(batch["images"], self.generator)
        return self.views.plain(images)

    @staticmethod
    @torch.no_grad()
    def momentum_update(online: nn.Module, target: nn.Module, m: float) -> None:
        """target <- m target + (1 - m) online, parameter by parameter (buffers copied)."""
        for p_t, p_o in zip(target.parameters(), online.parameters()):
            p_t.mul_(m).add_(p_o.detach(), alpha=1 - m)
        for b_t, b_o in zip(target.buffers(), online.buffers()):
            b_t.copy_(b_o)

    @staticmethod
    def frozen_copy(module: nn.Module) -> nn.Module:
        twin = copy.deepcopy(module)
        for p in twin.parameters():
            p.requires_grad_(False)
        return twin

    def backbone_parameters(self) -> list[nn.Parameter]:
        """The network's parameters without the probe (`network.head`), which pre-training never uses."""
        head = {id(p) for p in self.network.head.parameters()}
        return [p for p in self.network.parameters() if id(p) not in head]

    def finish(self, batches) -> dict[str, float]:
        """Fit the linear probe (`network.head`) on the frozen features of the training split;
        returns its final training loss and accuracy."""
        device = next(self.parameters()).device
        self.eval()
        feats, labels = [], []
        with torch.no_grad():
            for batch in batches.epoch(-1):  # every training row once (the loader drops the last partial batch)
                feats.append(self.features(self.views.plain(batch["images"].to(device))))
                labels.append(batch["labels"].to(device))
        x, y = torch.cat(feats), torch.cat(labels)
        head = self.network.head
        nn.init.normal_(head.weight, std=0.01)
        nn.init.zeros_(head.bias)
        opt = torch.optim.SGD(head.parameters(), lr=self.args["probe_lr"], momentum=0.9, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, self.args["probe_milestones"], 0.1)
        g = torch.Generator().manual_seed(name_seed("probe", type(self).__name__, self.args["probe_epochs"]))
        bs = self.args["probe_batch_size"]
        for _ in range(self.args["probe_epochs"]):
            order = torch.randperm(len(y), generator=g).to(device)
            for start in range(0, len(y), bs):
                rows = order[start:start + bs]
                loss = F.cross_entropy(head(x[rows]), y[rows])
                self.step(opt, loss)
            sched.step()
        with torch.no_grad():
            logits = head(x)
            stats = {"probe_loss": float(F.cross_entropy(logits, y)),
                     "probe_train_accuracy": float((logits.argmax(1) == y).float().mean() * 100)}
        if not math.isfinite(stats["probe_loss"]):
            raise FloatingPointError(f"the linear probe diverged (lr {self.args['probe_lr']}): lower probe_lr")
        return stats


class MoCoV2(SelfSupervised):
    """MoCo-v2 with an optional non-semantic negative, Eq. (1). `method_args`: alpha, tau, queue_size,
    momentum, proj_dim, negative (none | patch), probe_*."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        d = self.network.feature_dim
        self.projector = mlp(d, d, self.args["proj_dim"], batch_norm=False)
        self.key_network, self.key_projector = self.frozen_copy(self.network), self.frozen_copy(self.projector)
        queue = F.normalize(torch.randn(self.args["queue_size"], self.args["proj_dim"]), dim=1)
        self.register_buffer("queue", queue)                 # (K, dim): MoCo starts from random keys
        self.register_buffer("queue_ptr", torch.zeros((), dtype=torch.long))
        self.optimizer = self.make_optimizer([*self.backbone_parameters(), *self.projector.parameters()])

    def key(self, x: torch.Tensor) -> torch.Tensor:
        return self.key_projector(self.key_network.features(x))

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Replace the oldest entries of the queue by `keys` (B, dim)."""
        k = len(self.queue)
        keys = keys[-k:]
        slots = (self.queue_ptr + torch.arange(len(keys), device=keys.device)) % k
        self.queue[slots] = F.normalize(keys.float(), dim=1)
        self.queue_ptr.copy_((self.queue_ptr + len(keys)) % k)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        images = batch["images"]                                          # (B, H, W, 3) uint8
        v_q, v_k = self.views(images, self.generator), self.views(images, self.generator)  # (B, 3, H, W) each
        ns = self.negative_inputs(batch)
        with self.autocast():
            q = self.projector(self.network.features(v_q))               # (B, dim)
            with torch.no_grad():
                self.momentum_update(self.network, self.key_network, self.args["momentum"])
                self.momentum_update(self.projector, self.key_projector, self.args["momentum"])
                k = self.key(v_k)                                         # (B, dim)
                z_ns = self.key(ns) if ns is not None else None          # (B, dim), no gradient
        loss = moco_nce(q, k, self.queue, self.args["tau"], z_ns, self.args["alpha"])
        self.step(self.optimizer, loss)
        self.enqueue(k)  # the keys only: negatives are never enqueued
        self.steps_done += 1
        stats = {"loss": float(loss.detach())}
        with torch.no_grad():
            qn = F.normalize(q.float(), dim=1)
            stats["sim_positive"] = float((qn * F.normalize(k.float(), dim=1)).sum(1).mean())
            if z_ns is not None:
                stats["sim_nonsemantic"] = float((qn * F.normalize(z_ns.float(), dim=1)).sum(1).mean())
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
    raised to 1 with BYOL's cosine schedule), proj_dim, hidden_dim, negative (none | patch), probe_*."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        d, h, p = self.network.feature_dim, self.args["hidden_dim"], self.args["proj_dim"]
        self.projector, self.predictor = mlp(d, h, p, batch_norm=True), mlp(p, h, p, batch_norm=True)
        self.target_network, self.target_projector = self.frozen_copy(self.network), self.frozen_copy(self.projector)
        self.optimizer = self.make_optimizer([*self.backbone_parameters(), *self.projector.parameters(),
                                              *self.predictor.parameters()])

    def target_momentum(self) -> float:
        """BYOL's tau = 1 - (1 - tau_base) (cos(pi k / K) + 1) / 2 at step k of K."""
        total = max(1, self.cfg["epochs"] * self.steps_per_epoch)
        k = min(int(self.steps_done), total)
        return 1 - (1 - self.args["momentum"]) * (math.cos(math.pi * k / total) + 1) / 2

    def target(self, x: torch.Tensor) -> torch.Tensor:
        return self.target_projector(self.target_network.features(x))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        images = batch["images"]
        b = len(images)
        views = torch.cat([self.views(images, self.generator), self.views(images, self.generator)])  # (2B, 3, H, W)
        ns = self.negative_inputs(batch)
        with self.autocast():
            p = self.predictor(self.projector(self.network.features(views)))   # (2B, proj)
            with torch.no_grad():
                z = self.target(views)                                         # (2B, proj)
                z_ns = self.target(ns) if ns is not None else None            # (B, proj), no gradient
        z_swapped = torch.cat([z[b:], z[:b]])  # view 1 predicts view 2's target and vice versa
        z_ns2 = torch.cat([z_ns, z_ns]) if z_ns is not None else None
        loss = 2 * byol_loss(p, z_swapped, z_ns2, self.args["alpha"])          # symmetrised: L(v1,v2) + L(v2,v1)
        self.step(self.optimizer, loss)
        m = self.target_momentum()
        self.momentum_update(self.network, self.target_network, m)
        self.momentum_update(self.projector, self.target_projector, m)
        self.steps_done += 1
        return {"loss": float(loss.detach()), "target_momentum": m}

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The online prediction (B, proj), L2-normalised: the space Eq. (2) compares in."""
        with self.autocast():
            return F.normalize(self.predictor(self.projector(self.network.features(x))).float(), dim=1)
