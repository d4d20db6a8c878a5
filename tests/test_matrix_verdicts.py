"""The methods x benchmarks table's verdicts, like for like (issue 60): the baseline each row gets from the
declarations (`papers/matrix/contrasts.py`), the supervision column (`supervision.py`), the trade-off guard and
the Benjamini-Hochberg correction (`verdicts.py`, `core.statistics.benjamini_hochberg`, `Interval.p_value`),
each against rows written by hand and numbers computed by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from debias_workbench.core.statistics import RunValue, _t_interval, benjamini_hochberg, difference
from debias_workbench.papers.matrix import contrasts, figure, supervision, verdicts
from debias_workbench.papers.matrix.contrasts import NO_BASELINE, baselines, differences, run_training
from debias_workbench.papers.matrix.reference import is_reference
from debias_workbench.papers.matrix.tables import benchmarks, build_matrix, matrix_grids
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.report.helpers import read_rows
from debias_workbench.training.methods import REGISTRY as METHODS
from debias_workbench.training.methods import spec
from debias_workbench.workflow.config import deep_merge, resolve_config

from .conftest import ROOT
from .test_matrix import SEEDS, _reference_rows, _rows

#: the bias-free reference grids the matrix's expansion adds (papers/matrix/reference.py), as test_matrix's
REFERENCE_GRIDS = {
    "mx_cmnist_reference": {"dataset": "cmnist", "report": "matrix_reference", "train_variants": ["conflict_90"],
                            "methods": {"vanilla": {"method": "vanilla", "label": "ERM"}},
                            "reference_of": ["mx_cmnist"]},
    "mx_in9_reference": {"dataset": "in9", "report": "matrix_reference", "train_variants": ["mixed_rand_heldout"],
                         "methods": {"erm": {"method": "erm", "label": "ERM"}}, "reference_of": ["mx_in9"]},
}

SSL_TRAINING = {"epochs": 8, "small_cnn_channels": [8, 16, 32, 32]}
#: {(grid method, test set, metric): (value per seed, se per seed)} of Colored MNIST at 1 % conflicting
CMNIST = {
    ("vanilla", "unbiased", "accuracy"): ([40.0, 44.0, 42.5], [1.5, 1.6, 1.4]),
    ("lff", "unbiased", "accuracy"): ([61.0, 66.0, 63.0], [1.5, 1.5, 1.6]),
    ("moco", "unbiased", "accuracy"): ([30.0, 31.0, 29.0], [1.5, 1.5, 1.5]),
    ("moco_patch", "unbiased", "accuracy"): ([38.0, 40.0, 37.0], [1.5, 1.5, 1.5]),
    ("byol", "unbiased", "accuracy"): ([28.0, 30.0, 29.0], [1.5, 1.5, 1.5]),
    ("byol_patch", "unbiased", "accuracy"): ([28.5, 30.5, 29.0], [1.5, 1.5, 1.5]),
    ("hex_r18", "unbiased", "accuracy"): ([50.0, 52.0, 51.0], [1.5, 1.5, 1.5]),
    ("moco_patch_long", "unbiased", "accuracy"): ([45.0, 47.0, 46.0], [1.5, 1.5, 1.5]),
}


def _methods() -> dict:
    return {
        "vanilla": {"method": "vanilla", "label": "ERM"},
        "lff": {"method": "lff", "label": "LfF"},
        "moco": {"method": "moco_v2", "label": "MoCo-v2", "method_args": {"queue_size": 704},
                 "training": SSL_TRAINING},
        "moco_patch": {"method": "moco_v2", "label": "MoCo-v2 + patch",
                       "method_args": {"queue_size": 704, "negative": "patch", "alpha": 2.0}, "training": SSL_TRAINING},
        "byol": {"method": "byol", "label": "BYOL", "training": SSL_TRAINING},
        "byol_patch": {"method": "byol", "label": "BYOL + patch", "method_args": {"negative": "patch", "alpha": 0.05},
                       "training": SSL_TRAINING},
        # another network than ERM's: no supervised baseline in the grid
        "hex_r18": {"method": "hex", "label": "HEX (ResNet-18)", "training": {"arch": "resnet18"}},
        # another budget than plain MoCo-v2's: no self-supervised baseline
        "moco_patch_long": {"method": "moco_v2", "label": "MoCo-v2 + patch, 9 epochs",
                            "method_args": {"queue_size": 704, "negative": "patch"},
                            "training": {**SSL_TRAINING, "epochs": 9}},
    }


def _config() -> dict:
    return {
        "training": {"arch": "small_cnn", "epochs": 12, "batch_size": 64},
        "datasets": {"cmnist": {"family": "colored_mnist"},
                     "in9": {"classes": [f"{i:02d}" for i in range(9)], "variants": ["original", "only_bg_t"]}},
        "grids": {
            "mx_cmnist": {"dataset": "cmnist", "report": "matrix", "train_variants": ["conflict_1"],
                          "methods": _methods()},
            **REFERENCE_GRIDS,
        },
    }


def _stored(tmp_path: Path, rows: list[dict]) -> list[dict]:
    """`rows` and the bias-free references' (their capability lines hold), as the report reads them."""
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + _reference_rows()))
    return read_rows([path])


