"""A toy method with no prerequisite: ERM with label-smoothing regularisation (Szegedy et al., CVPR 2016, Sec. 7:
the target q'(k) = (1 - epsilon) delta_{k,y} + epsilon / K in the cross-entropy)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from debias_workbench.training.methods.erm import ERM


class LabelSmoothing(ERM):
    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        logits = self.network(x)
        loss = F.cross_entropy(logits.float(), y, label_smoothing=float(self.args["smoothing"]))
        self.step(self.optimizer, loss)
        return {"loss": loss.detach(), "smoothing": float(self.args["smoothing"])}
