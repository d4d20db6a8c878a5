"""One kind of run: a run declared on its own or by a grid is scored on the test sets its dataset
family declares, trained by a `train` job and scored by an `evaluate` job (packs only decide how
many share a process), and reaches the report."""

import copy
import subprocess
import sys

import yaml

from debias_workbench.report.context import ReportContext
from debias_workbench.report.document import Document
from debias_workbench.papers import PAPERS
from debias_workbench.report.section import PARTS
from debias_workbench.report.sections import sections
from debias_workbench.report.sections.runs import other_runs
from debias_workbench.workflow.config import resolve_config, scoring

from .conftest import ROOT, workdir

CMNIST_RUN = {"method": "erm", "dataset": "colored_mnist", "train_variant": "conflict_5", "label": "ERM on CMNIST 5 %",
              "training": {"arch": "small_cnn", "pretrained": None}}


def test_every_run_is_scored_as_its_family_declares(default_config):
    """A Background Challenge run on every IN-9 variant; a grid run and a run declared on its own on
    a Colored MNIST dataset alike on its val split and the unbiased test set, with the group metrics.
    Scoring the lone run on IN-9 (the old default) or without group metrics would fail here."""
    cfg = copy.deepcopy(default_config)
    cfg["experiments"]["cmnist_erm"] = CMNIST_RUN
    config = resolve_config(cfg)
    dataset, sets, groups = scoring(config, "base_in9")
    assert dataset == "in9" and not groups and set(config["datasets"]["in9"]["variants"]) <= set(sets)
    grid_run = scoring(config, "park_cmnist_vanilla_conflict_5")
    assert scoring(config, "cmnist_erm") == grid_run == (
        "colored_mnist", {"valid": "conflict_5", "unbiased": "unbiased"}, True)


def test_a_run_declared_alone_on_another_family_plans_its_train_and_evaluate_jobs(tmp_path):
    """Before, experiments had to be on an in9 dataset (grids were the only other door)."""
    extra = tmp_path / "cmnist_run.yaml"
    extra.write_text(yaml.safe_dump({"experiments": {"cmnist_erm": CMNIST_RUN}}))
    target = f"{tmp_path}/results/runs/cmnist_erm/seed0/eval.jsonl"
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", target, "--configfile",
                           str(ROOT / "config" / "config.yaml"), str(extra), "--config", f"results={tmp_path}/results"],
                          cwd=workdir(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    jobs = proc.stdout.split("Job stats:", 1)[1]
    assert "\ntrain " in jobs and "\nevaluate " in jobs and "colored_mnist/unbiased.zarr" in proc.stdout


def test_the_other_runs_section_shows_a_lone_run_on_its_familys_columns(tmp_path):
    labels = {"cmnist_erm": "ERM on CMNIST 5 %"}
    config = {"experiments": {"cmnist_erm": {**CMNIST_RUN}}, "datasets": {"colored_mnist": {"family": "colored_mnist"}}}
    ctx = ReportContext(config=config, out_dir=tmp_path, stores={}, quality_file=tmp_path, manifest_files=[],
                        saliency_arrays=None, labels=labels, all_rows=[], rows=[], official_table={},
                        elsewhere={}, scored_elsewhere=frozenset(), other_tables={"colored_mnist": {"ERM on CMNIST 5 %": {"unbiased": [40.0, 44.0],
                                                                                               "valid": [90.0, 92.0]}}})
    doc = Document("t")
    other_runs(doc, ctx)
    text = doc.markdown()
    assert "Runs scored on `colored_mnist`" in text and "| ERM on CMNIST 5 % | 42.0 ± 2.8 |" in text


def test_the_section_registry_names_each_section_once_and_declares_known_selection_rules():
    names = [s.name for s in sections()]
    assert len(names) == len(set(names))
    for section in sections():
        assert set(section.selection) <= {"last", "validation", "oracle"}, section.name
    for paper in PAPERS.values():  # a paper's section in no part would never be written
        assert all(section.part in PARTS for section in paper.sections)


def test_every_family_declares_its_section_under_its_own_name():
    """A family whose <module>.yaml is missing, or copied from another family without renaming its
    `family` constant, would validate configs of the wrong family."""
    from debias_workbench.pipeline.datasets import FAMILIES
    from debias_workbench.workflow.schema import family_def, load_schema

    schema = load_schema()
    for name, cls in FAMILIES.items():
        section = schema["$defs"][family_def(name)]
        assert section["properties"]["family"].get("const", name) == name, name
        assert section.get("description"), name
