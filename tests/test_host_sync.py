"""A training step does not read the device back to the host (on a GPU each read makes the CPU wait
for every queued kernel): checked on the CPU by the code path, recording every tensor-to-host call
that the training code makes in a method's second `update` (the first may read its step counters
once). The reads that remain are listed with the reason they are there; a new one fails the test."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import torch

from debias_workbench.training.data import ZarrBatches
from debias_workbench.training.methods import METHODS

from .conftest import debug_batch
from .test_training import FIRST_UPDATE_TRAINS_F, train_config  # noqa: F401 (a fixture)

TRAINING = Path(__file__).resolve().parents[1] / "debias_workbench" / "training"
#: Tensor methods that copy a value to the host (and indexing with a boolean mask, below)
HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")
#: (file, code) of the reads that remain, and why
CLAD_PARTNERS = {("clad.py", 'info_nce(z_a[found], z_p[found], negatives[found], self.args["tau"], usable[found])')}
GROUP_MEANS = {("bias_amplification.py", "if mask.any():"),  # logged per group only when the batch has it
               ("bias_amplification.py", 'out[f"{name}_{group}"] = values[mask].float().mean().detach()')}
CLAD_PLUS = CLAD_PARTNERS | {("clad.py", "if self.positive_ce and found.any():"),
                             ("clad.py", "ce_pos = F.cross_entropy(logits_p[found], y[found])")}
BLUR_RADIUS = {("ssl_augment.py", "radius = max(1, int(math.ceil(3 * float(sigma.max()))))")}
REMAINING = {
    # a batch of one class has no positive pair: CLAD contrasts only the anchors that have one
    "clad": CLAD_PARTNERS, "clad_trivial": CLAD_PARTNERS, "s_clad": CLAD_PARTNERS,
    "clad_plus": CLAD_PLUS, "clad_plus_trivial": CLAD_PLUS, "s_clad_plus": CLAD_PLUS,
    "lff": GROUP_MEANS,
    # f_b trains on the batch's members of D^A, a set of any size
    "lff_be": GROUP_MEANS | {("bias_amplification.py", "if not member.any():")},
    # x^BN's rows are read from the host-side training store, drawn per class among sets of any size;
    # the BN score's reference losses and the logged partner statistics are over sets of any size too
    "intrinsic_feature_enhancement": GROUP_MEANS | {
        ("bias_amplification.py", "if not member.any():"),
        ("bias_amplification.py", "if not has.any():"),
        ("bias_amplification.py", "partner_bc = self.flags.conflicting[partner][has]  # true bias labels: logged only"),
        ("bias_amplification.py",
         '"guide_distance": distance[has].mean().detach(),  # Eq. 9\'s distance without s(x^BN)'),
        ("bias_amplification.py", '"partner_weight": s_bn[has].mean().detach(),'),
        ("bias_amplification.py",
         '**_group_means("bn_score", self.bn_score.score[in_candidates], conflicting[in_candidates]),'),
        ("bias_amplification.py",
         'x_bn = self.augment(self.train_rows.rows(partner.cpu().numpy())["images"].to(x.device, non_blocking=True))'),
        ("amplification_parts.py", "for c in y.unique().tolist():"),
        ("amplification_parts.py", "partner[at[ok]], has[at[ok]] = pool[pick[ok]], True"),
        ("amplification_parts.py", "rows = index[has_ref]"),
        ("amplification_parts.py", "self.ref[index[fresh]] = self.loss[index[fresh]]")},
    # a gaussian blur's radius from the sigmas, which are drawn on the CPU: no device read
    "moco_v2": BLUR_RADIUS, "moco_v2_texture": BLUR_RADIUS, "byol": BLUR_RADIUS,
}
#: optimiser internals (Adam's step count is a CPU tensor) are not the training code's
OPTIMISER_STEP = {"optimizer.step()", "opt.step()"}


def _has_mask(index) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_a_training_step_reads_nothing_back_but_the_listed(name, tiny_stores, train_config, monkeypatch):
    method = METHODS[name](9, train_config["training"], FIRST_UPDATE_TRAINS_F.get(name, {}))
    method.setup(ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True))
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]})
    method.update(batch)                                       # the first step reads the step counters once
    reads: set[tuple[str, str]] = set()

    def recording(original):
        def read(self, *args, **kwargs):
            ours = [f for f in traceback.extract_stack()[:-1] if Path(f.filename).is_relative_to(TRAINING)]
            if ours and ours[-1].line not in OPTIMISER_STEP:
                reads.add((Path(ours[-1].filename).name, ours[-1].line))
            return original(self, *args, **kwargs)
        return read

    for attr in HOST_READS:
        monkeypatch.setattr(torch.Tensor, attr, recording(getattr(torch.Tensor, attr)))
    for attr in ("__getitem__", "__setitem__"):                   # indexing with a boolean mask reads its size back
        original = getattr(torch.Tensor, attr)
        record = recording(original)
        monkeypatch.setattr(torch.Tensor, attr, lambda self, index, *rest, original=original, record=record:
                            (record if _has_mask(index) else original)(self, index, *rest))
    method.update(batch)
    monkeypatch.undo()
    assert reads == REMAINING.get(name, set())
