"""A training step does not read the device back to the host (on a GPU each read makes the CPU wait
for every queued kernel): checked on the CPU by the code path, recording every tensor-to-host call
that the training code makes in a method's second `update` (the first may read its step counters
once). The reads that remain are listed with the reason they are there; a new one fails the test."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import torch

from training.data import ZarrBatches
from training.methods import METHODS

from .conftest import debug_batch
from .test_training import FIRST_UPDATE_TRAINS_F, train_config  # noqa: F401 (a fixture)

TRAINING = Path(__file__).resolve().parents[1] / "training"
#: Tensor methods that copy a value to the host (a bool mask's indexing also does, unseen here)
HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "cpu", "numpy")
#: (file, code) of the reads that remain, and why
CLAD_PARTNERS = {("clad.py",
                  'con = info_nce(z_a[found], z_p[found], negatives[found], self.args["tau"], usable[found]) \\')}
GROUP_MEANS = {("bias_amplification.py", "if mask.any():")}  # logged per group only when the batch has it
REMAINING = {
    # a batch of one class has no positive pair: CLAD contrasts only the anchors that have one
    "clad": CLAD_PARTNERS, "clad_trivial": CLAD_PARTNERS, "s_clad": CLAD_PARTNERS,
    "clad_plus": CLAD_PARTNERS | {("clad.py", "if self.positive_ce and found.any():")},
    "clad_plus_trivial": CLAD_PARTNERS | {("clad.py", "if self.positive_ce and found.any():")},
    "s_clad_plus": CLAD_PARTNERS | {("clad.py", "if self.positive_ce and found.any():")},
    "lff": GROUP_MEANS,
    # f_b trains on the batch's members of D^A, a set of any size
    "lff_be": GROUP_MEANS | {("bias_amplification.py", "if not member.any():")},
    # x^BN's rows are read from the host-side training store, drawn per class among sets of any size
    "intrinsic_feature_enhancement": GROUP_MEANS | {
        ("bias_amplification.py", "if not member.any():"),
        ("bias_amplification.py", 'partnered = {"partner_conflicting_fraction": partner_bc.float().mean().detach(),'),
        ("bias_amplification.py",
         'x_bn = self.augment(self.train_rows.rows(partner.cpu().numpy())["images"].to(x.device, non_blocking=True))'),
        ("amplification_parts.py", "for c in y.unique().tolist():")},
    # a gaussian blur's radius from the sigmas, which are drawn on the CPU: no device read
    "moco_v2": {("ssl_augment.py", "radius = max(1, int(math.ceil(3 * float(sigma.max()))))")},
    "moco_v2_texture": {("ssl_augment.py", "radius = max(1, int(math.ceil(3 * float(sigma.max()))))")},
    "byol": {("ssl_augment.py", "radius = max(1, int(math.ceil(3 * float(sigma.max()))))")},
}
#: optimiser internals (Adam's step count is a CPU tensor) are not the training code's
OPTIMISER_STEP = {"optimizer.step()", "opt.step()"}


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
    method.update(batch)
    monkeypatch.undo()
    assert reads == REMAINING.get(name, set())
