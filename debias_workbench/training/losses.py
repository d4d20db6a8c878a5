"""Loss functions of the methods, each written from its paper's equation."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def info_nce(
    anchor: torch.Tensor,
    positive: torch.Tensor,
    negatives: torch.Tensor,
    tau: float,
    negative_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """InfoNCE with a dictionary of negatives, CLAD Eq. (1), averaged over anchors:

        L_con = -log[ e^{s(x,x+)/tau} / ( e^{s(x,x+)/tau} + sum_i e^{s(x,x_i^-)/tau} ) ],
        s(a, b) = a.b / (|a| |b|)   (cosine similarity, no projection head).

    anchor, positive: (B, D) features; negatives: (B, N, D), the N negatives of each anchor
    (for CLAD the queue of the anchor's background class). `negative_mask` (B, N) marks the
    negatives that exist (False = an empty dictionary slot, left out of the sum); an anchor
    without any negative has loss -log 1 = 0.
    """
    a = F.normalize(anchor.float(), dim=1)  # (B, D)
    pos = (a * F.normalize(positive.float(), dim=1)).sum(1, keepdim=True)  # (B, 1)
    neg = torch.einsum("bd,bnd->bn", a, F.normalize(negatives.float(), dim=2))  # (B, N)
    if negative_mask is not None:
        neg = neg.masked_fill(~negative_mask, float("-inf"))
    logits = torch.cat([pos, neg], dim=1) / tau  # (B, 1 + N)
    # the positive is class 0 of an (N+1)-way classification
    return F.cross_entropy(logits, torch.zeros(len(a), dtype=torch.long, device=a.device))


def rbf_kernel(x: torch.Tensor, sigma: float | None) -> torch.Tensor:
    """(m, m) RBF kernel exp(-|x_i - x_j|^2 / (2 sigma^2)) of x (m, ...); sigma None = the median
    pairwise distance of x (ReBias's choice on ImageNet, computed per representation)."""
    x = x.flatten(1).float()
    sq = (x * x).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2 * x @ x.T).clamp_min(0.0)  # (m, m)
    width: float | torch.Tensor
    if sigma is None:
        m = len(x)  # the off-diagonal entries in row order, without a boolean mask (its indexing waits for a GPU)
        off_diagonal = d2.detach().flatten()[1:].view(m - 1, m + 1)[:, :-1]
        width = off_diagonal.sqrt().median().clamp_min(1e-6)
    else:
        width = sigma
    return torch.exp(-d2 / (2 * width**2))


def hsic(
    x: torch.Tensor,
    y: torch.Tensor,
    sigma_x: float | None = 1.0,
    sigma_y: float | None = 1.0,
    estimator: str = "unbiased",
) -> torch.Tensor:
    """HSIC between the rows of x and y (m samples each) with RBF kernels K, L.

    unbiased (Song et al. 2012; ReBias Eq. A3), with K~, L~ the kernels with zero diagonal:
        HSIC_1 = 1/(m(m-3)) [ tr(K~ L~) + (1'K~1)(1'L~1)/((m-1)(m-2)) - 2/(m-2) 1'K~L~1 ]
    biased (ReBias Sec. 3.2): HSIC_0 = (m-1)^-2 tr(K H L H), H = I - 11'/m.

    The diagonal is zeroed exactly (the authors' code subtracts a broadcast row, which equals
    this only for kernels with a constant diagonal). sigma None = median heuristic.
    """
    m = len(x)
    k, l = rbf_kernel(x, sigma_x), rbf_kernel(y, sigma_y)  # noqa: E741  (the paper's K and L)  (m, m) each
    if estimator == "biased":
        h = torch.eye(m, device=k.device) - 1.0 / m
        return torch.trace(k @ h @ l @ h) / (m - 1) ** 2
    if estimator != "unbiased":
        raise ValueError(f"estimator must be 'unbiased' or 'biased', not {estimator!r}")
    if m < 4:
        raise ValueError(f"the unbiased HSIC estimator needs at least 4 samples, got {m}")
    kt = k - torch.diag_embed(torch.diagonal(k))
    lt = l - torch.diag_embed(torch.diagonal(l))
    # K~, L~ are symmetric: tr(K~ L~) = sum(K~ * L~) and 1'K~L~1 = (K~1).(L~1), O(m^2) instead of a matmul
    trace_kl = (kt * lt).sum()
    ones_kl_ones = kt.sum(0) @ lt.sum(1)
    return (trace_kl + kt.sum() * lt.sum() / ((m - 1) * (m - 2)) - 2.0 / (m - 2) * ones_kl_ones) / (m * (m - 3))


def moco_nce(
    q: torch.Tensor,
    k: torch.Tensor,
    queue: torch.Tensor,
    tau: float,
    ns: torch.Tensor | None = None,
    alpha: float = 1.0,
) -> torch.Tensor:
    """MoCo's InfoNCE with a non-semantic negative, Ge et al. Eq. (1), averaged over queries:

        L = -log[ e^{q.k/T} / ( e^{q.k/T} + e^{alpha q.z_ns/T} + sum_n e^{q.z_n/T} ) ]

    q, k: (B, D) query and key embeddings; queue: (K, D) standard negatives; ns: (B, D) each
    query's non-semantic negative (None: plain MoCo-v2). Every embedding is L2-normalised here.
    """
    q, k, queue = F.normalize(q.float(), dim=1), F.normalize(k.float(), dim=1), F.normalize(queue.float(), dim=1)
    parts = [(q * k).sum(1, keepdim=True), q @ queue.T]  # (B, 1), (B, K)
    if ns is not None:
        parts.append(alpha * (q * F.normalize(ns.float(), dim=1)).sum(1, keepdim=True))  # (B, 1)
    logits = torch.cat(parts, dim=1) / tau
    return F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long, device=q.device))


def byol_loss(p: torch.Tensor, z: torch.Tensor, ns: torch.Tensor | None = None, alpha: float = 0.0) -> torch.Tensor:
    """BYOL's loss with a non-semantic negative, Ge et al. Eq. (2), averaged over the batch:

        L = |p - z|^2 - alpha |p - z_ns|^2 = 2 - 2 alpha - 2 p.z + 2 alpha p.z_ns

    on L2-normalised vectors: p (B, D) the online prediction, z the target projection of the
    other view, ns the target projection of the non-semantic negative. The paper writes the
    norms unsquared but expands them as squared ones (its right-hand side); we follow the
    expansion, which is BYOL's own normalised squared error when alpha = 0.
    """
    p, z = F.normalize(p.float(), dim=1), F.normalize(z.float(), dim=1)
    loss = 2 - 2 * (p * z).sum(1)
    if ns is not None:
        loss = loss - alpha * (2 - 2 * (p * F.normalize(ns.float(), dim=1)).sum(1))
    return loss.mean()
