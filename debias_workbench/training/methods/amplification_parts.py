"""The pieces of LfF (Nam et al., NeurIPS 2020), BiasEnsemble (Lee et al., AAAI 2023) and the
intrinsic-feature enhancement of Park, Chung & Choo (CVPR 2024), as functions on tensors.

Notation: logits (B, C), labels y (B,), per-sample state indexed by the training row `index`
(B,). Feature maps z (B, c, h, w) are the debiased model's last convolutional features, f_cls
= global average pooling + the linear head (weight (C, c)).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class PerSampleState(nn.Module):
    """Buffers with one entry per training row. Made empty with the method and sized by its
    `setup`; loading a state dict takes the saved sizes, so a checkpoint or a trained model
    loads into a freshly built method."""

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        for name, buffer in self.named_buffers(recurse=False):
            if prefix + name in state_dict:
                self.register_buffer(name, torch.empty_like(state_dict[prefix + name], device=buffer.device))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


def gce_loss(logits: torch.Tensor, labels: torch.Tensor, q: float) -> torch.Tensor:
    """(B,) generalised cross-entropy (Zhang & Sabuncu 2018), LfF Eq. 2: (1 - p_y^q) / q. Its
    gradient is p_y^q times the CE gradient, so the biased model leans on the easy samples. (The
    LfF / BiasEnsemble code computes CE * p_y^q * q with the factor detached: the same direction,
    q times the size. Adam, which every shipped config uses for these methods without weight
    decay, takes the same steps either way; SGD or weight decay would not.)"""
    p_y = F.softmax(logits.float(), 1).gather(1, labels[:, None]).squeeze(1).clamp_min(1e-8)
    return (1.0 - p_y.pow(q)) / q


class LossEMA(PerSampleState):
    """LfF's per-sample exponential moving average of a loss, ema <- alpha * ema + (1 - alpha) *
    loss (the first observation of a sample is taken as is), and its class-wise max normalisation
    (each sample's EMA divided by the largest EMA of its class)."""

    labels: torch.Tensor  # a buffer (register_buffer)
    ema: torch.Tensor  # a buffer (register_buffer)
    seen: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, labels: torch.Tensor, num_classes: int, alpha: float):
        super().__init__()
        self.num_classes, self.alpha = num_classes, alpha
        self.register_buffer("labels", labels.long())
        self.register_buffer("ema", torch.zeros(len(labels), device=labels.device))
        self.register_buffer("seen", torch.zeros(len(labels), dtype=torch.bool, device=labels.device))

    def update(self, index: torch.Tensor, loss: torch.Tensor) -> None:
        old = torch.where(self.seen[index], self.ema[index], loss)
        self.ema[index] = self.alpha * old + (1 - self.alpha) * loss
        self.seen[index] = True

    def normalized(self, index: torch.Tensor) -> torch.Tensor:
        """(B,) the EMA of the rows `index` over the max EMA of each row's class."""
        class_max = torch.zeros(self.num_classes, device=self.ema.device).scatter_reduce(
            0, self.labels, self.ema, reduce="amax", include_self=True
        )
        return self.ema[index] / class_max[self.labels[index]].clamp_min(1e-8)


def lff_weight(loss_b: torch.Tensor, loss_d: torch.Tensor) -> torch.Tensor:
    """LfF Eq. 3, the relative difficulty W(x) = l_b / (l_b + l_d) of the (normalised) EMA
    losses of the biased and the debiased model: near 1 where the biased model fails."""
    return loss_b / (loss_b + loss_d + 1e-8)


def checkpoint_steps(steps: int, every: int, vote: str) -> list[int]:
    """The update counts after which a BiasEnsemble committee member of `steps` updates is scored
    as a candidate to vote. `best_valid`: the authors' `step % valid_freq == 0` over their 0-based
    steps 0 .. steps - 1 (learner.py:440, 465), i.e. after updates 1, 1 + every, 1 + 2 every, ...
    (1 and 501 of 1,000): the last iterate is a candidate only where every divides steps - 1.
    `last`: the last iterate alone (for a val split on which a biased member cannot be chosen)."""
    if vote == "last":
        return [steps]
    return list(range(1, steps + 1, every))


def bias_aligned(correct_prob: torch.Tensor, threshold: float) -> torch.Tensor:
    """BiasEnsemble's bias-aligned set D^A: (N,) True where a majority of the K committee members
    give the true class a probability above `threshold` (0.99). `correct_prob`: (K, N) p_y."""
    return (correct_prob > threshold).sum(0) > correct_prob.shape[0] // 2


