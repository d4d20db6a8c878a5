"""CLAD and CLAD+ (Wang et al., BMVC 2022): supervised training plus a contrastive term whose
positives change the anchor's background and whose negatives share it.

Per batch (paper Sec. 3.4, Fig. 4):
1. Positive x+ of anchor i: its foreground (GrabCut mask) pasted on the ONLY_BG_T background of
   a sample j of another class, x+ = bg_j * (1 - m_i) + x_i * m_i; j is drawn uniformly from the
   batch's samples whose label differs from the anchor's (batches are random draws of the
   training set, so this is a random other-class background). The positive's background label is y_j.
2. The standard augmentation is applied after compositing, independently for anchor and
   positive by default (`positive_view: independent`): the supplementary's Sec. III credits
   CLAD's robustness to positional shift to "randomly augmented positive pairs", and the
   authors' code does the same. `positive_view: aligned` gives the positive the anchor's crop
   and flip, so only the background differs. Anchors and positives go through the encoder in
   two forward passes, as in the authors' code (main_clad_bg.py:118, 128), so that batch norm
   normalises each by its own batch: one batch of 2B would mix the positives' statistics into
   the anchors' features (and the running statistics).
3. The positives' detached features are pushed into the negative dictionary, one FIFO queue of
   `queue_size` entries per background class, keyed by the positive's background label.
4. Loss (Eqs. 2, 3): CE(x) [+ CE(x+) for CLAD+] + lambda * InfoNCE(x, x+, queue[y]).

Negatives in queue[y] always show a foreground of a class other than y on a background of
class y, so they share the anchor's background but not its object. The dictionary starts empty:
unfilled slots are masked out of the InfoNCE sum (see `info_nce`), so early steps contrast
against fewer negatives instead of against made-up vectors. The "trivial" ablation
(supplementary Table 4) keeps a single queue of recent positives, random backgrounds shared by
all anchors; an anchor's own positive is never one of its negatives.

With several processes (`training.gpus`) every process pushes the positives of the whole global
batch, in rank order, so the dictionaries stay equal; a positive's background comes from the
process's own share of the batch (still a random other-class training image).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..distributed import gather_rows
from ..losses import info_nce
from .base import Method, masked_mean


class NegativeDictionary(nn.Module):
    """One FIFO queue of `size` detached feature vectors per key (the background label).

    Buffers (saved with the model, so a resumed run continues with the same dictionary):
    feats (K, N, D); rows (K, N), the training-set row that produced each entry (-1 = empty);
    ptr (K,), the next slot to overwrite in each queue.
    """

    feats: torch.Tensor  # a buffer (register_buffer)
    rows: torch.Tensor  # a buffer (register_buffer)
    ptr: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, keys: int, size: int, dim: int):
        super().__init__()
        self.register_buffer("feats", torch.zeros(keys, size, dim))
        self.register_buffer("rows", torch.full((keys, size), -1, dtype=torch.long))
        self.register_buffer("ptr", torch.zeros(keys, dtype=torch.long))

    @torch.no_grad()
    def push(
        self, feats: torch.Tensor, keys: torch.Tensor, rows: torch.Tensor, valid: torch.Tensor | None = None
    ) -> None:
        """Enqueue feats (M, D) under `keys` (M,) in batch order, those `valid` (M,) marks (all by
        default); the oldest entries leave first (more than `size` new entries under one key: the
        last `size` stay). Every slot of every key at once, on the device, without reading anything
        back to the host (a boolean mask's indexing would): slot s of key k takes the new entry of
        rank (s - ptr[k]) mod size among those kept, if there is one."""
        n_keys, size = self.feats.shape[:2]
        m = len(keys)
        if m == 0:
            return
        valid = torch.ones_like(keys, dtype=torch.bool) if valid is None else valid
        same = F.one_hot(keys, n_keys) * valid[:, None]  # (M, K)
        rank = (same.cumsum(0) * same).sum(1) - 1  # (M,) place among its key's entries
        count = same.sum(0)  # (K,) new entries per key
        # entry_of[k * M + r]: the batch position of key k's r-th new entry (the invalid ones to slots of their own)
        where = torch.where(valid, keys * m + rank, n_keys * m + torch.arange(m, device=keys.device))
        entry_of = torch.zeros(n_keys * m + m, dtype=torch.long, device=keys.device).scatter_(
            0, where, torch.arange(m, device=keys.device)
        )
        j = (torch.arange(size, device=keys.device)[None, :] - self.ptr[:, None]) % size  # (K, N) rank among the kept
        taken = j < count.clamp_max(size)[:, None]  # (K, N) slots that get a new entry
        r = j + (count - size).clamp_min(0)[:, None]  # its rank among all the key's new entries
        source = entry_of[(torch.arange(n_keys, device=keys.device)[:, None] * m + r).clamp_max(n_keys * m - 1)]
        self.feats.copy_(torch.where(taken[..., None], feats[source].to(self.feats.dtype), self.feats))
        self.rows.copy_(torch.where(taken, rows[source], self.rows))
        self.ptr.copy_((self.ptr + count.clamp_max(size)) % size)

    def negatives(self, keys: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, N, D) queue of each anchor's key and the (B, N) mask of usable entries: filled,
        and not produced from the anchor's own row."""
        slot_rows = self.rows[keys]  # (B, N)
        return self.feats[keys], (slot_rows >= 0) & (slot_rows != rows[:, None])


def choose_partners(labels: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """For each sample, a uniformly random batch position holding a *different* label.

    Returns (partner (B,), found (B,) bool); `found` is False only when the batch holds no
    other class, and then `partner` must not be used.
    """
    # drawn on the CPU (its generator), sent without waiting
    scores = torch.rand(len(labels), len(labels), generator=generator).to(labels.device, non_blocking=True)
    best, partner = scores.masked_fill(labels[:, None] == labels[None, :], -1.0).max(1)
    return partner, best >= 0


class CLAD(Method):
    """CLAD, Eq. (2). `method_args`: lambda (1.0), tau (0.2), queue_size (32), positive_view."""

    extra_fields: tuple[str, ...] = ("masks",)
    positive_ce = False  # CLAD+ adds CE on the positives (Eq. 3)
    keyed_negatives = True  # False: the "trivial" shared queue of the ablation

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        if self.args["positive_view"] not in ("aligned", "independent"):
            raise ValueError(f"positive_view must be 'aligned' or 'independent', not {self.args['positive_view']!r}")
        self.dictionary = NegativeDictionary(
            num_classes if self.keyed_negatives else 1, int(self.args["queue_size"]), self.network.feature_dim
        )
        self.optimizer = self.make_optimizer(self.network.parameters())

    def make_positives(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(positives (B, H, W, 3) uint8, their background labels (B,), found (B,) bool):
        x+ = bg_j * (1 - m) + x * m with j a random batch sample of another class."""
        partner, found = choose_partners(batch["labels"], self.generator)
        fg = batch["masks"].bool().unsqueeze(-1)  # (B, H, W, 1)
        return torch.where(fg, batch["images"], batch["backgrounds"][partner]), batch["labels"][partner], found

    def augmented_pair(self, images: torch.Tensor, positives: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The anchors' and the positives' augmented views, (B, 3, H, W) each: the positive's crop
        and flip drawn anew (`independent`) or the anchor's (`aligned`)."""
        b, aug = len(images), self.augmenter
        views, shifts = aug.sample(b, self.generator), aug.sample_shift(b, self.generator)
        if self.args["positive_view"] == "independent":
            views = torch.cat([views, aug.sample(b, self.generator)])
            shifts = torch.cat([shifts, aug.sample_shift(b, self.generator)])
        else:
            views, shifts = views.repeat(2, 1, 1), shifts.repeat(2, 1)
        x = aug.apply(aug.normalize(aug.shift(torch.cat([images, positives]), shifts)), views)  # (2B, 3, H, W)
        return x[:b], x[b:]

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        images, y, rows = batch["images"], batch["labels"], batch["index"]  # images (B, H, W, 3) uint8
        positives, bg_labels, found = self.make_positives(batch)
        x_a, x_p = self.augmented_pair(images, positives)
        with self.autocast():
            # two forward passes, anchors first, as the authors' (main_clad_bg.py:118, 128): each its own
            # batch-norm batch of B, and the running statistics updated by the anchors', then the positives'
            z_a, z_p = self.network.features(x_a), self.network.features(x_p)  # (B, D) each
            logits_a, logits_p = self.network.head(z_a).float(), self.network.head(z_p).float()
        z_a, z_p = z_a.float(), z_p.float()
        keys = bg_labels if self.keyed_negatives else torch.zeros_like(bg_labels)
        # paper order: the batch's positives enter the dictionary, then negatives are drawn; with several
        # processes, every process's positives in rank order (the global batch's), so the dictionaries stay equal
        self.dictionary.push(gather_rows(z_p.detach()), gather_rows(keys), gather_rows(rows), valid=gather_rows(found))
        negatives, usable = self.dictionary.negatives(y if self.keyed_negatives else torch.zeros_like(y), rows)
        ce = F.cross_entropy(logits_a, y)
        con = (
            info_nce(z_a[found], z_p[found], negatives[found], self.args["tau"], usable[found])
            if found.any()
            else z_a.sum() * 0.0
        )
        loss = ce + self.args["lambda"] * con
        stats = {}
        if self.positive_ce and found.any():
            ce_pos = F.cross_entropy(logits_p[found], y[found])
            loss = loss + ce_pos
            stats["ce_positive"] = ce_pos.detach()
        self.step(self.optimizer, loss)
        return {
            "loss": loss.detach(),
            "ce": ce.detach(),
            "contrastive": con.detach(),
            **stats,
            "train_acc": (logits_a.argmax(1) == y).float().mean().detach(),
            "positive_acc": masked_mean((logits_p.argmax(1) == y).float(), found),
            "negatives_per_anchor": masked_mean(usable.sum(1).float(), found),
        }


class CLADPlus(CLAD):
    """CLAD+, Eq. (3): also classifies the positives."""

    positive_ce = True


class CLADTrivial(CLAD):
    """CLAD (Trivial): negatives from one shared queue of random-background positives."""

    keyed_negatives = False


class CLADPlusTrivial(CLADPlus):
    """CLAD+ (Trivial)."""

    keyed_negatives = False


class SCLAD(CLAD):
    """S-CLAD (CLAD supplementary Sec. IV, Fig. 9): the same loss with texture in place of
    background. The positive keeps the anchor's shape under another class's texture: its AdaIN
    copy in Stylized IN-9 (read row-aligned as `stylized`). The dictionary is keyed by the
    positive's style class, so an anchor of class y contrasts with stylized images that carry a
    texture of class y on the shape of another class: negatives share the texture, not the shape.

    On the train split the style's class is drawn from all classes (`pipeline.styles`: a texture
    there must say nothing about the label), so about 1/C of the stylized copies carry the
    anchor's own class's texture; those are no texture-changing positive and are masked out
    (`found` False: no contrastive term, no CE(x+) for S-CLAD+, never enqueued), as are images
    with no stylized copy."""

    extra_fields = ()

    def make_positives(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        styles = batch["stylized_bias_labels"]
        return batch["stylized"], styles, (styles >= 0) & (styles != batch["labels"])


class SCLADPlus(SCLAD):
    """S-CLAD+: also classifies the stylized positives (Eq. 3)."""

    positive_ce = True
