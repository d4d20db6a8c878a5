"""Empirical risk minimisation: the Base (IN9) / Base (MR) baselines of the CLAD paper, and
ReBias's Vanilla (F alone) and Biased (G alone) rows."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import Method


class ERM(Method):
    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.optimizer = self.make_optimizer(self.network.parameters())

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        with self.autocast():
            logits = self.network(x)
            loss = F.cross_entropy(logits.float(), y)
        self.step(self.optimizer, loss)
        return {"loss": loss.detach(), "train_acc": (logits.argmax(1) == y).float().mean().detach()}


class Biased(ERM):
    """ReBias's "Biased" row: the biased-by-design G (`biased_arch`: the 1x1 SimpleConvNet on
    Biased MNIST, BagNet18 on images) trained alone with cross-entropy."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        args = {**self.default_args, **method_args}
        super().__init__(num_classes, {**train_cfg, "arch": args["biased_arch"], "pretrained": None}, method_args)
