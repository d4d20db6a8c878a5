"""The linear probe of the self-supervised methods (Ge et al. 2021, Table 1's linear evaluation of
the frozen backbone, the authors' main_lincls.py): after pre-training, `fit_linear_probe` fits
the network's classifier (`network.head`) on the frozen backbone's features of every training
image with the authors' protocol: SGD lr 10, batch 128, momentum 0.9, 60 epochs, lr x 0.1 at
epochs 30, 40, 50, the last epoch's head. By default the features are computed once, without
augmentation (the paper's probe augments each epoch; on cached features 60 epochs take seconds);
with `probe_augment`, every epoch takes fresh RandomResizedCrop + flip views through the backbone,
as main_lincls.py. The probe is `network.head`, so every evaluation of the workbench scores the
model as it scores any other.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F

from debias_workbench.core.seeding import name_seed

from ..augment import Augmenter
from ..distributed import is_main

if TYPE_CHECKING:
    from .ssl import SelfSupervised

#: the linear probe's training crop with `probe_augment` (torchvision RandomResizedCrop's default scale, main_lincls.py)
PROBE_CROP = (0.08, 1.0)


def fit_linear_probe(method: SelfSupervised, batches) -> dict[str, float]:
    """Fit `method.network.head` on the frozen backbone (eval mode), on cached unaugmented features
    or, with `probe_augment`, on fresh views each epoch; returns `probe_stats` of the fitted head on
    the unaugmented training images."""
    device = next(method.parameters()).device
    method.eval()
    feats, labels = [], []
    with torch.no_grad():
        for batch in batches.in_order():  # every training row once, the last partial batch too
            feats.append(method.features(method.unaugmented(batch, device)))
            labels.append(batch["labels"].to(device))
    x, y = torch.cat(feats), torch.cat(labels)
    head = method.network.head
    nn.init.normal_(head.weight, std=0.01)
    nn.init.zeros_(head.bias)
    opt = torch.optim.SGD(head.parameters(), lr=method.args["probe_lr"], momentum=0.9, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, method.args["probe_milestones"], 0.1)
    g = torch.Generator().manual_seed(name_seed("probe", type(method).__name__, method.args["probe_epochs"]))
    if method.args["probe_augment"]:
        _probe_on_views(method, batches.renamed(f"{batches.name}/probe"), opt, sched, g)
    else:
        _probe_on_features(method, x, y, opt, sched, g)
    return probe_stats(head, x, y, method.args["probe_lr"])


def _probe_on_features(
    method: SelfSupervised, x: torch.Tensor, y: torch.Tensor, opt: torch.optim.Optimizer, sched, g: torch.Generator
) -> None:
    """`probe_epochs` epochs of the probe on the cached features x (N, d) and labels y, in batches
    of `probe_batch_size` drawn in a fresh order (g) each epoch (the demo's probe)."""
    bs, head = method.args["probe_batch_size"], method.network.head
    for _ in range(method.args["probe_epochs"]):
        order = torch.randperm(len(y), generator=g).to(y.device)
        for start in range(0, len(y), bs):
            rows = order[start : start + bs]
            loss = F.cross_entropy(head(x[rows]), y[rows])
            method.step(opt, loss, across_processes=False)  # every process has every row's features
        sched.step()


def _probe_on_views(method: SelfSupervised, batches, opt: torch.optim.Optimizer, sched, g: torch.Generator) -> None:
    """`probe_epochs` epochs of the probe on fresh crop-and-flip views of the training batches (each
    process its share of every global batch; the gradients averaged across processes)."""
    device = next(method.parameters()).device
    norm = method.cfg["normalize"]
    crop = Augmenter(norm["mean"], norm["std"], PROBE_CROP, hflip=True)
    size = method.photos.view_size if method.photos else None  # a photo's crops resampled to the test side
    for epoch in range(method.args["probe_epochs"]):
        for batch in batches.epoch(epoch):
            with torch.no_grad():
                z = method.features(crop(batch["images"].to(device), g, batch.get("aspects"), size))
            loss = F.cross_entropy(method.network.head(z), batch["labels"].to(device))
            method.step(opt, loss)
        sched.step()


def probe_stats(head: nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float) -> dict[str, float]:
    """The fitted probe's training loss and accuracy on the unaugmented features x, and the loss of
    predicting the training class shares (`probe_prior_loss`, the entropy of the labels: the best a
    constant does). A diverged probe (lr `lr`) is an error; one no better than the class shares is
    named in the log (the report names it too: `papers.ssl_negatives.tables`)."""
    with torch.no_grad():
        logits = head(x)
        shares = torch.bincount(y, minlength=logits.shape[1]).float() / len(y)
        stats = {
            "probe_loss": float(F.cross_entropy(logits, y)),
            "probe_train_accuracy": float((logits.argmax(1) == y).float().mean() * 100),
            "probe_prior_loss": float(-(shares[y]).log().mean()),
        }
    if not math.isfinite(stats["probe_loss"]):
        raise FloatingPointError(f"the linear probe diverged (lr {lr}): lower probe_lr")
    if stats["probe_loss"] >= stats["probe_prior_loss"] and is_main():
        # SGD's lr of the paper (10) is for ResNet-50 features on ImageNet-100: on other features it can
        # overshoot; collapsed features leave no probe better than the class shares at any lr
        print(
            f"warning: the linear probe fits its training rows no better than the class shares (loss "
            f"{stats['probe_loss']:.3g} >= {stats['probe_prior_loss']:.3g}): either probe_lr (now "
            f"{lr:g}) is too high for these features, or they hold no class information "
            "(collapse); its accuracies do not measure the features",
            flush=True,
        )
    return stats
