"""The methods x benchmarks table (issue 53, papers/matrix): applicability declared on both sides (a
method's `requires`, a family's `offers`), the table's cells against intervals computed by hand on rows
written by hand, and its heatmap written."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import replace
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
from debias_workbench.workflow.report_slice import report_config
from debias_workbench.workflow.slices import config_provenance

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
#: the bias-free references' accuracy on their held-out splits (chance 10 / 11.1 %, the line 20 points above)
REFERENCES = {
    ("mx_cmnist_reference", "conflict_90", "valid"): ([55.0, 57.0, 56.0], [2.0, 2.0, 2.0]),
    ("mx_in9_reference", "mixed_rand_heldout", "mixed_rand_heldout"): ([58.0, 61.0, 60.0], [2.3, 2.3, 2.3]),
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
            # what the matrix's expansion adds (papers/matrix/reference.py): ERM trained bias-free, per benchmark
            "mx_cmnist_reference": {"dataset": "cmnist", "report": "matrix_reference",
                                    "train_variants": ["conflict_90"], "methods": {"vanilla": methods["vanilla"]},
                                    "reference_of": ["mx_cmnist"]},
            "mx_in9_reference": {"dataset": "in9", "report": "matrix_reference",
                                 "train_variants": ["mixed_rand_heldout"],
                                 "methods": {"erm": {"method": "erm", "label": "ERM"}}, "reference_of": ["mx_in9"]},
        },
    }


def _reference_rows(table: dict = REFERENCES) -> list[dict]:
    return [
        {"kind": "eval", "grid": grid, "grid_method": "erm", "experiment": f"{grid}_erm_{variant}", "seed": seed,
         "train_variant": variant, "variant": test_set, "metric": "accuracy", "value": value, "se": se, "n": 400}
        for (grid, variant, test_set), (values, ses) in table.items()
        for seed, value, se in zip(SEEDS, values, ses)
    ]


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
    rows = _rows("mx_cmnist", "conflict_1", CMNIST) + _rows("mx_in9", "original", IN9) + _reference_rows()
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


def test_matrix_capability_line_is_the_bias_free_references_on_its_held_out_split(stored_rows):
    """The line is decided by ERM trained bias-free (the reference grid's runs on conflict_90 / mixed_rand_heldout),
    on its held-out split, not by the benchmark's ERM on the unbiased test set: the reference lowered to 20-24 %
    (below chance 10 + 20) makes both Colored MNIST numbers "not informative", ERM's reference cell stays, the IN-9
    benchmark (its reference at 59.7 %, line 31.1) is judged; the benchmark's own ERM rows do not move the line."""
    matrix = build_matrix(_config(), stored_rows)
    assert matrix.capable[0][0] and matrix.capable[1][0] and matrix.capable[2][0]
    line = matrix.capable[0][1]
    assert "ERM trained on conflict_90 (the bias balanced away)" in line and "val split" in line
    assert "learns the classes beyond their bias" in line and "cmnist conflict_1" in line and "56.0 ± 1.0" in line
    assert "mixed_rand_heldout" in matrix.capable[2][1] and "held out" in matrix.capable[2][1]
    low = [dict(r, value=r["value"] - 35.0) if r["grid"] == "mx_cmnist_reference" else r for r in stored_rows]
    failed = build_matrix(_config(), low)
    assert not failed.capable[0][0] and not failed.capable[1][0] and "not informative" in failed.capable[0][1]
    for column in (0, 1):  # both numbers of the benchmark
        cell = failed.cells[("lff", column)]
        assert cell.status == "not informative" and cell.text.startswith("not informative") and cell.better is None
        assert failed.cells[("erm", column)].status == "reference"
    assert failed.capable[2][0] and failed.cells[("clad", 2)].status == "compared"
    no_reference = [r for r in stored_rows if r["grid"] != "mx_in9_reference"]  # no runs: cannot tell
    assert {build_matrix(_config(), no_reference).cells[("clad", j)].status for j in (2, 3)} == {"not informative"}


def test_matrix_benchmark_whose_biased_erm_fails_the_unbiased_test_can_still_judge(stored_rows):
    """A strongly biased benchmark: ERM trained on it at 15-19 % on the unbiased test set (the old line, chance +
    20, would remove it) while the bias-free reference learns the classes: LfF's cells are judged, a verdict, and
    the line is the reference's, decided on a split disjoint from the test set the comparisons read."""
    biased = [dict(r, value=r["value"] - 25.0) if r["grid_method"] == "vanilla" and r["metric"] == "accuracy"
              and r["grid"] == "mx_cmnist" else r for r in stored_rows]
    matrix = build_matrix(_config(), biased)
    assert matrix.capable[0][0] and "ERM trained on conflict_90" in matrix.capable[0][1]
    lff = matrix.cells[("lff", 0)]
    assert lff.status == "compared" and lff.better is True and "better than ERM" in lff.text
    assert matrix.cells[("erm", 0)].text == "ERM reference: 17.2 ± 2.0"
    for (_, variant, test_set) in REFERENCES:  # the decision's split is no comparison's test set
        assert test_set not in {"unbiased", "mixed_rand", "mixed_same"} and variant not in ("conflict_1", "original")


def test_matrix_bias_free_variants_hold_out_rows_disjoint_from_the_test_sets():
    """Each family's bias-free reference: IN-9's held-out Mixed-Rand takes its val split from training rows only
    (a tenth of each class, by name) and is no other run's test set; Biased MNIST's is scored on its held-out
    training digits alone; Colored MNIST's spreads every class over every colour (conflict_90)."""
    from debias_workbench.pipeline.variants import held_out_count, heldout_splits

    assert [held_out_count(n) for n in (1, 2, 14, 50, 480)] == [0, 1, 1, 5, 48]  # a smoke run's 2 a class: one

    ids = np.array([f"train/{i:04d}" for i in range(200)] + [f"val/{i:04d}" for i in range(40)])
    labels = np.array([i % 4 for i in range(240)])
    splits = np.array(["train"] * 200 + ["val"] * 40)
    out = heldout_splits(splits, ids, labels, seed=0)
    assert set(out[200:]) == {""}  # the dataset's own val rows (the test images) are left out
    assert [int(((out == "val") & (labels == y)).sum()) for y in range(4)] == [5, 5, 5, 5]  # 10 % of 50 per class
    assert np.array_equal(out, heldout_splits(splits, ids[::-1][::-1], labels, seed=0))  # deterministic
    assert not np.array_equal(out, heldout_splits(splits, ids, labels, seed=1))  # seeded
    in9 = get_family("in9")
    ds = {"variants": ["original", "mixed_rand", "mixed_rand_heldout"]}
    ref = in9.bias_free_reference(ds, "original")
    assert (ref.variant, ref.test_set) == ("mixed_rand_heldout", "mixed_rand_heldout")
    assert "mixed_rand_heldout" not in in9.test_sets(ds, "original")
    assert in9.test_sets(ds, ref.variant) == {ref.test_set: ref.variant}
    bm = get_family("biased_mnist")
    ref = bm.bias_free_reference({}, "rho_0.9")
    assert bm.test_sets({}, ref.variant) == {"heldout": "unbiased_heldout"} and ref.test_set == "heldout"
    assert get_family("colored_mnist").bias_free_reference({}, "conflict_1").variant == "conflict_90"
    assert get_family("released_bias_folders").bias_free_reference({}, "conflict_1") is None


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
    with pytest.raises(ConfigError, match=r"grids\.rebias_mnist\.train_variants: the capability line of "
                                          r"biased_mnist rho_0\.3 is decided by ERM trained on unbiased_heldout "
                                          r".*unbiased_heldout: true"):
        validate_config(cfg)  # no bias-free reference built: named, with the setting that builds it
    cfg["datasets"]["biased_mnist"]["unbiased_heldout"] = True
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
#: rows the embedded matrix runs on some benchmarks only, by choice (its time): MoCo-v2's pair is not trained on
#: the background-biased IN-9 grid (config/matrix.yaml says why); its cells there read "not run"
SIDE_ROWS: dict[str, set[str]] = {"matrix.yaml": {"moco", "moco_patch"}, "matrix_paper.yaml": set()}


@pytest.mark.parametrize("name", MATRIX_CONFIGS)
def test_matrix_config_trains_every_method_on_every_benchmark_it_can_run_on(name, default_config):
    """config/matrix.yaml (the issue's study) and config/matrix_paper.yaml (the same at paper scale): at least 6
    methods x 4 (6) benchmarks, three seeds each; a method is in a benchmark's grid exactly where its family can
    serve it (but the side rows a config runs on some benchmarks only), so every cell is either trained or "cannot
    run" with its reason, never silently missing; a grid's runs are its own and its bias-free reference's."""
    config = resolve_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / name).read_text())))
    grids = matrix_grids(config)
    rows, columns = method_rows(grids), benchmarks(config, grids)
    assert len(rows) >= 6 and len({(b.grid, b.train_variant) for b in columns}) >= MATRIX_CONFIGS[name]
    for bench in columns:
        grid = grids[bench.grid]
        trained = {row_key(key, spec): spec.get("method_args", {}) for key, spec in grid["methods"].items()}
        for row, (method, _) in rows.items():
            ds_cfg = config["datasets"][bench.dataset]
            runs = applicability(method, bench.family, ds_cfg, bench.train_variant, bench.dataset, trained.get(row))[0]
            assert runs == (row in trained) or (runs and row in SIDE_ROWS[name]), (bench.grid, row)
        assert grid["seeds"] == [0, 1, 2] and bench.capability is not None
    own = set(grids) | {n for n, g in config["grids"].items() if set(g.get("reference_of", ())) & set(grids)}
    assert all(exp.get("grid") in own for exp in config["experiments"].values())  # the demo's runs dropped
    matrix = build_matrix(config, [])
    assert {c.status for c in matrix.cells.values()} == {"not run", "cannot run"}


