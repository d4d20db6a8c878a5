"""A dataset family plugs in (docs/architecture.md, "Add a dataset family"): a toy family outside the package,
its module and its config section beside it (tests/toy_family/) and one registry line here, reaches the
config check, its generated stores, a trained run scored on its test sets and `workbench plan`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
import zarr

from debias_workbench.pipeline import datasets
from debias_workbench.workflow import config as config_module
from debias_workbench.workflow import protocol, schema, user_paths

from .toy_family.stripes import BIASED, UNBIASED, StripesFamily

#: the toy dataset's section: two classes of 8 images a split, 8 px
SECTION = {"family": StripesFamily.name, "images_per_class": 8, "conflict_percent": 25, "image_size": 8,
           "chunk_images": 64}
#: one tiny ERM run on it: a few CPU steps
EXPERIMENT = {"method": "erm", "dataset": "toy", "train_variant": BIASED, "label": "Toy ERM", "seeds": [0],
              "training": {"arch": "small_cnn", "small_cnn_channels": [4, 4], "epochs": 2, "batch_size": 4}}
#: what a process builds once from the registered families (the merged schema, its validators, the code rules)
REGISTRY_CACHES = (schema._load, config_module._validator, user_paths._unread_validator, user_paths._validator,
                   protocol.code_rules)


@pytest.fixture
def toy_family(monkeypatch) -> Iterator[str]:
    """The family's one registry line; the schema and what is built from it are read anew with it, and after."""
    monkeypatch.setitem(datasets.REGISTRY, StripesFamily.name, "tests.toy_family.stripes:StripesFamily")
    for cached in REGISTRY_CACHES:
        cached.cache_clear()
    yield StripesFamily.name
    for cached in REGISTRY_CACHES:
        cached.cache_clear()


def _toy_config(tmp_path: Path, **experiment) -> Path:
    path = tmp_path / "toy.yaml"
    toy = {"datasets": {"toy": SECTION}, "experiments": {"toy_erm": {**EXPERIMENT, **experiment}}}
    path.write_text(yaml.safe_dump(toy))
    return path


