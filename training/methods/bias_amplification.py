"""Debiasing by amplifying the bias in an auxiliary model, without bias labels:

- `LfF` (Nam et al., NeurIPS 2020): a biased model f_b trained with GCE and a debiased model f_d
  whose CE is weighted by W(x) = l_b / (l_b + l_d) of class-normalised loss EMAs.
- `LfFBiasEnsemble` (Lee et al., AAAI 2023): first a committee of early-stopped GCE models picks
  the bias-aligned set D^A (a majority gives p_y > 0.99); f_b then trains with CE on D^A only.
- `IntrinsicFeatureEnhancement` (Park, Chung & Choo, CVPR 2024): LfF + BE with the BN score
  (Eqs. 1-3) choosing a bias-negative partner x^BN of the same class, the IE weight (Eqs. 4-7)
  and the losses of Eqs. 8-13.

The true bias labels are never used for training; they only feed the logged detection
statistics (how many of D^A are bias-aligned, of D^BN bias-conflicting), which the report turns
into the paper's Table 2 and Fig. 2.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from pipeline.seeding import name_seed

from ..bias_amplification import (BNScore, LossEMA, RowFlags, bias_aligned, bn_candidates, class_activation_map,
                                  gce_loss, ie_weight, lff_weight)
from .base import Method


class LfF(Method):
    """`method_args`: q (GCE), ema_alpha (LfF's loss EMA). f_b has f_d's architecture; both use
    the run's optimiser. Per-row state (loss EMAs, flags) is sized by `setup` and checkpointed."""

    #: per-row flags the method keeps (`setup` fills them)
    FLAGS: tuple[str, ...] = ("conflicting",)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.biased = self.build_biased_network(train_cfg["arch"])
        self.optimizer = self.make_optimizer(self.network.parameters())
        self.biased_optimizer = self.make_optimizer(self.biased.parameters())
        no_rows = torch.zeros(0, dtype=torch.long)
        self.ema_b = LossEMA(no_rows, num_classes, self.args["ema_alpha"])
        self.ema_d = LossEMA(no_rows, num_classes, self.args["ema_alpha"])
        self.flags = RowFlags(**{name: no_rows for name in self.FLAGS})

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer, self.biased_optimizer]

    def setup(self, batches) -> dict[str, float]:
        device = next(self.parameters()).device
        labels = torch.from_numpy(batches.column("labels")).to(device)
        self.ema_b = LossEMA(labels, self.num_classes, self.args["ema_alpha"])
        self.ema_d = LossEMA(labels, self.num_classes, self.args["ema_alpha"])
        self.flags = RowFlags(conflicting=torch.from_numpy(batches.column("bias_labels") != batches.column("labels")).to(device))
        return {}

    def biased_loss(self, logits_b: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """LfF: GCE on every sample (Eq. 2)."""
        return gce_loss(logits_b, y, self.args["q"]).mean()

    def reweight(self, logits_b: torch.Tensor, logits_d: torch.Tensor, y: torch.Tensor,
                 index: torch.Tensor) -> torch.Tensor:
        """(B,) W(x) of LfF Eq. 3 after this step's EMA update of both models' CE losses."""
        self.ema_b.update(index, F.cross_entropy(logits_b.detach().float(), y, reduction="none"))
        self.ema_d.update(index, F.cross_entropy(logits_d.detach().float(), y, reduction="none"))
        return lff_weight(self.ema_b.normalized(index), self.ema_d.normalized(index))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        x, y, index = self.augment(batch["images"]), batch["labels"], batch["index"]
        with self.autocast():
            logits_b, logits_d = self.biased(x).float(), self.network(x).float()
        w = self.reweight(logits_b, logits_d, y, index)
        loss_b = self.biased_loss(logits_b, y, index)
        loss_d = (w * F.cross_entropy(logits_d, y, reduction="none")).mean()
        self._step_both(loss_b + loss_d)
        conflicting = self.flags.conflicting[index]
        return {"loss": loss_d.item(), "biased_loss": loss_b.item(),
                "train_acc": (logits_d.argmax(1) == y).float().mean().item(),
                **_group_means("weight", w, conflicting)}

    def _step_both(self, loss: torch.Tensor) -> None:
        for opt in self.optimizers():
            opt.zero_grad(set_to_none=True)
        loss.backward()
        for opt in self.optimizers():
            opt.step()


class LfFBiasEnsemble(LfF):
    """`method_args` besides LfF's: committee_size, committee_steps (each member's GCE iterations:
    the committee is early-stopped by this fixed budget, counted in steps of the run's batch size),
    confidence (p_y above which a member calls a sample bias-aligned)."""

    FLAGS = ("conflicting", "aligned", "candidates")

    def setup(self, batches) -> dict[str, float]:
        super().setup(batches)
        device = next(self.parameters()).device
        correct_prob, wrong = self._committee(batches, device)
        conflicting = self.flags.conflicting
        self.flags = RowFlags(conflicting=conflicting, aligned=bias_aligned(correct_prob, self.args["confidence"]),
                              candidates=bn_candidates(wrong))
        return {**_detection("aligned_set", self.flags.aligned, ~conflicting),
                **_detection("candidate_set", self.flags.candidates, conflicting)}

    def _committee(self, batches, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(K, N) p_y and (K, N) "argmax != y" of K GCE models, each trained `committee_steps`
        steps from its own initialisation and shuffling, scored on every training row un-augmented."""
        n, k_members = batches.n, self.args["committee_size"]
        correct_prob = torch.zeros(k_members, n, device=device)
        wrong = torch.zeros(k_members, n, dtype=torch.bool, device=device)
        for k in range(k_members):
            member = self.build_biased_network(self.cfg["arch"]).to(device)
            opt = self.make_optimizer(member.parameters())
            member.train()
            steps, epoch = 0, 0
            while steps < self.args["committee_steps"]:
                # each member its own shuffling: the loader's epochs from a member-specific offset
                for batch in batches.epoch(1_000_000 * (k + 1) + epoch):
                    x = self.augment(batch["images"].to(device))
                    with self.autocast():
                        loss = gce_loss(member(x).float(), batch["labels"].to(device), self.args["q"]).mean()
                    self.step(opt, loss)
                    steps += 1
                    if steps >= self.args["committee_steps"]:
                        break
                epoch += 1
            member.eval()
            with torch.no_grad():
                for batch in batches.in_order():
                    index, y = batch["index"].to(device), batch["labels"].to(device)
                    with self.autocast():
                        logits = member(self.augmenter.normalize(batch["images"].to(device))).float()
                    correct_prob[k, index] = F.softmax(logits, 1).gather(1, y[:, None]).squeeze(1)
                    wrong[k, index] = logits.argmax(1) != y
        return correct_prob, wrong

    def biased_loss(self, logits_b: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """BE: CE on the batch's members of D^A; a batch without any gives no biased-model loss
        (the authors' code averages over an empty set there and gets NaN)."""
        member = self.flags.aligned[index]
        if not member.any():
            return logits_b.sum() * 0.0
        return F.cross_entropy(logits_b[member], y[member])


class IntrinsicFeatureEnhancement(LfFBiasEnsemble):
    """Park et al. (CVPR 2024) on LfF + BE. `method_args` besides BE's: t1 and t2 (iterations: the
    BN score's reference point and the start of the guidance), lambda_sim, alpha_l, alpha_s, tau.
    The gradient of L_guide.sim flows through the IE weight of x (its Grad-CAM and common-feature
    score), not through the partner's side (the reference): minimising |GAP(z) - GAP(z * IE)|
    drives IE towards 1, i.e. makes x exploit its intrinsic features as much as x^BN does. (Read
    with g(z) as a fixed target instead, each step asks z to grow by IE, and in a pilot the loss
    ran away: 35 -> 154 over 15 epochs, training accuracy 95 -> 37 %.) A sample whose class has
    no member in D^BN this step gets no partner: IE = 1 and zero weight on L_guide.sim and L_BN."""

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.bn_score = BNScore(0, self.args["alpha_l"], self.args["alpha_s"], self.args["t1"])
        self.register_buffer("iteration", torch.zeros((), dtype=torch.long))

    def setup(self, batches) -> dict[str, float]:
        stats = super().setup(batches)
        self.bn_score = BNScore(batches.n, self.args["alpha_l"], self.args["alpha_s"], self.args["t1"],
                                next(self.parameters()).device)
        self.train_rows = batches
        self.partner_seed = int(torch.randint(2**62, ()))  # drawn after the seeded init: the same on a resume
        return stats

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        x, y, index = self.augment(batch["images"]), batch["labels"], batch["index"]
        t = int(self.iteration)
        with self.autocast():
            logits_b = self.biased(x).float()
            z = self.network.feature_map(x)
            logits_d = self.network.head(z.mean((2, 3))).float()
        ce_b = F.cross_entropy(logits_b.detach(), y, reduction="none")
        self.bn_score.update(index, ce_b, t)
        w = self.reweight(logits_b, logits_d, y, index)
        loss_b = self.biased_loss(logits_b, y, index)
        loss_main = (w * F.cross_entropy(logits_d, y, reduction="none")).mean()
        stats: dict[str, float] = {}
        if t < self.args["t2"]:
            loss_d = loss_main
        else:
            loss_d, stats = self._guided(x, y, z, w, loss_main, t)
        self._step_both(loss_b + loss_d)
        self.iteration += 1
        in_candidates, conflicting = self.flags.candidates, self.flags.conflicting
        return {"loss": loss_d.item(), "biased_loss": loss_b.item(),
                "train_acc": (logits_d.argmax(1) == y).float().mean().item(), **stats,
                **_group_means("bn_score", self.bn_score.score[in_candidates], conflicting[in_candidates])}

    def _guided(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, w: torch.Tensor, loss_main: torch.Tensor,
                t: int) -> tuple[torch.Tensor, dict[str, float]]:
        """Eq. 13: lambda_main L_main + L_guide (Eq. 11) + L_BN (Eq. 12) with partners from D^BN_t."""
        partner, has = self._partners(y)
        x_bn = self.augment(self.train_rows.rows(partner.cpu().numpy())["images"].to(x.device))
        s_bn = torch.where(has, self.bn_score.score[partner].clamp_min(0.0), torch.zeros_like(w))
        head = self.network.head
        with self.autocast():
            z_bn = self.network.feature_map(x_bn)
            logits_bn = head(z_bn.mean((2, 3))).float()
        zf, weight = z.float(), head.weight.float()
        with torch.no_grad():  # the partner is the reference: no gradient through its side
            zbf = z_bn.detach().float()
            cam_bn = class_activation_map(zbf, weight, y)
        cam = class_activation_map(zf, weight, y)
        ie = torch.where(has[:, None, None], ie_weight(zf, zbf, cam, cam_bn, self.args["tau"]), torch.ones_like(cam))
        g = zf * ie[:, None]                                                                  # Eq. 7
        gap, gap_g = zf.mean((2, 3)), g.mean((2, 3))
        loss_sim = (s_bn * (gap - gap_g).abs().sum(1)).mean()                                # Eq. 9
        loss_cls = (w * F.cross_entropy(head(gap_g), y, reduction="none")).mean()             # Eq. 10
        loss_bn = (s_bn * F.cross_entropy(logits_bn, y, reduction="none")).mean()             # Eq. 12
        total_steps = max(self.cfg["epochs"] * self.steps_per_epoch - self.args["t2"], 1)
        lambda_main = min(1.0, (t - self.args["t2"]) / total_steps)
        loss = lambda_main * loss_main + self.args["lambda_sim"] * loss_sim + loss_cls + loss_bn  # Eqs. 11, 13
        return loss, {"loss_guide_sim": loss_sim.item(), "loss_guide_cls": loss_cls.item(), "loss_bn": loss_bn.item(),
                      "ie_mean": ie.mean().item(), "partner_fraction": has.float().mean().item(),
                      "lambda_main": lambda_main}

    def _partners(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) a row of D^BN_t of each sample's class, drawn uniformly, and whether one exists."""
        members = self.bn_score.bias_negative(self.flags.candidates)
        labels = self.ema_d.labels
        generator = torch.Generator().manual_seed(name_seed("bn-partner", self.partner_seed, int(self.iteration)))
        partner = torch.zeros_like(y)
        has = torch.zeros_like(y, dtype=torch.bool)
        for c in y.unique().tolist():
            pool = torch.nonzero(members & (labels == c)).squeeze(1)
            if len(pool):
                rows = y == c
                pick = torch.randint(len(pool), (int(rows.sum()),), generator=generator)
                partner[rows], has[rows] = pool[pick.to(pool.device)], True
        return partner, has

    def finish(self, batches) -> dict[str, float]:
        """The paper's Table 2 at the end of training: BA / BC samples dropped from D^BN_cand by
        the BN score, and the share of all BA / BC samples that D^BN keeps."""
        kept = self.bn_score.bias_negative(self.flags.candidates)
        dropped = self.flags.candidates & ~kept
        conflicting, aligned = self.flags.conflicting, ~self.flags.conflicting
        return {"bn_dropped_aligned": float((dropped & aligned).sum()),
                "bn_dropped_conflicting": float((dropped & conflicting).sum()),
                "bn_kept_aligned_percent": float(100 * (kept & aligned).sum() / aligned.sum().clamp_min(1)),
                "bn_kept_conflicting_percent": float(100 * (kept & conflicting).sum() / conflicting.sum().clamp_min(1)),
                **_detection("bn_set", kept, conflicting)}


def _group_means(name: str, values: torch.Tensor, conflicting: torch.Tensor) -> dict[str, float]:
    """Mean of `values` over the bias-aligned and the bias-conflicting entries (those present)."""
    out = {}
    for group, mask in (("aligned", ~conflicting), ("conflicting", conflicting)):
        if mask.any():
            out[f"{name}_{group}"] = values[mask].float().mean().item()
    return out


def _detection(name: str, chosen: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Size, precision and recall (%) of the set `chosen` for the samples `target` (true bias labels)."""
    hits = float((chosen & target).sum())
    return {f"{name}_size": float(chosen.sum()), f"{name}_precision": 100 * hits / max(float(chosen.sum()), 1.0),
            f"{name}_recall": 100 * hits / max(float(target.sum()), 1.0)}