def bn_candidates(wrong: torch.Tensor) -> torch.Tensor:
    """Park et al. Sec. 3.2, D^BN_cand: (N,) True where a majority of the K early-stopped committee
    members predict a class other than the label (JTT's error set). `wrong`: (K, N) booleans."""
    return wrong.sum(0) > wrong.shape[0] // 2


class BNScore(PerSampleState):
    """Park et al. Eqs. 1-3: per sample, the EMA l_t of the biased model's CE loss (Eq. 1, weight
    alpha_l on the new loss; a sample's first loss is taken as is), its reference l_ref = l(x)
    recorded when x is first drawn at or after iteration T1 (Algorithm 1, lines 4-5), and the
    BN score s_t = alpha_s (l_t - l_ref) + (1 - alpha_s) s_{t-1} (Eq. 2, 0 until l_ref exists);
    both are updated only for the samples of the mini-batch. D^BN_t = {x in D^BN_cand: s_t(x) > 0}
    (Eq. 3)."""

    loss: torch.Tensor  # a buffer (register_buffer)
    seen: torch.Tensor  # a buffer (register_buffer)
    ref: torch.Tensor  # a buffer (register_buffer)
    score: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, n: int, alpha_l: float, alpha_s: float, t1: int, device: torch.device | str = "cpu"):
        super().__init__()
        self.alpha_l, self.alpha_s, self.t1 = alpha_l, alpha_s, t1
        self.register_buffer("loss", torch.zeros(n, device=device))
        self.register_buffer("seen", torch.zeros(n, dtype=torch.bool, device=device))
        self.register_buffer("ref", torch.full((n,), float("nan"), device=device))
        self.register_buffer("score", torch.zeros(n, device=device))

    def update(self, index: torch.Tensor, ce: torch.Tensor, t: int) -> None:
        """Iteration `t` with the biased model's CE losses `ce` (B,) of the rows `index` (B,)."""
        ce = ce.detach().float()
        if t >= self.t1:  # l_ref <- l(x) before this iteration's update, for samples without one
            fresh = torch.isnan(self.ref[index]) & self.seen[index]
            self.ref[index[fresh]] = self.loss[index[fresh]]
        old = torch.where(self.seen[index], self.loss[index], ce)
        self.loss[index] = self.alpha_l * ce + (1 - self.alpha_l) * old
        self.seen[index] = True
        has_ref = ~torch.isnan(self.ref[index])
        rows = index[has_ref]
        self.score[rows] = self.alpha_s * (self.loss[rows] - self.ref[rows]) + (1 - self.alpha_s) * self.score[rows]

    def bias_negative(self, candidates: torch.Tensor) -> torch.Tensor:
        """(N,) membership of D^BN_t (Eq. 3)."""
        return candidates & (self.score > 0)


