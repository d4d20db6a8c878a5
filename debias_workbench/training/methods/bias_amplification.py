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

from debias_workbench.core.seeding import name_seed

from ..distributed import averaged_gradients, gather_rows, own_rows
from ..models import build_network
from .amplification_parts import (
    BNScore,
    LossEMA,
    RowFlags,
    bias_aligned,
    bn_candidates,
    class_activation_map,
    draw_partners,
    gce_loss,
    guide_similarity,
    ie_weight,
    lff_weight,
)
from .base import Method
from .committee import committee_key, load_committee, train_committee
from .committee_artifact import COMMITTEE


class LfF(Method):
    """`method_args`: q (GCE), ema_alpha (LfF's loss EMA). f_b has f_d's architecture; both use
    the run's optimiser. Per-row state (loss EMAs, flags) is sized by `setup` and checkpointed."""

    #: per-row flags the method keeps (`setup` fills them)
    FLAGS: tuple[str, ...] = ("conflicting",)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.biased = build_network(train_cfg["arch"], num_classes, train_cfg)  # f_d's architecture and weights
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
        conflicting = batches.column("bias_labels") != batches.column("labels")
        self.flags = RowFlags(conflicting=torch.from_numpy(conflicting).to(device))
        return {}

    def biased_loss(self, logits_b: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """LfF: GCE on every sample (Eq. 2)."""
        return gce_loss(logits_b, y, self.args["q"]).mean()

    def reweight(
        self, logits_b: torch.Tensor, logits_d: torch.Tensor, y: torch.Tensor, index: torch.Tensor
    ) -> torch.Tensor:
        """(B,) W(x) of LfF Eq. 3 after this step's EMA update of both models' CE losses (with
        several processes, of every process's rows: the EMAs stay the same on all of them)."""
        rows = gather_rows(index)
        self.ema_b.update(rows, gather_rows(F.cross_entropy(logits_b.detach().float(), y, reduction="none")))
        self.ema_d.update(rows, gather_rows(F.cross_entropy(logits_d.detach().float(), y, reduction="none")))
        return lff_weight(self.ema_b.normalized(index), self.ema_d.normalized(index))

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y, index = self.augment(batch["images"]), batch["labels"], batch["index"]
        with self.autocast():
            logits_b, logits_d = self.biased(x).float(), self.network(x).float()
        w = self.reweight(logits_b, logits_d, y, index)
        loss_b = self.biased_loss(logits_b, y, index)
        loss_d = (w * F.cross_entropy(logits_d, y, reduction="none")).mean()
        self._step_both(loss_b + loss_d)
        conflicting = self.flags.conflicting[index]
        return {
            "loss": loss_d.detach(),
            "biased_loss": loss_b.detach(),
            "train_acc": (logits_d.argmax(1) == y).float().mean().detach(),
            **_group_means("weight", w, conflicting),
        }

    def _step_both(self, loss: torch.Tensor) -> None:
        """One step of f_b and f_d on their summed loss (gradients averaged across processes, as `Method.step`)."""
        for opt in self.optimizers():
            opt.zero_grad(set_to_none=True)
        with averaged_gradients(p for opt in self.optimizers() for group in opt.param_groups for p in group["params"]):
            loss.backward()
        for opt in self.optimizers():
            opt.step()


class LfFBiasEnsemble(LfF):
    """`method_args` besides LfF's: committee_size, committee_steps (each member's GCE iterations,
    in steps of the run's batch size), committee_vote (which checkpoint of a member votes: its best
    on the val split, or its last iterate), committee_valid_every (the spacing of the candidates
    scored on the val split, `checkpoint_steps`), confidence (p_y above which a member calls a
    sample bias-aligned). The committee (`committee.committee_votes`) is built by a job of its own and shared by the
    runs that read it (`committee_artifact.COMMITTEE`, a prerequisite): `setup` reads its file, or without
    one trains it (`committee.train_committee`), the same committee either way."""

    FLAGS = ("conflicting", "aligned", "candidates")

    def setup(self, batches) -> dict[str, float]:
        super().setup(batches)
        file = self.prerequisite_files.get(COMMITTEE.name)  # made by its own job; without one, trained here
        if file is None:
            committee = train_committee(self, batches)
        else:
            committee = load_committee(file, committee_key(self, batches), next(self.parameters()).device)
        correct_prob, wrong, early_stop = committee.correct_prob, committee.wrong, committee.early_stop
        conflicting = self.flags.conflicting
        self.flags = RowFlags(
            conflicting=conflicting,
            aligned=bias_aligned(correct_prob, self.args["confidence"]),
            candidates=bn_candidates(wrong),
        )
        if not self.flags.aligned.any():
            print(
                f"warning: D^A is empty (no training sample has p_y > {self.args['confidence']} for a majority of "
                "the committee), so f_b never trains: raise committee_steps, or let the members vote with their last "
                "iterate (committee_vote: last) if the val split is unbiased",
                flush=True,
            )
        return {
            **early_stop,
            **_detection("aligned_set", self.flags.aligned, ~conflicting),
            **_detection("candidate_set", self.flags.candidates, conflicting),
        }

    def biased_loss(self, logits_b: torch.Tensor, y: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """BE: CE on the batch's members of D^A; a batch without any gives no biased-model loss
        (the authors' code averages over an empty set there and stops with a NameError)."""
        member = self.flags.aligned[index]
        if not member.any():
            return logits_b.sum() * 0.0
        return F.cross_entropy(logits_b[member], y[member])


class IntrinsicFeatureEnhancement(LfFBiasEnsemble):
    """Park et al. (CVPR 2024) on LfF + BE. `method_args` besides BE's: t1 and t2 (iterations: the
    BN score's reference point and the start of the guidance), lambda_sim, alpha_l, alpha_s, tau;
    the switches of the paper's Table 3 ablation: partner_source (x^BN from D, D^BN_cand or D^BN),
    guide (L_guide), bn_loss (L_BN), score_weight (s(x^BN) as the weight of L_guide.sim and L_BN,
    else 1); and guide_sim, the reading of Eq. 9 (`guide_similarity`).

    In the target readings of Eq. 9 (`guide_similarity`) g(z) is a fixed target and IE a weight
    (no gradient through IE in any loss): the gradient reaches z through L_guide.sim (towards g(z))
    and L_guide.cls (through z ⊙ IE). "through_both" lets the gradient flow through both sides of
    Eq. 9 and through IE's Grad-CAM and common-feature score (the reading before the switch
    existed). Which one is the default, and why, config/park_ablation.yaml measured (docs/measurements.md).
    A sample without a partner (no row of its class in the partner set other than itself) gets
    IE = 1 and none of L_guide and L_BN: with IE = 1, L_guide.cls would add its main loss a second
    time (just after T2, where λ_main is near 0, such a sample has almost no loss at all).
    x^BN goes through f_d in its own forward pass (the paper does not say): its batch-norm
    statistics are those of the partner batch, and in train mode it updates the running ones too."""

    iteration: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__(num_classes, train_cfg, method_args)
        self.bn_score = BNScore(0, self.args["alpha_l"], self.args["alpha_s"], self.args["t1"])
        self.register_buffer("iteration", torch.zeros((), dtype=torch.long))

    def setup(self, batches) -> dict[str, float]:
        stats = super().setup(batches)
        self.bn_score = BNScore(
            batches.n, self.args["alpha_l"], self.args["alpha_s"], self.args["t1"], next(self.parameters()).device
        )
        self.train_rows = batches
        self.partner_seed = int(torch.randint(2**62, ()))  # drawn after the seeded init: the same on a resume
        return stats

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | float]:
        x, y, index = self.augment(batch["images"]), batch["labels"], batch["index"]
        t = self.host_count("iteration")
        with self.autocast():
            logits_b = self.biased(x).float()
            z = self.network.feature_map(x)
            logits_d = self.network.head(z.mean((2, 3))).float()
        ce_b = F.cross_entropy(logits_b.detach(), y, reduction="none")
        self.bn_score.update(gather_rows(index), gather_rows(ce_b), t)  # every process's rows
        w = self.reweight(logits_b, logits_d, y, index)
        loss_b = self.biased_loss(logits_b, y, index)
        loss_main = (w * F.cross_entropy(logits_d, y, reduction="none")).mean()
        stats: dict[str, float] = {}
        if t < self.args["t2"]:
            loss_d = loss_main
        else:
            loss_d, stats = self._guided(x, y, index, z, w, loss_main, t)
        self._step_both(loss_b + loss_d)
        self.count_step("iteration")
        in_candidates, conflicting = self.flags.candidates, self.flags.conflicting
        return {
            "loss": loss_d.detach(),
            "biased_loss": loss_b.detach(),
            "train_acc": (logits_d.argmax(1) == y).float().mean().detach(),
            **stats,
            **_group_means("bn_score", self.bn_score.score[in_candidates], conflicting[in_candidates]),
        }

    def _guided(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        index: torch.Tensor,
        z: torch.Tensor,
        w: torch.Tensor,
        loss_main: torch.Tensor,
        t: int,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Eq. 13: lambda_main L_main + L_guide (Eq. 11) + L_BN (Eq. 12), with the partners of `_partners`."""
        partner, has = self._partners(y, index)
        x_bn = self.augment(self.train_rows.rows(partner.cpu().numpy())["images"].to(x.device, non_blocking=True))
        weight_bn = self.bn_score.score[partner].clamp_min(0.0) if self.args["score_weight"] else torch.ones_like(w)
        s_bn = torch.where(has, weight_bn, torch.zeros_like(w))  # s(x^BN), clipped at 0; 0 without a partner
        head, through = self.network.head, self.args["guide_sim"] == "through_both"
        with self.autocast():
            z_bn = self.network.feature_map(x_bn)
            logits_bn = head(z_bn.mean((2, 3))).float()
        zf = z.float()
        z_ie, weight = (zf, head.weight.float()) if through else (zf.detach(), head.weight.detach().float())
        with torch.no_grad():  # the partner is the reference: no gradient through its side
            zbf = z_bn.detach().float()
            cam_bn = class_activation_map(zbf, weight.detach(), y)
        cam = class_activation_map(z_ie, weight, y)
        ie = torch.where(has[:, None, None], ie_weight(z_ie, zbf, cam, cam_bn, self.args["tau"]), torch.ones_like(cam))
        gap_g = (zf * ie[:, None]).mean((2, 3))  # GAP(g(z)), Eq. 7
        distance = guide_similarity(zf, ie, self.args["guide_sim"])  # (B,) Eq. 9's L1
        loss_sim = (s_bn * distance).mean()  # Eq. 9
        loss_cls = (has * w * F.cross_entropy(head(gap_g), y, reduction="none")).mean()  # Eq. 10
        loss_bn = (s_bn * F.cross_entropy(logits_bn, y, reduction="none")).mean()  # Eq. 12
        total_steps = max(self.total_steps - self.args["t2"], 1)
        lambda_main = min(1.0, (t - self.args["t2"]) / total_steps)
        loss = lambda_main * loss_main  # Eq. 13
        if self.args["guide"]:
            loss = loss + self.args["lambda_sim"] * loss_sim + loss_cls  # Eq. 11
        if self.args["bn_loss"]:
            loss = loss + loss_bn
        return loss, {
            "loss_guide_sim": loss_sim.detach(),
            "loss_guide_cls": loss_cls.detach(),
            "loss_bn": loss_bn.detach(),
            "ie_mean": ie.mean().detach(),
            "partner_fraction": has.float().mean().detach(),
            "lambda_main": lambda_main,
            **self._partner_statistics(partner, has, distance, s_bn),
        }

    def _partner_statistics(
        self, partner: torch.Tensor, has: torch.Tensor, distance: torch.Tensor, s_bn: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The partners' statistics, logged only, over the samples that have one (none when no sample has):
        the share of bias-conflicting partners (true bias labels), Eq. 9's distance without s(x^BN) and s(x^BN)."""
        partner_bc = self.flags.conflicting[partner][has]  # true bias labels: logged only
        if not has.any():
            return {}
        return {
            "partner_conflicting_fraction": partner_bc.float().mean().detach(),
            "guide_distance": distance[has].mean().detach(),  # Eq. 9's distance without s(x^BN)
            "partner_weight": s_bn[has].mean().detach(),
        }

    def _partners(self, y: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) x^BN's row for each sample, of its class and never the sample itself, drawn uniformly
        from D (every training row), D^BN_cand or D^BN_t (Eq. 3) by `partner_source`; (B,) whether
        one exists. With several processes the partners are drawn for the global batch and each
        process takes its own rows': the draws of one process."""
        source = self.args["partner_source"]
        members = {
            "D": torch.ones_like(self.flags.candidates),
            "D_cand": self.flags.candidates,
            "D_BN": self.bn_score.bias_negative(self.flags.candidates),
        }[source]
        seed = name_seed("bn-partner", self.partner_seed, self.host_count("iteration"))
        generator = torch.Generator().manual_seed(seed)
        partner, has = draw_partners(members, self.ema_d.labels, gather_rows(y), gather_rows(index), generator)
        return own_rows(partner), own_rows(has)

    def finish(self, batches) -> dict[str, float]:
        """The paper's Table 2 at the end of training: BA / BC samples dropped from D^BN_cand by
        the BN score, and the share of all BA / BC samples that D^BN keeps."""
        kept = self.bn_score.bias_negative(self.flags.candidates)
        dropped = self.flags.candidates & ~kept
        conflicting, aligned = self.flags.conflicting, ~self.flags.conflicting
        return {
            "bn_dropped_aligned": float((dropped & aligned).sum()),
            "bn_dropped_conflicting": float((dropped & conflicting).sum()),
            "bn_kept_aligned_percent": float(100 * (kept & aligned).sum() / aligned.sum().clamp_min(1)),
            "bn_kept_conflicting_percent": float(100 * (kept & conflicting).sum() / conflicting.sum().clamp_min(1)),
            **_detection("bn_set", kept, conflicting),
        }


def _group_means(name: str, values: torch.Tensor, conflicting: torch.Tensor) -> dict[str, torch.Tensor | float]:
    """Mean of `values` over the bias-aligned and the bias-conflicting entries (those present)."""
    out: dict[str, torch.Tensor | float] = {}
    for group, mask in (("aligned", ~conflicting), ("conflicting", conflicting)):
        if mask.any():
            out[f"{name}_{group}"] = values[mask].float().mean().detach()
    return out


def _detection(name: str, chosen: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Size, precision and recall (%) of the set `chosen` for the samples `target` (true bias labels)."""
    hits = float((chosen & target).sum())
    return {
        f"{name}_size": float(chosen.sum()),
        f"{name}_precision": 100 * hits / max(float(chosen.sum()), 1.0),
        f"{name}_recall": 100 * hits / max(float(target.sum()), 1.0),
    }