@pytest.mark.parametrize("name", MATRIX_CONFIGS)
def test_matrix_from_the_report_jobs_config_slice_is_the_matrix_of_the_whole_config(name, default_config):
    """The report job reads its config slice (`report_slice.report_config`), not the resolved config: the matrix built
    from it has every cell, baseline and "given" text of the matrix of the whole config. The slice once kept
    only each grid method's name and label, so the embedded run's report read MoCo-v2 + patch as a plain
    reference, Colored MNIST's LfF+BE and Park et al. (voting `last`) as "cannot run", and both as given a
    validation vote."""
    config = resolve_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / name).read_text())))
    sliced = report_config(config, config_provenance(config, ["config/config.yaml", f"config/{name}"], {}))
    whole, report = build_matrix(config, []), build_matrix(sliced, [])
    assert report.cells == whole.cells and report.baselines == whole.baselines and report.given == whole.given
    faster = copy.deepcopy(config)
    faster["grids"]["mx_in9"].setdefault("training", {})["threads"] = 8  # speed only: the report is not rebuilt
    assert report_config(faster, sliced["provenance"]) == sliced
    assert whole.baselines[row_key("moco_patch", config["grids"]["mx_in9"]["methods"]["moco_patch"])] != (
        whole.baselines[row_key("moco", config["grids"]["mx_in9"]["methods"]["moco"])])


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
    assert set(grids) | {n for n, g in config["grids"].items() if g.get("reference_of")} == set(config["grids"])
    assert len(grids) >= 6
    ran = {**grids, **{n: g for n, g in config["grids"].items() if g.get("reference_of")}}  # and the references
    expected = {(f"{g}_{key}_{variant}", seed) for g, grid in ran.items() for key in grid["methods"]
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


#: {grid method: {step: (valid accuracy, unbiased accuracy)}} of seed 0 (seeds 1, 2: + 1, + 2 on both), step inf the
#: final evaluation: LfF's best validation point is step 200 (unbiased 60), Vanilla's step 100 (unbiased 45)
POINTS = {"lff": {100.0: (70.0, 65.0), 200.0: (80.0, 60.0), math.inf: (75.0, 63.0)},
          "vanilla": {100.0: (50.0, 45.0), 200.0: (48.0, 47.0), math.inf: (49.0, 44.0)}}


def _scoring_rows() -> list[dict]:
    rows = []
    for key, points in POINTS.items():
        for seed in SEEDS:
            tags = {"experiment": f"mx_cmnist_{key}_conflict_1", "seed": seed}
            for step, pair in points.items():
                for test_set, value in zip(("valid", "unbiased"), pair):
                    value += seed
                    if step == math.inf:
                        rows.append({"kind": "eval", **tags, "grid": "mx_cmnist", "grid_method": key,
                                     "train_variant": "conflict_1", "variant": test_set, "metric": "accuracy",
                                     "value": value, "se": 1.5, "n": 1000})
                    else:
                        rows.append({"kind": "curve", **tags, "step": step, "metric": f"{test_set}_accuracy",
                                     "value": value, "se": 1.5, "n": 1000})
    return rows


def test_matrix_paper_rule_selection_against_hand_picked_values():
    """The second table: LfF+BE (the grid key `lff` here) by its paper's rule made label-free (best validation
    accuracy: step 200, unbiased 60 / 61 / 62) against Vanilla by the same rule (step 100: 45 / 46 / 47), a
    difference of +15 points; the first table at the last iterate (63.. against 44..: +19); each rule named in the
    cell, ReBias's and LfF's code's rule the last epoch."""
    from debias_workbench.papers.matrix.selection import PAPER, paper_selections, selected_rows

    rows = _scoring_rows() + _reference_rows()
    config = _config()
    config["grids"]["mx_cmnist"]["methods"]["lff"] = {"method": "lff_be", "label": "LfF+BE",
                                                      "method_args": {"committee_vote": "last"}}
    last, paper = build_matrix(config, rows), build_matrix(config, rows, PAPER)
    assert last.cells[("lff", 0)].interval.estimate == pytest.approx(63.0 - 44.0)
    cell = paper.cells[("lff", 0)]
    assert cell.interval.estimate == pytest.approx(60.0 - 45.0)
    # the note says what the val split holds: Colored MNIST's is bias-balanced, more than the papers' splits told
    assert cell.text.startswith("paper rule validation on valid (colours independent of the digit")
    picked = selected_rows(rows, "mx_cmnist", "conflict_1", paper_selections(
        {"lff": ("lff_be", "LfF+BE")}, "colored_mnist", {}, "conflict_1")["lff"])
    unbiased = sorted((r["grid_method"], r["seed"], r["value"], r["step"]) for r in picked
                      if r["variant"] == "unbiased")
    assert unbiased == [("lff", s, 60.0 + s, 200.0) for s in SEEDS] + [("vanilla", s, 45.0 + s, 100.0) for s in SEEDS]
    assert paper.selection == PAPER and last.selection == "last"
    rules_cm = paper_selections({"lff": ("lff_be", "LfF+BE")}, "colored_mnist", {}, "conflict_1")
    rules = paper_selections({"rebias": ("rebias", "ReBias"), "lff": ("lff_be", "LfF+BE")}, "biased_mnist", {}, "rho_0.9")
    assert rules["rebias"].rule == "last" and rules["lff"].rule == "last" and "no validation split" in rules["lff"].note
    assert spec("rebias").paper_rule == "last" and "best_acc" in spec("rebias").selection["source"]
    from debias_workbench.papers.matrix.selection import for_metric

    shape = for_metric(picked_rule := rules_cm["lff"], get_family("in9").SHAPE_BIAS)  # counted at the end only
    assert picked_rule.rule == "validation" and shape.rule == "last" and "shape bias" in shape.note
    # the papers' own rule is the oracle (the best test accuracy), replaced by its nearest label-free rule; LfF's code
    # keeps the last step; IN-9 has no validation split apart from its test photos
    assert {spec(m).paper_rule for m in ("lff_be", "intrinsic_feature_enhancement")} == {"validation"}
    assert spec("lff").paper_rule == "last" and "oracle" in spec("lff_be").selection["source"]
    assert get_family("in9").validation_set({}, "original") is None
    # the summary: the paper-rule table adds only the cells it scores otherwise than the first (the last iterate)
    from debias_workbench.papers.matrix.summary import record
    from debias_workbench.report.document import Document

    doc = Document("t")
    record(doc, last)
    first = len(doc.verdicts)
    record(doc, paper)
    added = [v.comparison for v in doc.verdicts[first:]]
    assert added == ["LfF+BE vs ERM, cmnist conflict_1: unbiased accuracy ↑, by each paper's selection rule"]
    assert [key for key, c in paper.cells.items() if c.status == "compared"] == [("lff", 0)] and first == 1
    as_last = replace(paper, cells={**paper.cells, ("lff", 0): replace(paper.cells[("lff", 0)], rule="last")})
    record(doc, as_last)  # a cell of the second table scored at the last iterate: the first table's, not again
    assert len(doc.verdicts) == first + 1


def test_matrix_config_plans_the_reference_runs_and_the_paper_rules_scoring_points(default_config):
    """config/matrix.yaml: one bias-free reference grid per benchmark family recipe (the two IN-9 benchmarks share
    one), ERM of the grid's recipe on the family's bias-free variant, at the grids' five `reference_seeds` (the
    grids train three), which the datasets build; the
    scoring points only on the runs whose paper selects on validation and ERM beside them, on the sets they read."""
    from debias_workbench.workflow.lookup import dataset_variants

    config = resolve_config(deep_merge(default_config, yaml.safe_load((ROOT / "config" / "matrix.yaml").read_text())))
    references = {n: g for n, g in config["grids"].items() if g.get("reference_of")}
    assert {n: (g["train_variants"], g["reference_of"]) for n, g in references.items()} == {
        "mx_in9_reference": (["mixed_rand_heldout"], ["mx_in9", "mx_in9_bg"]),
        "mx_biased_mnist_reference": (["unbiased_heldout"], ["mx_biased_mnist"]),
        "mx_colored_mnist_reference": (["conflict_90"], ["mx_colored_mnist"]),
    }
    for name, grid in references.items():
        exp = config["experiments"][f"{name}_erm_{grid['train_variants'][0]}"]
        assert exp["method"] in ("erm", "vanilla") and exp["seeds"] == [0, 1, 2, 3, 4]
        assert grid["train_variants"][0] in dataset_variants(config, grid["dataset"])
        source = config["grids"][grid["reference_of"][0]]
        own_erm = config["experiments"][f"{grid['reference_of'][0]}_erm_{source['train_variants'][0]}"]
        assert own_erm["seeds"] == [0, 1, 2]  # the grid's own runs keep its seeds
        assert exp["training"]["epochs"] == source["training"]["epochs"]  # the benchmark's recipe
    assert config["grids"]["mx_biased_mnist"]["train_variants"] == ["rho_0.9"]
    monitored = {e for e, exp in config["experiments"].items() if "model_selection" in exp}
    assert {config["experiments"][e]["method"] for e in monitored} == {"vanilla", "lff_be",
                                                                      "intrinsic_feature_enhancement"}
    # no validation split apart from the test sets: Biased MNIST's is its biased test set, IN-9's the test photos
    assert {config["experiments"][e]["grid"] for e in monitored} == {"mx_colored_mnist"}