def _values(table: dict, key: tuple) -> list[RunValue]:
    values, ses = table[key]
    return [RunValue(v, s, se) for s, v, se in zip(SEEDS, values, ses)]


def test_matrix_contrast_each_row_gets_from_the_declarations():
    """Supervised rows -> ERM; SSL + patch -> plain SSL of the same method and recipe; plain SSL and ERM are
    references; a row with another network (or budget) than every reference of its regime gets none."""
    config = _config()
    found = baselines(config, config["grids"]["mx_cmnist"])
    assert found["vanilla"].reference and found["moco"].reference and found["byol"].reference
    assert found["lff"].key == "vanilla" and found["lff"].text == "ERM"
    assert found["moco_patch"].key == "moco" and found["byol_patch"].key == "byol"
    assert found["hex_r18"].key is None and not found["hex_r18"].reference
    assert found["hex_r18"].text.startswith(NO_BASELINE) and "arch resnet18 vs small_cnn" in found["hex_r18"].text
    assert found["moco_patch_long"].key is None and "epochs 9 vs 8" in found["moco_patch_long"].text
    # plain MoCo-v2 with another queue is another recipe: MoCo-v2 + patch then has no baseline either
    config["grids"]["mx_cmnist"]["methods"]["moco"]["method_args"]["queue_size"] = 512
    assert baselines(config, config["grids"]["mx_cmnist"])["moco_patch"].key is None
    # and the supervised reference is the declared one: ERM's `reference` (ERM, and ReBias's Vanilla: ERM on F)
    assert {name for name in METHODS if is_reference(name)} == {"erm", "vanilla"}


def test_matrix_cells_are_differences_from_each_rows_own_baseline(tmp_path):
    rows = _stored(tmp_path, _rows("mx_cmnist", "conflict_1", CMNIST))
    matrix = build_matrix(_config(), rows)
    ssl = matrix.cells[("moco_patch", 0)]
    expected = difference(_values(CMNIST, ("moco_patch", "unbiased", "accuracy")),
                          _values(CMNIST, ("moco", "unbiased", "accuracy")))
    assert ssl.status == "compared" and ssl.baseline == "MoCo-v2"
    assert (ssl.interval.estimate, ssl.interval.low) == (pytest.approx(expected.estimate), pytest.approx(expected.low))
    assert ssl.text.startswith("better than MoCo-v2")
    assert matrix.cells[("moco", 0)].status == "reference" and matrix.cells[("moco", 0)].text.startswith("MoCo-v2 ")
    assert matrix.cells[("lff", 0)].baseline == "ERM"
    assert matrix.cells[("byol_patch", 0)].better is None  # +0.3 points: cannot tell
    assert matrix.cells[("hex_r18", 0)].status == "no baseline" and NO_BASELINE in matrix.cells[("hex_r18", 0)].text
    assert matrix.baselines["moco_patch"] == "MoCo-v2" and matrix.baselines["erm"] == "reference (supervised)"
    assert matrix.baselines["hex_r18"].startswith(NO_BASELINE)


