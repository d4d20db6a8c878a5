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
