"""A paper config plans its papers' runs: every run it keeps feeds a table of its papers or carries the
config's reason, the demo's other runs are gone, and a kept run's own config is what it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from debias_workbench.workflow.config import ConfigError, resolve_config
from debias_workbench.workflow.plan import OUTSIDE, load_config, run_tables
from debias_workbench.workflow.scope import scoped
from debias_workbench.workflow.slices import run_config

ROOT = Path(__file__).resolve().parents[1]
SCOPED = ["imagenet9.yaml", "imagenet100_ssl.yaml", "park_real_data.yaml", "biased_mnist_paper.yaml"]


def _without_scope(config: dict) -> dict:
    return {**config, "scope": {"tables_only": False, "extra": {}}}


@pytest.mark.parametrize("name", SCOPED)
def test_every_run_of_a_paper_config_feeds_its_tables_or_says_why(name):
    config = load_config([ROOT / "config" / name])
    resolved = resolve_config(config)
    tables = run_tables(resolved)
    stray = {run: table for run, table in tables.items()
             if table == OUTSIDE or "no protocol lists" in table}
    assert not stray, stray
    whole = resolve_config(_without_scope(config))
    dropped = set(whole["experiments"]) - set(resolved["experiments"])
    assert {"moco", "byol_patch"} <= dropped                                   # the demo's rows
    for run in resolved["experiments"]:   # a kept run's own config (its identity) is unchanged
        seed = resolved["experiments"][run].get("seeds", resolved["seeds"])[0]
        assert run_config(resolved, run, seed) == run_config(whole, run, seed), run


def test_configs_given_together_keep_each_ones_tables():
    resolved = resolve_config(load_config([ROOT / "config" / "imagenet9.yaml", ROOT / "config" / "biased_mnist_paper.yaml"]))
    assert {"clad", "r18_rebias", "clad_trivial", "rebias_mnist_rebias_rho_0.99"} <= set(resolved["experiments"])
    assert "moco" not in resolved["experiments"] and "park_cmnist" not in resolved["grids"]


def test_the_demo_and_an_unscoped_config_keep_every_run(default_config):
    assert scoped(default_config) is default_config
    ablation = resolve_config(load_config([ROOT / "config" / "park_ablation.yaml"]))
    assert "moco" in ablation["experiments"] and "park_cmnist" in ablation["grids"]


def test_analyses_keep_only_the_runs_that_stay_and_an_unknown_extra_is_named(default_config):
    config = {**default_config, "protocols": {}, "scope": {"tables_only": True, "extra": {"clad": "a reason"}}}
    config["analyses"] = {**config["analyses"], "saliency": {**config["analyses"]["saliency"],
                                                             "experiments": ["base_in9", "clad"]}}
    out = scoped(config)
    assert list(out["experiments"]) == ["clad"] and out["grids"] == {} and out["sweeps"] == {}
    assert out["analyses"]["saliency"]["experiments"] == ["clad"]
    bad = {**config, "scope": {"tables_only": True, "extra": {"clad": "a reason", "no_such_run": "typo"}}}
    with pytest.raises(ConfigError, match=r"scope.extra: 'no_such_run' is neither an experiment"):
        resolve_config(bad)


def test_a_grid_cut_to_some_methods_keeps_the_curves_of_those_only():
    config = load_config([ROOT / "config" / "imagenet9.yaml"])
    config["scope"]["extra"]["rebias_mnist/rebias"] = "a grid method kept on its own"
    resolved = resolve_config(config)
    assert list(resolved["grids"]["rebias_mnist"]["methods"]) == ["rebias"]
    assert resolved["grids"]["rebias_mnist"]["curves"]["methods"] == ["rebias"]