def _report(tmp_path: Path, config: dict, rows: list[dict]) -> str:
    """The report's table of the runs scored on the toy dataset, built from `rows` (a run's eval.jsonl) and the
    inputs of tests/test_paper_units.py (the demo's main tables)."""
    from debias_workbench.report.build import build_report
    from debias_workbench.report.context import ReportInputs

    from .test_paper_units import _inputs

    sliced, metrics, quality, stores = _inputs(tmp_path, config)
    (tmp_path / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_report(ReportInputs(sliced, [*metrics, tmp_path / "toy.jsonl"], quality, [], stores), tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    table = md[md.index("## Runs scored on `toy`: accuracy (%)") :]
    return table[: table.index("\n## ")]


def _accuracy(rows: list[dict], test_set: str) -> float:
    return next(r["value"] for r in rows if r["variant"] == test_set and r["metric"] == "accuracy")


def test_the_config_check_reads_a_registered_familys_section_and_rules(toy_family, tmp_path):
    """Its section's schema (`stripes.yaml`, merged into the workflow's) accepts the toy section and refuses a bad
    value by its key; its `train_variant_problem` refuses training on its test set; the configuration reference
    (docs/configuration.md, `workbench config-reference`) lists each key of its section; a warm job server imports
    its module up front (`family_modules`)."""
    from debias_workbench.workflow.config import ConfigError, resolve_config
    from debias_workbench.workflow.plan import load_config

    config = resolve_config(load_config([_toy_config(tmp_path)]))
    assert config["datasets"]["toy"]["family"] == toy_family and "toy_erm" in config["experiments"]
    bad = load_config([_toy_config(tmp_path)])
    bad["datasets"]["toy"]["conflict_percent"] = 150
    with pytest.raises(ConfigError, match=r"datasets\.toy\.conflict_percent: 150 is greater than the maximum of 100"):
        resolve_config(bad)
    with pytest.raises(ConfigError, match=r"experiments\.toy_erm\.train_variant: 'unbiased' holds a val split only"):
        resolve_config(load_config([_toy_config(tmp_path, train_variant=UNBIASED)]))
    assert "tests.toy_family.stripes" in datasets.family_modules()
    from debias_workbench.workflow.reference import reference_markdown

    listed = reference_markdown()
    assert all(f"| `datasets.<{toy_family} dataset>.{key}` |" in listed for key in SECTION)


def test_a_toy_family_reaches_its_stores_a_trained_run_its_scores_and_the_plan(toy_family, tmp_path):
    """`workbench generate variant` builds each store (fingerprinted: `workbench verify`), a run trains on its
    train variant and is scored on the test sets the family declares, with the group metrics it asks for, and
    the report shows its run in a table of the dataset's own (`headline`, `column_titles`), and `workbench plan`
    lists its generation, training and scoring jobs, each costed."""
    from debias_workbench.cli import main as workbench
    from debias_workbench.training.evaluation import evaluate_run
    from debias_workbench.training.trainer import train
    from debias_workbench.workflow.config import resolve_config, scoring
    from debias_workbench.workflow.lookup import dataset_variants
    from debias_workbench.workflow.plan import load_config, plan
    from debias_workbench.workflow.slices import dataset_job_config, run_config, scoring_config

    toy = _toy_config(tmp_path)
    config = resolve_config(load_config([toy]))
    stores = {}
    for variant in dataset_variants(config, "toy"):
        job = tmp_path / f"{variant}.json"
        job.write_text(json.dumps(dataset_job_config(config, "toy", variant)))
        stores[variant] = tmp_path / "datasets" / "toy" / f"{variant}.zarr"
        command = ["generate", "variant", "--family", toy_family, "--config", str(job), "--variant", variant]
        assert workbench([*command, "--out", str(stores[variant])]) == 0
    assert sorted(stores) == [BIASED, UNBIASED] and workbench(["verify", *map(str, stores.values())]) == 0
    train_split = zarr.open_group(str(stores[BIASED]), mode="r")["train"]
    labels, colours = train_split["labels"][:], train_split["bias_labels"][:]
    assert np.bincount(labels).tolist() == [8, 8] and [int((colours[labels == y] != y).sum()) for y in (0, 1)] == [2, 2]

    model = train(run_config(config, "toy_erm", 0), stores[BIASED], tmp_path / "run")
    dataset, sets, groups = scoring(config, "toy_erm")
    assert (dataset, sets, groups) == ("toy", {"valid": BIASED, UNBIASED: UNBIASED}, True)
    rows = evaluate_run(model, scoring_config(config, "toy_erm"), {name: stores[v] for name, v in sets.items()})
    scored = {(r["variant"], r["metric"]): r["n"] for r in rows}
    assert scored[("valid", "accuracy")] == scored[(UNBIASED, "accuracy")] == 16
    assert scored[(UNBIASED, "conflicting_accuracy")] == 8  # half of each class wears the other's colour
    assert {r["dataset"] for r in rows} == {"toy"} and {r["experiment"] for r in rows} == {"toy_erm"}
    report = _report(tmp_path, load_config([toy]), rows)  # its table: the columns the family's `headline` titles
    assert "| Model | Unbiased ↑ |" in report and f"| Toy ERM | {_accuracy(rows, UNBIASED):.1f} |" in report

    jobs = plan([toy]).jobs
    generation = [j for j in jobs if j.rule == "dataset_variant" and j.target.startswith("toy/")]
    assert sorted(j.target for j in generation) == ["toy/biased", "toy/unbiased"]
    training = [j for j in jobs if j.rule.startswith("train") and j.target == "toy_erm seed 0"]
    scoring_jobs = [j for j in jobs if j.rule.startswith("evaluate") and j.target == "toy_erm"]
    assert len(training) == len(scoring_jobs) == 1
    assert all(j.estimate_minutes > 0 for j in generation + training + scoring_jobs)


#: {(grid method, test set, metric): (value per seed, se per seed)} of the toy benchmark (chance 50 %, the line 70 %)
TOY_BENCHMARK = {
    ("vanilla", UNBIASED, "accuracy"): ([80.0, 82.0, 81.0], [1.5, 1.5, 1.5]),
    ("lff", UNBIASED, "accuracy"): ([90.0, 93.0, 91.0], [1.2, 1.1, 1.2]),
    ("vanilla", UNBIASED, "conflicting_accuracy"): ([62.0, 66.0, 64.0], [2.0, 2.0, 2.0]),
    ("lff", UNBIASED, "conflicting_accuracy"): ([64.0, 65.0, 67.0], [2.0, 2.0, 2.0]),
}
#: the toy benchmark's grid (docs/matrix.md: one grid per benchmark, `report: matrix`)
TOY_GRID = {"dataset": "toy", "report": "matrix", "train_variants": [BIASED], "seeds": [0, 1, 2],
            "methods": {"vanilla": {"method": "vanilla", "label": "ERM"}, "lff": {"method": "lff", "label": "LfF"},
                        "rebias": {"method": "rebias", "label": "ReBias"}}}


def test_a_toy_familys_benchmark_reaches_the_methods_x_benchmarks_table(toy_family, tmp_path):
    """A benchmark (a column of papers/matrix) is a `report: matrix` grid on a family's dataset: the toy family's
    `benchmark_metrics` make its columns, its `capability_check` and `class_count` its capability line (it declares
    no bias-free variant), its `offers` what ReBias is given there and which methods cannot run (the config check
    refuses CLAD in its grid); each cell against an interval computed by hand, and the section's table names it."""
    from debias_workbench.papers.matrix import sections
    from debias_workbench.papers.matrix.tables import build_matrix
    from debias_workbench.report.document import Document
    from debias_workbench.report.helpers import read_rows
    from debias_workbench.workflow.config import ConfigError, resolve_config
    from debias_workbench.workflow.plan import load_config

    from .test_matrix import _hand_interval, _rows

    path = tmp_path / "toy_matrix.yaml"
    path.write_text(yaml.safe_dump({"datasets": {"toy": SECTION}, "grids": {"mx_toy": TOY_GRID}}))
    config = resolve_config(load_config([path]))
    clad = load_config([path])
    clad["grids"]["mx_toy"]["methods"]["clad"] = {"method": "clad", "label": "CLAD"}
    with pytest.raises(ConfigError, match=r"grids\.mx_toy\.methods\.clad\.method: method 'clad' needs only_bg_t, "
                                          r"which dataset family 'toy_stripes' does not offer"):
        resolve_config(clad)

    stored = tmp_path / "eval.jsonl"
    stored.write_text("".join(json.dumps(r) + "\n" for r in _rows("mx_toy", BIASED, TOY_BENCHMARK)))
    rows = read_rows([stored])
    matrix = build_matrix(config, rows)
    assert [b.title for b in matrix.benchmarks] == ["toy biased: unbiased accuracy ↑",
                                                    "toy biased: bias-conflicting accuracy ↑"]
    assert {b.family for b in matrix.benchmarks} == {toy_family} and list(matrix.methods) == ["erm", "lff", "rebias"]
    ok, line = matrix.capable[0]
    assert ok and "toy biased (no bias-free variant" in line and "learns the stripes' direction" in line
    estimate, low, high = _hand_interval(*TOY_BENCHMARK[("lff", UNBIASED, "accuracy")],
                                         *TOY_BENCHMARK[("vanilla", UNBIASED, "accuracy")])
    lff = matrix.cells[("lff", 0)]
    assert lff.interval.estimate == pytest.approx(estimate) and low > 0 and lff.better is True
    assert (lff.interval.low, lff.interval.high) == (pytest.approx(low), pytest.approx(high))
    assert matrix.cells[("lff", 1)].text.startswith("cannot tell") and matrix.cells[("erm", 0)].status == "reference"
    assert matrix.cells[("rebias", 0)].text == "not run"  # it can run here: the family offers a biased network
    assert StripesFamily.offers["biased_network"] in matrix.given_in_full["rebias"][toy_family]

    failing = [dict(r, value=r["value"] - 25.0) if r["grid_method"] == "vanilla" else r for r in rows]
    assert build_matrix(config, failing).cells[("lff", 0)].status == "not informative"  # ERM under the line
    doc, out = Document("t"), tmp_path / "report"
    out.mkdir()
    sections.matrix(doc, SimpleNamespace(config=config, all_rows=rows, out_dir=out))
    assert "toy biased: unbiased accuracy ↑" in doc.markdown() and (out / sections.FIGURE).stat().st_size > 0