def class_activation_map(z: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B, h, w) Grad-CAM (Selvaraju et al. 2017) of the label for f_cls = GAP + linear: the
    gradient of logit y w.r.t. z_k is W[y, k] / (hw) at every position, so Grad-CAM is
    ReLU(sum_k W[y, k] z_k) up to the factor 1/(hw), which the max normalisation removes."""
    return F.relu(torch.einsum("bchw,bc->bhw", z, weight[labels]))


def ie_weight(z: torch.Tensor, z_bn: torch.Tensor, cam: torch.Tensor, cam_bn: torch.Tensor, tau: float) -> torch.Tensor:
    """Park et al. Eqs. 4-6, the IE weight (B, h, w) of z (B, c, h, w) given the bias-negative
    partner's z_bn (B, c, h', w') and both explanation maps E (B, h, w), E_bn (B, h', w'):
    c_n = z_bn_{i*} . z_n / max_{i,j} z_bn_i . z_j with i* = argmax_i z_bn_i . z_n (Eq. 4);
    r_n = (2 E_bn_{i*} / (E_bn_{i*} + E_n))^tau on max-normalised maps (Eq. 5);
    IE_n = max(c_n r_n, 1) (Eq. 6)."""
    zf, zb = z.flatten(2).transpose(1, 2), z_bn.flatten(2)  # (B, n, c), (B, c, m)
    sim = zf @ zb  # (B, n, m)
    best, i_star = sim.max(2)  # (B, n)
    common = best / sim.amax((1, 2))[:, None].clamp_min(1e-8)
    e = cam.flatten(1) / cam.flatten(1).amax(1, keepdim=True).clamp_min(1e-8)
    e_bn = cam_bn.flatten(1) / cam_bn.flatten(1).amax(1, keepdim=True).clamp_min(1e-8)
    e_bn_star = e_bn.gather(1, i_star)
    relative = (2 * e_bn_star / (e_bn_star + e).clamp_min(1e-8)).pow(tau)
    return (common * relative).clamp_min(1.0).view(z.shape[0], *z.shape[2:])


#: the readings of Eq. 9 (`IntrinsicFeatureEnhancement`'s `guide_sim`)
GUIDE_READINGS = ("target_shares", "target_raw", "through_both")


def guide_similarity(z: torch.Tensor, ie: torch.Tensor, reading: str) -> torch.Tensor:
    """(B,) the L1 distance of Eq. 9, ||GAP(z) - GAP(g(z))||_1 with g(z) = z ⊙ IE (Eq. 7), for z
    (B, c, h, w) and the IE weight (B, h, w). The paper's text says what the loss is for ("to guide
    the model to exploit the intrinsic features from x, we minimize the L1 distance between g(z)
    and z") but not where its gradient flows; three readings:

    - "target_raw": the literal loss with g(z) as the target z moves to (no gradient through g(z)).
      Each step asks GAP(z) to grow by GAP(z ⊙ (IE - 1)); the target grows with z, so nothing
      bounds the loss (in a pilot it ran away: 35 -> 154 over 15 epochs).
    - "target_shares": the same target with both sides L1-normalised over the channels (our
      addition, not the paper's: it bounds the loss by 2 and changes its scale, so λ_sim weighs
      it differently): a step raises the share of GAP(z) on the channels IE enhances instead of
      asking z to grow.
    - "through_both": the gradient flows through both sides, and through IE where the caller
      computed it with gradients. With z >= 0 and IE >= 1 the distance is GAP(z ⊙ (IE - 1)), so a
      descent step lowers exactly the features IE marks as under-used, and IE towards 1.

    Through GAP, the gradient on z is the same at every position of a channel in every reading."""
    gap, gap_g = z.mean((2, 3)), (z * ie[:, None]).mean((2, 3))
    if reading == "through_both":
        return (gap - gap_g).abs().sum(1)
    if reading == "target_raw":
        return (gap - gap_g.detach()).abs().sum(1)
    if reading != "target_shares":
        raise ValueError(f"guide_sim must be one of {GUIDE_READINGS}, not {reading!r}")
    share = lambda v: v / v.abs().sum(1, keepdim=True).clamp_min(1e-8)  # noqa: E731
    return (share(gap) - share(gap_g).detach()).abs().sum(1)


def draw_partners(
    members: torch.Tensor, labels: torch.Tensor, y: torch.Tensor, index: torch.Tensor, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Park et al.'s x^BN for each sample of a batch: a row of the set `members` (N,) with the
    sample's label (`labels` (N,) of every row), drawn uniformly among those rows other than the
    sample's own row `index` (B,), and (B,) whether one exists. y (B,) the batch's labels."""
    partner, has = torch.zeros_like(y), torch.zeros_like(y, dtype=torch.bool)
    for c in y.unique().tolist():
        pool = torch.nonzero(members & (labels == c)).squeeze(1)  # (m,) rows, ascending
        at = torch.nonzero(y == c).squeeze(1)  # batch positions of class c
        own = torch.searchsorted(pool, index[at])  # where the anchor's row is or would be
        inside = (
            (own < len(pool)) & (pool[own.clamp_max(max(len(pool) - 1, 0))] == index[at])
            if len(pool)
            else torch.zeros_like(own, dtype=torch.bool)
        )
        choices = len(pool) - inside.long()  # the pool without the anchor
        u = torch.rand(len(at), generator=generator, dtype=torch.float64).to(y.device, non_blocking=True)
        pick = (u * choices.clamp_min(1)).long()
        pick += (inside & (pick >= own)).long()  # step over the anchor's own row
        ok = choices > 0
        partner[at[ok]], has[at[ok]] = pool[pick[ok]], True
    return partner, has


class RowFlags(PerSampleState):
    """Boolean flags per training row, by name: e.g. BiasEnsemble's `aligned` (D^A) and
    `candidates` (D^BN_cand), and the true `conflicting` (bias label != label, used only for the
    logged detection statistics)."""

    # the flags the methods read (buffers registered by name in __init__)
    aligned: torch.Tensor
    candidates: torch.Tensor
    conflicting: torch.Tensor

    def __init__(self, **flags: torch.Tensor):
        super().__init__()
        for name, values in flags.items():
            self.register_buffer(name, values.bool())
