"""A toy method needing the toy prerequisite: ERM with a logit-adjusted loss (Menon et al., ICLR 2021,
Eq. 10: cross-entropy of f(x) + log pi_y, pi the training labels' class prior), its prior read from the
`class_counts` file its job built."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from debias_workbench.training.methods.erm import ERM

from .kind import CLASS_COUNTS


class LogitAdjusted(ERM):
    def setup(self, batches) -> dict[str, float]:
        super().setup(batches)
        counts = torch.load(self.prerequisite_files[CLASS_COUNTS.name], weights_only=True)["counts"]
        self.log_prior = torch.log(counts.float().clamp_min(1) / counts.sum())
        return {"classes_counted": float((counts > 0).sum())}

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y = self.augment(batch["images"]), batch["labels"]
        logits = self.network(x)
        loss = F.cross_entropy(logits.float() + self.log_prior.to(logits.device)[: logits.shape[1]], y)
        self.step(self.optimizer, loss)
        return {"loss": loss.detach()}
