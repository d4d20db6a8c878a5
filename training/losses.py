"""Loss functions of the methods, each written from its paper's equation."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(anchor: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor, tau: float,
             negative_mask: torch.Tensor | None = None) -> torch.Tensor:
    """InfoNCE with a dictionary of negatives, CLAD Eq. (1), averaged over anchors:

        L_con = -log[ e^{s(x,x+)/tau} / ( e^{s(x,x+)/tau} + sum_i e^{s(x,x_i^-)/tau} ) ],
        s(a, b) = a.b / (|a| |b|)   (cosine similarity, no projection head).

    anchor, positive: (B, D) features; negatives: (B, N, D), the N negatives of each anchor
    (for CLAD the queue of the anchor's background class). `negative_mask` (B, N) marks the
    negatives that exist (False = an empty dictionary slot, left out of the sum); an anchor
    without any negative has loss -log 1 = 0.
    """
    a = F.normalize(anchor.float(), dim=1)                                 # (B, D)
    pos = (a * F.normalize(positive.float(), dim=1)).sum(1, keepdim=True)  # (B, 1)
    neg = torch.einsum("bd,bnd->bn", a, F.normalize(negatives.float(), dim=2))  # (B, N)
    if negative_mask is not None:
        neg = neg.masked_fill(~negative_mask, float("-inf"))
    logits = torch.cat([pos, neg], dim=1) / tau                            # (B, 1 + N)
    # the positive is class 0 of an (N+1)-way classification
    return F.cross_entropy(logits, torch.zeros(len(a), dtype=torch.long, device=a.device))