def test_matrix_paper_config_compares_its_ssl_rows_with_plain_ssl_not_pretrained_erm(default_config):
    """config/matrix_paper.yaml: the SSL rows are from-scratch ResNet-50s, ERM ImageNet-pretrained (on IN-9, BAR)
    or a ResNet-18: the patch rows get plain SSL of their recipe, every supervised row ERM, no row goes without."""
    config = resolve_config(deep_merge(default_config,
                                       yaml.safe_load((ROOT / "config" / "matrix_paper.yaml").read_text())))
    for name, grid in matrix_grids(config).items():
        found = baselines(config, grid)
        for key, entry in grid["methods"].items():
            declared = spec(entry["method"])
            if found[key].reference:
                continue
            assert found[key].key is not None, (name, key, found[key].text)
            target = grid["methods"][found[key].key]
            assert spec(target["method"]).regime == declared.regime, (name, key)
            if declared.regime == "self-supervised":
                assert target["method"] == entry["method"] and target.get("method_args", {}).get("negative") is None
            else:
                assert is_reference(target["method"])
    for name in ("mx_in9", "mx_bar"):  # from scratch against ImageNet-pretrained ERM: never like for like
        grid = config["grids"][name]
        ssl, erm = (run_training(config, grid, grid["methods"][key]) for key in ("moco", "erm"))
        assert any(d.startswith("pretrained ") for d in differences(ssl, erm)), name


def test_matrix_supervision_column_comes_from_the_declarations(tmp_path, monkeypatch):
    """No bias labels for LfF; ReBias's G and CLAD's backgrounds with the family's own word on them; a committee
    voting on the val split says so, with what the split holds; a changed declaration changes the column."""
    fam_c, fam_b = get_family("colored_mnist"), get_family("biased_mnist")
    assert supervision.given("lff", {}, fam_c) == [] and supervision.short([]) == supervision.NOTHING
    assert supervision.given("lff_be", {"committee_vote": "last"}, fam_c) == []
    voted = supervision.long(supervision.given("intrinsic_feature_enhancement", {}, fam_c))  # default: best_valid
    assert "val split" in voted and fam_c.val_split in voted and "no bias labels" in voted
    rebias = supervision.given("rebias", {}, fam_b)
    assert rebias == [("biased network", fam_b.offers["biased_network"])]
    assert "oracle" in supervision.long(supervision.given("clad", {}, fam_b))  # exact stroke masks
    assert "texture" in supervision.short(supervision.given("hex", {}, fam_c))
    rows = _stored(tmp_path, _rows("mx_cmnist", "conflict_1", CMNIST))
    assert build_matrix(_config(), rows).given["lff"] == supervision.NOTHING
    # a declaration changed in the test: LfF needing a biased network, the family saying from what
    original = supervision.spec
    monkeypatch.setattr(supervision, "spec", lambda name: dataclasses.replace(original(name), needs=("biased_network",))
                        if name == "lff" else original(name))
    monkeypatch.setitem(type(fam_c).offers, "biased_network", "a stand-in G for the test")
    changed = build_matrix(_config(), rows)
    assert changed.given["lff"] == "biased network"
    assert changed.given_in_full["lff"] == {"colored_mnist": "biased network: a stand-in G for the test"}


#: IN-9 trained on ORIGINAL: LfF lowers the gap by giving up Mixed-Rand; CLAD lowers it and raises Mixed-Rand
IN9 = {
    ("erm", "mixed_same", "accuracy"): ([80.0, 82.0, 81.0], [1.0, 1.0, 1.0]),
    ("erm", "mixed_rand", "accuracy"): ([60.0, 63.0, 61.0], [1.0, 1.0, 1.0]),
    ("lff", "mixed_same", "accuracy"): ([42.0, 44.0, 41.0], [1.0, 1.0, 1.0]),
    ("lff", "mixed_rand", "accuracy"): ([39.0, 40.0, 38.5], [1.0, 1.0, 1.0]),
    ("clad", "mixed_same", "accuracy"): ([79.0, 80.5, 80.0], [1.0, 1.0, 1.0]),
    ("clad", "mixed_rand", "accuracy"): ([70.0, 71.0, 69.5], [1.0, 1.0, 1.0]),
}


