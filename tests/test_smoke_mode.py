"""Smoke mode: the same runs at their configured shapes with small counts (debias_workbench/workflow/smoke.py)."""

import copy

import yaml

from debias_workbench.training.methods import spec as method_spec
from debias_workbench.workflow.config import deep_merge, resolve_config
from debias_workbench.workflow.slices import run_config
from debias_workbench.workflow.smoke import BATCH, STEPS_PER_EPOCH, apply_smoke

from .conftest import ROOT


def _paper_config(default_config, *names):
    cfg = copy.deepcopy(default_config)
    for name in names:
        cfg = deep_merge(cfg, yaml.safe_load((ROOT / "config" / name).read_text()))
    return cfg


def test_smoke_shrinks_counts_only_and_keeps_every_shape(default_config):
    cfg = _paper_config(default_config, "imagenet9.yaml", "park_real_data.yaml", "imagenet100_ssl.yaml")
    real, smoke = resolve_config(copy.deepcopy(cfg)), resolve_config({**cfg, "smoke": True})
    assert smoke["results"] == real["results"] + "-smoke" and smoke["seeds"] == real["seeds"][:1]
    for exp in ("clad", "in100_moco", "r18_rebias", "r18_learned_mixin"):
        a, b = run_config(real, exp, 0), run_config(smoke, exp, 0)
        assert b["training"]["epochs"] == 1 and b["training"]["steps_per_epoch"] == STEPS_PER_EPOCH
        assert b["training"]["batch_size"] == min(a["training"]["batch_size"], BATCH)
        for key in ("arch", "pretrained", "optimizer", "augment", "normalize"):
            assert a["training"].get(key) == b["training"].get(key), (exp, key)
        assert a["dataset_config"]["image_size"] == b["dataset_config"]["image_size"] == 224
        counts = method_spec(a["method"]).smoke_counts  # the arguments its spec declares `x-smoke`
        same = lambda args: {k: v for k, v in args.items() if k not in counts}  # noqa: E731
        assert same(a["method_args"]) == same(b["method_args"]), exp  # queue sizes, losses, alphas kept
    ours = run_config(smoke, "park_bffhq_ours_conflict_1", 0)
    assert ours["method_args"]["committee_steps"] == 2 and ours["method_args"]["t2"] == 0
    assert ours["training"]["arch"] == "resnet18" and ours["training"]["stem"] == "imagenet"
    assert ours["dataset_config"]["image_size"] == 224
    assert [e for e in smoke["experiments"] if e.startswith("park_bffhq_ours")] == ["park_bffhq_ours_conflict_1"]
    assert smoke["datasets"]["in9"]["source"]["max_per_class"] == {"train": 2, "val": 2}
    assert real["datasets"]["in9"]["segmentation"]["iterations"] == 10  # the paper's; one in smoke mode
    assert smoke["datasets"]["in9"]["segmentation"] == {**real["datasets"]["in9"]["segmentation"], "iterations": 1}
    assert run_config(real, "clad", 0) != run_config(smoke, "clad", 0)  # never the real run's identity


def test_smoke_is_idempotent_and_off_by_default(default_config):
    assert apply_smoke(default_config) is default_config
    once = apply_smoke({**default_config, "smoke": True})
    assert apply_smoke(once) == once


def test_grid_runs_do_not_inherit_the_top_level_pretrained_weights(default_config):
    """config/imagenet9.yaml's ImageNet ResNet-50 is for its own runs: the MNIST grids' small CNNs
    and the self-supervised runs start from random weights."""
    cfg = resolve_config(_paper_config(default_config, "imagenet9.yaml", "biased_mnist_paper.yaml",
                                       "park_real_data.yaml", "imagenet100_ssl.yaml"))
    assert run_config(cfg, "clad", 0)["training"]["pretrained"].endswith("resnet50-0676ba61.pth")
    for exp in ("rebias_mnist_vanilla_rho_0.997", "park_cmnist_ours_conflict_1", "in100_moco", "in100_byol"):
        assert run_config(cfg, exp, 0)["training"]["pretrained"] is None, exp


def test_smoke_counts_are_declared_by_the_methods():
    """A method argument that counts steps, epochs or members declares its smoke value (`x-smoke`) in its spec."""
    lff_be, moco = method_spec("lff_be"), method_spec("moco_v2")
    assert lff_be.smoke_value("committee_size", 5) == 2 and lff_be.smoke_value("committee_size", 1) == 1  # at most 2
    assert lff_be.smoke_value("committee_steps", 1000) == 2 and moco.smoke_value("probe_milestones", [30]) == []
    assert moco.smoke_value("tau", 0.2) == 0.2 and "tau" not in moco.smoke_counts  # not a count: kept
    assert "x-smoke" not in str(moco.schema())  # an annotation, not a rule of the arguments' schema
