"""The methods x benchmarks table (issue 53, papers/matrix): applicability declared on both sides (a
method's `requires`, a family's `offers`), the table's cells against intervals computed by hand on rows
written by hand, and its heatmap written."""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from PIL import Image
from scipy import stats

from debias_workbench.papers.matrix import sections
from debias_workbench.papers.matrix.tables import benchmarks, build_matrix, matrix_grids, method_rows, row_key
from debias_workbench.pipeline.datasets import REGISTRY as FAMILIES
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.report.document import Document
from debias_workbench.report.helpers import read_rows
from debias_workbench.training.applicability import applicability
from debias_workbench.training.methods import REGISTRY as METHODS
from debias_workbench.training.methods import spec
from debias_workbench.workflow.config import ConfigError, deep_merge, resolve_config, validate_config

from .conftest import ROOT

SEEDS = (0, 1, 2)
#: {(grid method, test set, metric): (value per seed, se per seed)} of Colored MNIST at 1 % conflicting
CMNIST = {
    ("vanilla", "unbiased", "accuracy"): ([40.0, 44.0, 42.5], [1.5, 1.6, 1.4]),
    ("lff", "unbiased", "accuracy"): ([61.0, 66.0, 63.0], [1.5, 1.5, 1.6]),
    ("vanilla", "unbiased", "conflicting_accuracy"): ([35.0, 39.0, 38.0], [1.7, 1.8, 1.6]),
    ("lff", "unbiased", "conflicting_accuracy"): ([36.0, 38.5, 40.0], [1.7, 1.7, 1.8]),
}
#: the same of IN-9 trained on ORIGINAL
IN9 = {
    ("erm", "mixed_same", "accuracy"): ([80.0, 82.0, 81.0], [1.8, 1.8, 1.9]),
    ("erm", "mixed_rand", "accuracy"): ([60.0, 63.0, 61.0], [2.2, 2.3, 2.2]),
    ("clad", "mixed_same", "accuracy"): ([79.0, 80.5, 80.0], [1.9, 1.8, 1.9]),
    ("clad", "mixed_rand", "accuracy"): ([70.0, 71.0, 69.5], [2.1, 2.1, 2.2]),
}


def _config() -> dict:
    methods = {
        "vanilla": {"method": "vanilla", "label": "ERM"},
        "lff": {"method": "lff", "label": "LfF"},
        "clad": {"method": "clad", "label": "CLAD"},
        "rebias": {"method": "rebias", "label": "ReBias"},
    }
    return {
        # in9 builds only_bg_t: CLAD reads it row-aligned with train variant original (training.applicability)
        "datasets": {"cmnist": {"family": "colored_mnist"},
                     "in9": {"classes": [f"{i:02d}" for i in range(9)], "variants": ["original", "only_bg_t"]}},
        "grids": {
            "mx_cmnist": {
                "dataset": "cmnist",
                "report": "matrix",
                "train_variants": ["conflict_1"],
                "methods": methods,
            },
            "mx_in9": {
                "dataset": "in9",
                "report": "matrix",
                "train_variants": ["original"],
                "methods": {"erm": {"method": "erm", "label": "ERM"}, "clad": {"method": "clad", "label": "CLAD"}},
            },
            "other": {"dataset": "cmnist", "report": "park", "train_variants": ["conflict_1"], "methods": methods},
        },
    }


def _rows(grid: str, variant: str, table: dict) -> list[dict]:
    return [
        {"kind": "eval", "grid": grid, "grid_method": key, "experiment": f"{grid}_{key}_{variant}", "seed": seed,
         "train_variant": variant, "variant": test_set, "metric": metric, "value": value, "se": se, "n": 1000}
        for (key, test_set, metric), (values, ses) in table.items()
        for seed, value, se in zip(SEEDS, values, ses)
    ]


@pytest.fixture
def stored_rows(tmp_path) -> list[dict]:
    """The rows above, as a run's eval.jsonl stores them, read back as the report reads them."""
    path = tmp_path / "eval.jsonl"
    rows = _rows("mx_cmnist", "conflict_1", CMNIST) + _rows("mx_in9", "original", IN9)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return read_rows([path])


def _hand_interval(a: list[float], se_a: list[float], b: list[float], se_b: list[float]) -> tuple[float, float, float]:
    """mean(a) - mean(b) paired over 3 seeds: t(2) on the per-seed differences, the runs' test-image errors
    added as independent (normal), combined by Banerjee's bound (core.statistics)."""
    d = np.array(a) - np.array(b)
    seed_var = d.var(ddof=1) / len(d)
    image_var = np.mean(se_a) ** 2 + np.mean(se_b) ** 2
    half = math.sqrt(stats.t.ppf(0.975, len(d) - 1) ** 2 * seed_var + stats.norm.ppf(0.975) ** 2 * image_var)
    return d.mean(), d.mean() - half, d.mean() + half