def _in9_config() -> dict:
    methods = {"erm": {"method": "erm", "label": "ERM"}, "lff": {"method": "lff", "label": "LfF"},
               "clad": {"method": "clad", "label": "CLAD"}}
    config = _config()
    config["grids"] = {"mx_in9": {"dataset": "in9", "report": "matrix", "train_variants": ["original"],
                                  "methods": methods}, **REFERENCE_GRIDS}
    return config


def test_matrix_trade_off_guard_a_lower_bg_gap_with_a_worse_mixed_rand_is_not_better(tmp_path):
    config = _in9_config()
    gap = [b for b in benchmarks(config, matrix_grids(config)) if b.metric.trades_against is not None]
    assert [b.metric.column for b in gap] == ["bg_gap"] and gap[0].metric.trades_against.column == "mixed_rand"
    matrix = build_matrix(config, _stored(tmp_path, _rows("mx_in9", "original", IN9)))
    traded = matrix.cells[("lff", 0)]
    rand = matrix.cells[("lff", 1)]
    assert traded.interval.high < 0 and traded.effect > 0  # a much lower gap, its interval well below 0
    assert rand.better is False  # and a worse Mixed-Rand
    assert traded.better is None and traded.text.startswith("lower BG-GAP")
    assert f"at {rand.interval.estimate:+.1f} points Mixed-Rand accuracy: not better" in traded.text
    assert figure.cell_colour(traded, 1.0) == figure.FIXED["traded"]
    clad = matrix.cells[("clad", 0)]
    assert clad.better is True and clad.guard == "" and clad.text.startswith("better than ERM")
    # where the accuracy traded against was not measured the trade cannot be checked: not better either
    assert "cannot be checked" in verdicts.trade_off(gap[0].metric, clad.interval, None)
    assert verdicts.trade_off(gap[0].metric, clad.interval, matrix.cells[("clad", 1)].interval) == ""
    assert verdicts.trade_off(matrix.benchmarks[1].metric, clad.interval, None) == ""  # Mixed-Rand trades nothing


def test_matrix_generic_verdict_code_names_no_family_or_variant():
    for module in (contrasts, supervision, verdicts):
        code = Path(module.__file__).read_text()
        for name in ('"in9"', '"mixed_rand"', '"bg_gap"', '"original"', '"stylized"', '"vanilla"', '"erm"'):
            assert name not in code, (module.__name__, name)


def test_matrix_benjamini_hochberg_correction_against_a_hand_computation():
    """Benjamini-Hochberg (1995) on four p-values by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4/1, 4/2, 4/3,
    4/4 = 0.02, 0.02, 0.04, 0.04, then running minima from the largest."""
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([0.5, 0.2]) == pytest.approx([0.5, 0.4]) and benjamini_hochberg([]) == []
    # 0.3 x 3 = 0.9; 0.6 x 3/2 = 0.9; 0.9 x 3/3: all 0.9 (a step-up: a larger p-value can lift a smaller one's)
    assert benjamini_hochberg([0.3, 0.9, 0.6]) == pytest.approx([0.9, 0.9, 0.9])
    assert benjamini_hochberg([0.04, 0.01, 0.5]) == pytest.approx([0.06, 0.03, 0.5])  # 0.04 x 3/2; 0.01 x 3


