"""A dataset family owns the config checks of its section and of the runs on it (issue 62): the generic check
(`workflow.evaluated_checks`) asks each registered family (`DatasetFamily.section_problems`,
`train_variant_problem`, `aligned_variant_problem`, `train_photos`) and names no family's setting itself."""

from __future__ import annotations

import copy

import pytest
import yaml

from debias_workbench.pipeline.datasets import REGISTRY
from debias_workbench.pipeline.datasets.conflict_ratio import ConflictRatioFamily
from debias_workbench.workflow.config import ConfigError, validate_config
from debias_workbench.workflow.evaluated_checks import evaluated_experiment_problems, section_problems

from .conftest import ROOT


@pytest.fixture
def config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_in9_refuses_variants_cut_along_a_foreground_it_does_not_segment(config):
    bad = copy.deepcopy(config)
    bad["datasets"]["in9"]["segmentation"]["method"] = "none"
    with pytest.raises(ConfigError, match=r"datasets\.in9\.variants: \[.*'mixed_rand'.*\] are made from the "
                                          r"foreground mask, which `segmentation.method: none` does not compute"):
        validate_config(bad)


def test_in9_refuses_a_style_pairing_method_on_flat_styles(config):
    bad = copy.deepcopy(config)
    bad["datasets"]["in9"]["stylized"]["styles"].update(kind="flat", root=str(ROOT))
    with pytest.raises(ConfigError, match=r"experiments\.s_clad: method 's_clad' pairs images by their style's class, "
                                          r"and the flat styles of datasets\.in9\.stylized have none; use styles of "
                                          "kind folder"):
        validate_config(bad)


class _PickyFamily(ConflictRatioFamily):
    """A family registered by a test: its section, its train variants and its aligned stores each have a rule."""

    name = "picky"

    def section_problems(self, ds_cfg, where, variants):
        return [f"{where}: picky about {variants}"]

    def train_variant_problem(self, ds_cfg, variant):
        return "is picky's test set" if variant == "unbiased" else ""

    def aligned_variant_problem(self, ds_cfg, where, variant):
        return f"reads {variant}, which {where} cannot pair"


def test_the_generic_checks_ask_a_registered_familys_own_rules(config, monkeypatch):
    """A family the generic layer has never heard of gets its checks run: they come from its class."""
    monkeypatch.setitem(REGISTRY, "picky", "tests.test_family_checks:_PickyFamily")  # its one registry line
    cfg = copy.deepcopy(config)
    cfg["datasets"] = {"p": {"family": "picky", "conflict_percents": [5]}}
    cfg["experiments"] = {"run": {"method": "s_clad", "dataset": "p", "train_variant": "unbiased", "label": "R"}}
    assert section_problems(cfg) == ["datasets.p: picky about ['conflict_5', 'unbiased']"]
    assert evaluated_experiment_problems(cfg) == [
        "experiments.run.train_variant: 'unbiased' is picky's test set",
        "experiments.run: method 's_clad' reads stylized, which datasets.p cannot pair",
    ]