def test_matrix_applicability_refuses_a_method_needing_backgrounds_on_a_family_without_them():
    ok, reason = applicability("clad", "colored_mnist")
    assert not ok and "clad" in reason and "colored_mnist" in reason and "only_bg_t" in reason
    assert applicability("clad", "in9") == (True, "")
    ok, reason = applicability("moco_v2_texture", "waterbirds")  # no texture copy of each image
    assert not ok and "moco_v2_texture" in reason and "waterbirds" in reason and "texture" in reason
    ok, reason = applicability("rebias", "bg_challenge")  # the released test images: no G declared
    assert not ok and "rebias" in reason and "bg_challenge" in reason and "biased_network" in reason
    assert applicability("rebias", "biased_mnist") == (True, "") and applicability("rebias", "waterbirds")[0]
    assert applicability("s_clad", "released_bias_folders")[0] is False
    assert applicability("lff", "released_bias_folders") == (True, "")


def test_matrix_every_capability_a_method_requires_is_offered_by_some_family():
    """A typo in a method's `needs` (or a variant no family builds aligned) would refuse it everywhere."""
    offered = {c for name in FAMILIES for c in get_family(name).offers}
    for name in METHODS:
        assert set(spec(name).requires) <= offered, (name, spec(name).requires)
    assert spec("clad").requires == ("only_bg_t",) and spec("rebias").requires == ("biased_network",)


def test_matrix_cells_match_intervals_computed_by_hand_on_stored_rows(stored_rows):
    matrix = build_matrix(_config(), stored_rows)
    titles = [b.title for b in matrix.benchmarks]
    assert titles == [
        "cmnist conflict_1: unbiased accuracy ↑",
        "cmnist conflict_1: bias-conflicting accuracy ↑",
        "in9 original: BG-GAP (Mixed-Same − Mixed-Rand) ↓",
        "in9 original: Mixed-Rand accuracy ↑",
    ]
    assert list(matrix.methods) == ["erm", "lff", "clad", "rebias"]  # ERM's row whatever its key; no park grid
    lff = matrix.cells[("lff", 0)]
    estimate, low, high = _hand_interval(*CMNIST[("lff", "unbiased", "accuracy")],
                                         *CMNIST[("vanilla", "unbiased", "accuracy")])
    assert lff.interval.estimate == pytest.approx(estimate)
    assert (lff.interval.low, lff.interval.high) == (pytest.approx(low), pytest.approx(high))
    assert lff.better is True and f"{low:+.1f} to {high:+.1f}" in lff.text and "better than ERM" in lff.text
    conflicting = matrix.cells[("lff", 1)]
    _, low, high = _hand_interval(*CMNIST[("lff", "unbiased", "conflicting_accuracy")],
                                  *CMNIST[("vanilla", "unbiased", "conflicting_accuracy")])
    assert low < 0 < high and conflicting.better is None and conflicting.text.startswith("cannot tell")
    assert (conflicting.interval.low, conflicting.interval.high) == (pytest.approx(low), pytest.approx(high))
    assert matrix.cells[("erm", 0)].text == "ERM reference: 42.2 ± 2.0"
    assert matrix.cells[("rebias", 0)].text == "not run"  # it can run on Colored MNIST, has no rows
    assert matrix.cells[("clad", 0)].status == "cannot run"
    assert "clad" in matrix.cells[("clad", 0)].text and "colored_mnist" in matrix.cells[("clad", 0)].text


def test_matrix_bg_gap_cell_is_the_per_seed_gap_against_erms_lower_better(stored_rows):
    matrix = build_matrix(_config(), stored_rows)

    def gap(key: str) -> tuple[list[float], list[float]]:
        (same, se_same), (rand, se_rand) = IN9[(key, "mixed_same", "accuracy")], IN9[(key, "mixed_rand", "accuracy")]
        return list(np.subtract(same, rand)), list(np.hypot(se_same, se_rand))

    estimate, low, high = _hand_interval(*gap("clad"), *gap("erm"))
    cell = matrix.cells[("clad", 2)]
    assert cell.interval.estimate == pytest.approx(estimate) and high < 0  # a smaller gap: better
    assert (cell.interval.low, cell.interval.high) == (pytest.approx(low), pytest.approx(high))
    assert cell.better is True and cell.effect == pytest.approx(-estimate) and "better than ERM" in cell.text
    assert matrix.cells[("lff", 2)].text == "not run"  # not in the IN-9 grid
    assert matrix.cells[("erm", 2)].text.startswith("ERM reference: ")  # the IN-9 grid's `erm`, the same row