#: per seed, no test-image error (se 0): each cell's p-value is the paired t test's, by hand
CORRECTED = {
    ("vanilla", "unbiased", "accuracy"): ([40.0, 44.0, 42.0], [0.0] * 3),
    ("lff", "unbiased", "accuracy"): ([60.0, 64.5, 61.0], [0.0] * 3),        # far above: survives the correction
    ("moco", "unbiased", "accuracy"): ([30.0, 31.0, 29.0], [0.0] * 3),
    ("moco_patch", "unbiased", "accuracy"): ([32.5, 35.5, 31.5], [0.0] * 3),  # p 0.042 alone; q 0.062
    ("byol", "unbiased", "accuracy"): ([28.0, 30.0, 29.0], [0.0] * 3),
    ("byol_patch", "unbiased", "accuracy"): ([27.0, 31.5, 29.5], [0.0] * 3),
}


def test_matrix_verdicts_use_the_correction_computed_by_hand(tmp_path):
    config = _config()
    config["grids"]["mx_cmnist"]["methods"] = {
        k: v for k, v in _methods().items() if k in {key for key, _, _ in CORRECTED}
    }
    matrix = build_matrix(config, _stored(tmp_path, _rows("mx_cmnist", "conflict_1", CORRECTED)))
    compared = {key: cell for (key, _), cell in matrix.cells.items() if cell.status == "compared"}
    pairs = {"lff": "vanilla", "moco_patch": "moco", "byol_patch": "byol"}
    assert set(compared) == set(pairs)
    p = {k: stats.ttest_rel(CORRECTED[(k, "unbiased", "accuracy")][0], CORRECTED[(b, "unbiased", "accuracy")][0]).pvalue
         for k, b in pairs.items()}
    order = sorted(p, key=p.get)  # step-up: from the largest p-value down, the running minimum of m p / rank
    hand, running = {}, 1.0
    for rank in range(len(order), 0, -1):
        running = min(running, len(order) * p[order[rank - 1]] / rank)
        hand[order[rank - 1]] = running
    for key, cell in compared.items():
        assert cell.interval.p_value == pytest.approx(p[key], rel=1e-6)
        assert cell.q_value == pytest.approx(hand[key], rel=1e-6)
        assert cell.better is (True if hand[key] < 0.05 else None), key
        assert f"BH q = {hand[key]:.2g} of 3 tests" in cell.text and "uncorrected: " in cell.text
    assert p["moco_patch"] < 0.05 <= hand["moco_patch"]  # the case the correction exists for
    assert compared["moco_patch"].text.startswith("cannot tell from MoCo-v2") and "uncorrected: higher" in \
        compared["moco_patch"].text
    assert compared["lff"].better is True


def test_matrix_p_value_is_the_level_at_which_the_interval_reaches_zero():
    """`Interval.p_value` from the interval's own statistic: the paired t test's with no test-image error,
    Welch's unpaired, and in general the level at which Banerjee's bound has 0 at its edge."""
    a, b = [61.0, 66.0, 63.0], [40.0, 44.0, 42.5]
    paired = difference([RunValue(v, s) for s, v in enumerate(a)], [RunValue(v, s) for s, v in enumerate(b)])
    assert paired.p_value == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    welch = difference([*a, 64.0], b)
    assert welch.p_value == pytest.approx(stats.ttest_ind([*a, 64.0], b, equal_var=False).pvalue, rel=1e-9)
    interval = _t_interval(5.0, 2.0, 2, 1.5, (3, 3), True)
    p = interval.p_value
    q = 1 - p / 2
    half = math.sqrt(stats.t.ppf(q, 2) ** 2 * 2.0 + stats.norm.ppf(q) ** 2 * 1.5)
    assert half == pytest.approx(5.0, rel=1e-6)
    rng = np.random.default_rng(0)
    for _ in range(200):
        x, y = rng.normal(0, 1, 3), rng.normal(0.8, 1, 3)
        iv = difference([RunValue(v, s, 0.5) for s, v in enumerate(x)], [RunValue(v, s, 0.4) for s, v in enumerate(y)])
        assert (iv.p_value < 0.05) == (iv.verdict != "cannot tell")
    assert difference([1.0], [2.0, 3.0]).p_value == 1.0  # one seed on a side: no evidence
