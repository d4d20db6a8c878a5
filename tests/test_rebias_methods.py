"""ReBias and the F/G baselines: one update on the debug stores; RUBi's mask head and
LearnedMixin's gate receive gradients and change (the authors' code never optimised them)."""

import copy

import pytest
import torch

from training.methods import METHODS

from .conftest import debug_batch


@pytest.fixture
def cfg(default_config):
    cfg = copy.deepcopy(default_config["training"])
    cfg["arch"] = "simple_cnn7"
    return cfg


@pytest.mark.parametrize("name, head", [("rubi", "mask_head"), ("learned_mixin_h", "gate")])
def test_bias_heads_are_trained(name, head, cfg, tiny_stores):
    method = METHODS[name](9, cfg, {})
    before = copy.deepcopy(getattr(method, head).weight.detach())
    stats = method.update(debug_batch(method, tiny_stores))
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert not torch.equal(before, getattr(method, head).weight)


def test_rebias_updates_g_then_f_with_hsic(cfg, tiny_stores):
    method = METHODS["rebias"](9, cfg, {"biased_arch": "simple_cnn1"})
    f0, g0 = copy.deepcopy(method.network.head.weight), copy.deepcopy(method.biased.head.weight)
    stats = method.update(debug_batch(method, tiny_stores))
    assert {"hsic", "loss_g", "train_acc_g"} <= set(stats) and all(map(lambda v: v == v, stats.values()))
    assert not torch.equal(f0, method.network.head.weight) and not torch.equal(g0, method.biased.head.weight)
    assert len(method.optimizers()) == 2