def test_matrix_benchmark_whose_erm_fails_its_capability_line_reads_not_informative(stored_rows):
    """Colored MNIST's ERM at 40-44 % on the unbiased test set clears the line (chance 10 + 20); lowered to
    25-29 % it fails: every compared cell of that benchmark (both its numbers) reads "not informative",
    ERM's reference stays, the IN-9 benchmark (ERM's Mixed-Rand 61.3 %, line 31.1) is judged."""
    matrix = build_matrix(_config(), stored_rows)
    assert matrix.capable[0][0] and matrix.capable[1][0] and matrix.capable[2][0]
    line = matrix.capable[0][1]
    assert "learns the classes beyond their bias" in line and "cmnist conflict_1" in line
    low = [dict(r, value=r["value"] - 15.0) if r["grid_method"] == "vanilla" and r["metric"] == "accuracy"
           else r for r in stored_rows]
    failed = build_matrix(_config(), low)
    assert not failed.capable[0][0] and not failed.capable[1][0] and "not informative" in failed.capable[0][1]
    for column in (0, 1):  # both numbers of the benchmark
        cell = failed.cells[("lff", column)]
        assert cell.status == "not informative" and cell.text.startswith("not informative") and cell.better is None
        assert failed.cells[("erm", column)].status == "reference"
    assert failed.capable[2][0] and failed.cells[("clad", 2)].status == "compared"
    near_chance = [dict(r, value=r["value"] - 45.0) if r["grid_method"] == "erm" and r["variant"] == "mixed_rand"
                   else r for r in stored_rows]  # IN-9's ERM at 15-18 % on Mixed-Rand: below the line
    assert {build_matrix(_config(), near_chance).cells[("clad", j)].status for j in (2, 3)} == {"not informative"}


def test_matrix_section_writes_the_table_and_the_heatmap(stored_rows, tmp_path):
    doc, out = Document("t"), tmp_path / "report"
    out.mkdir()
    sections.matrix(doc, SimpleNamespace(config=_config(), all_rows=stored_rows, out_dir=out))
    md = doc.markdown()
    assert "Every method on every benchmark" in md and "cannot run: method 'clad' needs only_bg_t" in md
    png = out / sections.FIGURE
    assert png.stat().st_size > 0 and f"]({sections.FIGURE})" in md
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100
    assert not list(out.glob("*.tmp*"))  # written atomically: no temporary file left


def test_matrix_section_writes_nothing_without_a_matrix_grid(stored_rows, tmp_path):
    config = _config()
    config["grids"] = {"other": config["grids"]["other"]}
    doc = Document("t")
    sections.matrix(doc, SimpleNamespace(config=config, all_rows=stored_rows, out_dir=tmp_path))
    assert doc.blocks == [] and not list(tmp_path.glob("*.png"))


def test_matrix_grid_report_kind_passes_the_config_check(default_config):
    """`report: matrix` is a grid report kind the config check takes (papers/matrix/workflow.py)."""
    cfg = copy.deepcopy(default_config)
    cfg["grids"]["rebias_mnist"]["report"] = "matrix"
    validate_config(cfg)


def test_matrix_config_check_refuses_a_method_its_grids_family_cannot_serve(default_config):
    """The applicability the table shows is also what the config check holds: CLAD in a Colored MNIST grid is
    refused before any job runs, the message naming the grid's key, the method, the family and the need."""
    cfg = copy.deepcopy(default_config)
    cfg["grids"]["park_cmnist"]["methods"]["clad"] = {"method": "clad", "label": "CLAD"}
    with pytest.raises(ConfigError, match=r"grids\.park_cmnist\.methods\.clad\.method: method 'clad' needs only_bg_t, "
                                          r"which dataset family 'colored_mnist' does not offer"):
        validate_config(cfg)


#: the two matrix configs (issue 53): the embedded data on CPU, and each benchmark at its paper's recipe
MATRIX_CONFIGS = {"matrix.yaml": 4, "matrix_paper.yaml": 6}   # {config: at least so many benchmarks}


