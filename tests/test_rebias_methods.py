"""ReBias and the F/G baselines: one update on the debug stores; RUBi's mask head and
LearnedMixin's gate receive gradients and change (the authors' code never optimised them)."""

import copy

import pytest
import torch

from debias_workbench.training.methods import METHODS

from .conftest import debug_batch


@pytest.fixture
def cfg(default_config):
    cfg = copy.deepcopy(default_config["training"])
    cfg["arch"] = "simple_cnn7"
    return cfg


@pytest.mark.parametrize("name, head, args", [("rubi", "mask_head", {}),
                                               ("learned_mixin_h", "gate", {"g_pretrain_epochs": 0})])
def test_bias_heads_are_trained(name, head, args, cfg, tiny_stores):
    method = METHODS[name](9, cfg, args)
    before = copy.deepcopy(getattr(method, head).weight.detach())
    stats = method.update(debug_batch(method, tiny_stores))
    assert all(torch.isfinite(torch.as_tensor(v)) for v in stats.values())
    assert not torch.equal(before, getattr(method, head).weight)


def test_rebias_updates_g_then_f_with_hsic(cfg, tiny_stores):
    method = METHODS["rebias"](9, cfg, {"biased_arch": "simple_cnn1"})
    f0, g0 = copy.deepcopy(method.network.head.weight), copy.deepcopy(method.biased.head.weight)
    stats = method.update(debug_batch(method, tiny_stores))
    assert {"hsic", "loss_g", "train_acc_g"} <= set(stats) and all(map(lambda v: v == v, stats.values()))
    assert not torch.equal(f0, method.network.head.weight) and not torch.equal(g0, method.biased.head.weight)
    assert len(method.optimizers()) == 2


def test_learned_mixin_pretrains_g_then_fixes_it(cfg, tiny_stores):
    """Appendix C: G is trained alone first, then fixed while F and the gate learn."""
    method = METHODS["learned_mixin_h"](9, cfg, {"g_pretrain_epochs": 1})
    method.pre_steps = 1  # as the trainer sets it: one epoch of one step (`training.run_length`)
    batch = debug_batch(method, tiny_stores)
    f0, g0 = copy.deepcopy(method.network.state_dict()), copy.deepcopy(method.biased.state_dict())
    method.update(batch)  # step 1: G's pre-training
    assert all(torch.equal(f0[k], v) for k, v in method.network.state_dict().items())
    g1 = copy.deepcopy(method.biased.state_dict())
    assert not all(torch.equal(g0[k], v) for k, v in g1.items())
    method.update(batch)  # step 2: G fixed (weights and batch-norm statistics), F trained
    assert all(torch.equal(g1[k], v) for k, v in method.biased.state_dict().items())
    assert not all(torch.equal(f0[k], v) for k, v in method.network.state_dict().items())


def test_biased_is_g_alone(cfg):
    method = METHODS["biased"](9, cfg, {"biased_arch": "simple_cnn1"})
    assert all(m.kernel_size == (1, 1) for m in method.network.modules() if isinstance(m, torch.nn.Conv2d))


def test_hex_projection_removes_the_nglcm_subspace():
    from debias_workbench.training.methods.hex import project_out

    g = torch.Generator().manual_seed(0)
    f_p, f_g = torch.randn(64, 9, generator=g), torch.randn(64, 9, generator=g)
    f_l = project_out(f_p, f_g, ridge=0.0)
    assert torch.allclose(f_g.T @ f_l, torch.zeros(9, 9), atol=1e-4)   # orthogonal to span(F_G)
    assert torch.allclose(project_out(f_g, f_g, ridge=0.0), torch.zeros(64, 9), atol=1e-4)


def test_nglcm_counts_grey_level_pairs():
    """With sharp level assignments the NGLCM is the classic normalised co-occurrence matrix."""
    from debias_workbench.training.methods.hex import NGLCM

    nglcm = NGLCM(levels=2)
    with torch.no_grad():
        nglcm.log_width.fill_(torch.tensor(0.01).log())
    image = torch.tensor([[[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]])  # right-neighbour pairs: 01, 11, 00, 01
    expected = torch.tensor([[1, 2], [0, 1]]) / 4.0
    assert torch.allclose(nglcm(image).view(2, 2), expected, atol=1e-4)


def test_adamp_optimiser_drives_both_networks(cfg, tiny_stores):
    """The ReBias appendix's AdamP (`optimizer.name: adamp`) for F and G alike."""
    from adamp import AdamP

    cfg["optimizer"] = {"name": "adamp", "lr": 0.001, "weight_decay": 0.0}
    method = METHODS["rebias"](9, cfg, {"biased_arch": "simple_cnn1"})
    assert all(isinstance(o, AdamP) for o in method.optimizers())
    g0 = copy.deepcopy(method.biased.head.weight)
    method.update(debug_batch(method, tiny_stores))
    assert not torch.equal(g0, method.biased.head.weight)


def _g_losses(train_cfg: dict, method_args: dict, steps: int) -> list[float]:
    """G's loss over `steps` ReBias updates on one batch of a stand-in whose 6 classes (BAR's) each wear their own
    colour (a bias BagNet18 sees in any patch)."""
    torch.manual_seed(0)
    method = METHODS["rebias"](6, train_cfg, method_args)
    colours = torch.rand(6, 3, 1, 1)
    y = torch.arange(24) % 6
    images = (colours[y] + 0.1 * torch.randn(24, 3, 32, 32)).clamp(0, 1).mul(255).to(torch.uint8)
    batch = {"images": images.permute(0, 2, 3, 1).contiguous(), "labels": y}   # (B, H, W, 3) uint8, as a store's
    return [float(method.update(batch)["loss_g"]) for _ in range(steps)]


def test_fidelity_rebias_g_learns_at_bar_settings(default_config):
    """config/park_real_data.yaml's park_bar ReBias: F fine-tuned at BiasEnsemble's 1e-5, G (BagNet18, random weights)
    at its own `biased_lr`; G's loss (CE - HSIC) falls within a few steps there. At F's rate it barely moves, the
    reason for the row (the protocol's "ReBias's G learning rate (BAR)")."""
    from debias_workbench.workflow.slices import run_config

    from .test_paper_protocol import _resolved

    config = _resolved(default_config, "config/park_real_data.yaml")
    run = run_config(config, "park_bar_rebias_conflict_1", 0)
    train_cfg = {**run["training"], "pretrained": None, "amp": False}
    assert run["method_args"]["biased_lr"] > 10 * train_cfg["optimizer"]["lr"]
    own = _g_losses(train_cfg, run["method_args"], 8)
    fs_rate = _g_losses(train_cfg, {**run["method_args"], "biased_lr": None}, 8)
    assert own[-1] < 0.5 * own[0]
    assert fs_rate[-1] > 1.5 * own[-1]   # at F's rate G's loss stays well above
