"""Learning curves and the points model selection chooses from, taken during training: every few
steps the accuracy (and group metrics) on the val split of some test stores and the mean of each
training statistic since the last point, rows the trainer (`trainer.train`) adds to the run's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import ZarrBatches
from .evaluation import group_metrics, predict_store, scored_accuracy, scoring_batches
from .methods.base import Method


@dataclass
class Monitor:
    """Learning curves (ReBias Fig. 4): every `every_steps` training steps, the accuracy on the
    val split of each of `stores` (with `groups`, also its `group_metrics`: the points model
    selection chooses from) and the mean of each training statistic since the last point."""

    stores: dict[str, Path]
    every_steps: int
    batch_size: int = 256
    groups: bool = False
    _batches: dict[str, ZarrBatches] = field(default_factory=dict, repr=False)  # each store's val split, read once

    def rows(self, method: Method, interval: dict[str, list], tags: dict[str, Any]) -> list[dict]:
        stats = [{"metric": k, "value": float(sum(v) / len(v))} for k, v in interval.items()]
        return [{"kind": "curve", **tags, **row} for row in stats + self.accuracies(method, tags)]

    def accuracies(self, method: Method, tags: dict[str, Any]) -> list[dict[str, Any]]:
        """[{"metric": f"{name}_accuracy", "value", "n", "se"}]: accuracy (%) on the val split of each
        store, its number of images and test-image standard error (and f"{name}_<group metric>"
        where defined), in eval mode."""
        device = next(method.parameters()).device
        method.eval()
        out = []
        for name, store in self.stores.items():
            if name not in self._batches:
                self._batches[name] = scoring_batches(store, "val", self.batch_size, device)
            result = predict_store(
                lambda x: method.predict(x).argmax(1),
                store,
                "val",
                self.batch_size,
                method.augmenter,
                device,
                batches=self._batches[name],
            )
            out.append({"metric": f"{name}_accuracy", **scored_accuracy(result)})
            if self.groups:
                out += [
                    {"metric": f"{name}_{k}", **v}
                    for k, v in group_metrics(result, tags, name).items()
                    if math.isfinite(v["value"])
                ]
        method.train()
        return out