@pytest.mark.parametrize("name", MATRIX_CONFIGS)
def test_matrix_config_trains_every_method_on_every_benchmark_it_can_run_on(name, default_config):
    """config/matrix.yaml (the issue's study) and config/matrix_paper.yaml (the same at paper scale): at least 6
    methods x 4 (6) benchmarks, three seeds each; a method is in a benchmark's grid exactly where its family can
    serve it, so every cell is either trained or "cannot run" with its reason, never silently missing."""
    config = resolve_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / name).read_text())))
    grids = matrix_grids(config)
    rows, columns = method_rows(grids), benchmarks(config, grids)
    assert len(rows) >= 6 and len({(b.grid, b.train_variant) for b in columns}) >= MATRIX_CONFIGS[name]
    for bench in columns:
        grid = grids[bench.grid]
        trained = {row_key(key, spec) for key, spec in grid["methods"].items()}
        for row, (method, _) in rows.items():
            ds_cfg = config["datasets"][bench.dataset]
            runs = applicability(method, bench.family, ds_cfg, bench.train_variant, bench.dataset)[0]
            assert runs == (row in trained), (bench.grid, row)
        assert grid["seeds"] == [0, 1, 2] and bench.capability is not None
    assert all(exp.get("grid") in grids for exp in config["experiments"].values())  # the demo's runs dropped
    matrix = build_matrix(config, [])
    assert {c.status for c in matrix.cells.values()} == {"not run", "cannot run"}


def _matrix_paper_standins(standins: dict) -> dict:
    """tests/standins.py's paths (written for the paper configs) for config/matrix_paper.yaml: its datasets'
    sections as they are (the same names and keys), the pretrained weights moved to the grids that name them
    (a grid never inherits the top-level `training.pretrained`)."""
    config = yaml.safe_load((ROOT / "config" / "matrix_paper.yaml").read_text())
    return {
        "smoke": True,
        "datasets": {k: v for k, v in standins["datasets"].items() if k in config["datasets"]},
        "grids": {"mx_in9": {"training": standins["training"]},
                  "mx_bar": {"training": standins["grids"]["park_bar"]["training"]}},
    }


def test_matrix_paper_config_plans_every_grid_and_dry_runs_on_standins(tmp_path):
    """config/matrix_paper.yaml: `workbench plan` costs every run of every matrix grid (its user paths still to
    fill listed, not fatal), and with tests/standins.py's stand-in files at its FILL ME keys Snakemake plans it
    to its report (its user-path check, config check and job graph)."""
    from debias_workbench.workflow.plan import plan

    from .standins import write_paper_paths
    from .test_workflow import planned, snakemake

    config_file = ROOT / "config" / "matrix_paper.yaml"
    p = plan([config_file])
    config = resolve_config(deep_merge(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
                                       yaml.safe_load(config_file.read_text())))
    grids = matrix_grids(config)
    assert set(grids) == set(config["grids"]) and len(grids) >= 6
    expected = {(f"{g}_{key}_{variant}", seed) for g, grid in grids.items() for key in grid["methods"]
                for variant in grid["train_variants"] for seed in grid["seeds"]}
    costed = {(line.experiment, line.seed) for line in p.runs}
    assert costed == expected
    assert all(line.estimate.gpu_seconds > 0 for line in p.runs)
    assert any(m.startswith("grids.mx_in9.training.pretrained:") for m in p.missing)   # the user's files, listed

    standins = yaml.safe_load(write_paper_paths(tmp_path / "files", None).read_text())
    paths = tmp_path / "paths.yaml"
    paths.write_text(yaml.safe_dump(_matrix_paper_standins(standins)))
    out = snakemake("-n", "all", "--cores", "32", "--configfile", str(config_file), str(paths),
                    "--config", f"results={tmp_path / 'results'}")
    jobs = planned(out)
    assert jobs["report"] == 1 and jobs["all"] == 1
    assert sum(n for rule, n in jobs.items() if rule.startswith("train")) > 0
    assert "analysis_saliency" not in jobs  # no saliency experiment is kept: no job that would map none


@pytest.mark.parametrize("typo", ["curves", "sweep", "analysis"])
def test_matrix_a_scoped_config_still_refuses_a_name_that_names_nothing(default_config, typo):
    """A tables-only config (config/matrix.yaml, the paper configs) is cross-checked once scoped; a curve
    method, sweep experiment or analysed experiment that names nothing must still be refused, not scoped away."""
    own = yaml.safe_load((ROOT / "config" / "biased_mnist_paper.yaml").read_text())
    config = deep_merge(default_config, own)
    if typo == "curves":
        config["grids"]["rebias_mnist"]["curves"]["methods"] = ["vanilla", "rebais"]
        match = r"grids\.rebias_mnist\.curves\.methods: \['rebais'\]"
    elif typo == "sweep":
        config["sweeps"] = {"lambda": {"experiment": "cald", "arg": "lambda", "values": [1.0]}}
        match = r"sweeps\.lambda\.experiment: 'cald'"
    else:
        config["analyses"]["saliency"]["experiments"] = ["base_in9", "bsae_mr"]
        match = r"analyses\.saliency\.experiments: 'bsae_mr'"
    with pytest.raises(ConfigError, match=match):
        resolve_config(config)
