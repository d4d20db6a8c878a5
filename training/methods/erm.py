"""Empirical risk minimisation: the Base (IN9) / Base (MR) baselines of the CLAD paper."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .base import Method


class ERM(Method):
    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.optimizer = self.make_optimizer(self.network.parameters())

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        with self.autocast():
            logits = self.network(x)
            loss = F.cross_entropy(logits.float(), y)
        self.step(self.optimizer, loss)
        return {"loss": loss.item(), "train_acc": (logits.argmax(1) == y).float().mean().item()}
