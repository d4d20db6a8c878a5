"""ReBias (Bahng et al., ICML 2020) and the baselines of its Table 1 that pair the main network
F with a biased-by-design network G (`method_args.biased_arch`): RUBi and LearnedMixin+H.

All of them predict with F alone; G is trained beside it (1x1-kernel SimpleConvNet on Biased
MNIST, BagNet18 on images).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..losses import hsic
from ..network import Network
from ..settings import TrainingSettings
from .base import Method


class _WithBiasedNetwork(Method):
    """F (`self.network`, from `training.arch`) plus G (`self.biased`, from `biased_arch`, random weights),
    trained at `biased_lr` (None: the run's learning rate, as ReBias trains F and G from scratch at one rate;
    a G beside an F fine-tuned from pretrained weights at a small rate needs its own, BAR's 1e-5)."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.biased = self.build_biased_network(self.args["biased_arch"])

    def biased_optimizer(self) -> torch.optim.Optimizer:
        """G's optimiser: the run's, at `biased_lr`."""
        return self.make_optimizer(self.biased.parameters(), self.args["biased_lr"])

    def _forward(self, net: Network, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with self.autocast():
            z = net.features(x)
            return z.float(), net.head(z).float()


class ReBias(_WithBiasedNetwork):
    """Minimax of Eq. (3), one alternating step per batch (Algorithm 1): first G minimises
        CE(g) - lambda_g * HSIC_1(f, g), then F minimises CE(f) + lambda * HSIC_1(f, g), each with
        the other network's pooled features held fixed. sigma_f / sigma_g: RBF radii (null = median
        of the pairwise distances, the paper's choice on ImageNet; 1 on Biased MNIST). With several
    processes (`training.gpus`) each process estimates HSIC on its own share of the batch (B / gpus
    rows) and the gradients are averaged: not the one-device estimate on B rows."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        rows = train_cfg["batch_size"] // TrainingSettings.of(train_cfg).gpus
        if self.args["estimator"] == "unbiased" and rows < 4:
            raise ValueError(
                f"the unbiased HSIC estimator divides by m(m-3) over each process's {rows} rows "
                "(training.batch_size / training.gpus): give every process at least 4"
            )
        self.optimizer = self.make_optimizer(self.network.parameters())
        self.optimizer_g = self.biased_optimizer()

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer, self.optimizer_g]

    def _hsic(self, zf: torch.Tensor, zg: torch.Tensor) -> torch.Tensor:
        return hsic(zf, zg, self.args["sigma_f"], self.args["sigma_g"], self.args["estimator"])

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        with torch.no_grad():
            zf_fixed, _ = self._forward(self.network, x)
        zg, logits_g = self._forward(self.biased, x)
        hsic_g = self._hsic(zf_fixed, zg)
        loss_g = F.cross_entropy(logits_g, y) - self.args["lambda_g"] * hsic_g
        self.step(self.optimizer_g, loss_g)

        with torch.no_grad():
            zg_fixed, _ = self._forward(self.biased, x)
        zf, logits_f = self._forward(self.network, x)
        hsic_f = self._hsic(zf, zg_fixed)
        ce = F.cross_entropy(logits_f, y)
        loss = ce + self.args["lambda"] * hsic_f
        self.step(self.optimizer, loss)
        return {
            "loss": loss.detach(),
            "ce": ce.detach(),
            "hsic": hsic_f.detach(),
            "loss_g": loss_g.detach(),
            "train_acc": (logits_f.argmax(1) == y).float().mean().detach(),
            "train_acc_g": (logits_g.argmax(1) == y).float().mean().detach(),
        }


class RUBi(_WithBiasedNetwork):
    """RUBi (Cadene et al. 2019): F's logits are masked by sigmoid(h(g logits)), with h a linear
    head on G's detached logits, and trained with CE(f * mask); G learns from CE(g). Unlike the
    ReBias authors' code, h is optimised."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.mask_head = nn.Linear(num_classes, num_classes)
        params: Any = self.parameters()  # F, G and the head in one optimiser
        if self.args["biased_lr"] is not None:  # G's parameters in a group of their own, at biased_lr
            g_params = list(self.biased.parameters())
            rest = [p for p in self.parameters() if all(p is not q for q in g_params)]
            params = [{"params": rest}, {"params": g_params, "lr": self.args["biased_lr"]}]
        self.optimizer = self.make_optimizer(params)

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        _, logits_f = self._forward(self.network, x)
        _, logits_g = self._forward(self.biased, x)
        masked = logits_f * torch.sigmoid(self.mask_head(logits_g.detach()))
        ce_masked, ce_g = F.cross_entropy(masked, y), F.cross_entropy(logits_g, y)
        loss = ce_masked + ce_g
        self.step(self.optimizer, loss)
        return {
            "loss": loss.detach(),
            "ce_masked": ce_masked.detach(),
            "ce_g": ce_g.detach(),
            "train_acc": (logits_f.argmax(1) == y).float().mean().detach(),
        }


class LearnedMixinH(_WithBiasedNetwork):
    """LearnedMixin+H (Clark et al. 2019) as the ReBias paper trains it (Appendix C): G is first
    trained alone with CE(g) for `g_pretrain_epochs` epochs (5 on Biased MNIST, 30 on ImageNet;
    fractions allowed, counted in steps) and then fixed. F is trained on the combined
    log-probabilities log p_f + softplus(w . z_f + b) * log p_g with CE, plus `entropy` (0.36)
    times the entropy of softmax(softplus(.) * log p_g). G's pre-training comes before F's
    epochs and outside their schedule, as the authors' `pretrain()` (clovaai/rebias
    trainer.py:248-266, 384): the trainer runs its `pre_steps` first (`x-before-run`), so F gets
    the run's every epoch and its whole schedule. Unlike the authors' code, the gate (w, b) is
    optimised."""

    updates: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.gate = nn.Linear(self.network.feature_dim, 1)
        self.optimizer_g = self.biased_optimizer()
        self.optimizer = self.make_optimizer([*self.network.parameters(), *self.gate.parameters()])
        self.register_buffer("updates", torch.zeros((), dtype=torch.long))  # checkpointed with the weights

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer, self.optimizer_g]

    def pretraining_g(self) -> bool:
        return self.host_count("updates") < self.pre_steps

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        pretraining = self.pretraining_g()
        self.count_step("updates")
        if pretraining:
            _, logits_g = self._forward(self.biased, x)
            ce_g = F.cross_entropy(logits_g, y)
            self.step(self.optimizer_g, ce_g)
            return {"ce_g": ce_g.detach(), "train_acc_g": (logits_g.argmax(1) == y).float().mean().detach()}
        self.biased.eval()  # fixed G: its batch-norm statistics stay as pre-trained
        with torch.no_grad():
            _, logits_g = self._forward(self.biased, x)
        zf, logits_f = self._forward(self.network, x)
        scaled_bias = F.softplus(self.gate(zf)) * F.log_softmax(logits_g, 1)  # (B, C)
        ce_mix = F.cross_entropy(F.log_softmax(logits_f, 1) + scaled_bias, y)
        p = F.softmax(scaled_bias, 1)
        entropy = -(p * torch.log(p.clamp_min(1e-12))).sum(1).mean()
        loss = ce_mix + self.args["entropy"] * entropy
        self.step(self.optimizer, loss)
        return {
            "loss": loss.detach(),
            "ce_mix": ce_mix.detach(),
            "entropy": entropy.detach(),
            "train_acc": (logits_f.argmax(1) == y).float().mean().detach(),
        }
