"""Prerequisite artifacts (`training.prerequisite_kind`) as a declaration: the generic layers handle
every kind through it and name none (issue 62: BiasEnsemble's committee ran through 14 modules)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from debias_workbench.training.methods import PREREQUISITES, REGISTRY, spec
from debias_workbench.training.prerequisite_kind import PrerequisiteCost, PrerequisiteKind

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "debias_workbench"


def generic_files() -> list[Path]:
    """The workflow's rule files and Snakefile, the command line, the workflow, report and core layers, and
    the training layer's own modules (its methods aside): what handles a prerequisite without knowing it."""
    files = [ROOT / "Snakefile", *sorted((ROOT / "rules").glob("*.smk")), PACKAGE / "cli.py"]
    for layer in ("workflow", "report", "core"):
        files += sorted((PACKAGE / layer).rglob("*.py")) + sorted((PACKAGE / layer).rglob("*.yaml"))
    return files + sorted((PACKAGE / "training").glob("*.py"))


@pytest.mark.parametrize("kind", sorted(PREREQUISITES))
def test_no_generic_module_rule_file_or_command_names_a_prerequisite_kind(kind):
    """Not even in a comment: the generic layers reach a kind only through its declaration."""
    word = re.compile(rf"(?<![a-z]){re.escape(kind)}(?![a-z])", re.I)
    found = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in generic_files()
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if word.search(line)
    ]
    assert not found, "\n".join(found)


def test_every_declared_prerequisite_is_registered_and_identified_by_declared_arguments():
    """A method's `prerequisites` name registered kinds, and each kind's identifying arguments are arguments
    of every method that needs it (its job config reads them from the run's `method_args`)."""
    for name in REGISTRY:
        declared = spec(name)
        for kind in declared.prerequisites:
            assert kind in PREREQUISITES, (name, kind)
            assert set(PREREQUISITES[kind].args) <= set(declared.args), (name, kind)
            cost = PREREQUISITES[kind].cost
            assert {cost.steps, cost.networks} - {None} <= set(declared.args), (name, kind)


def test_a_kind_contributes_its_arguments_and_revision_to_its_identity():
    kind = PrerequisiteKind("toy", ("a",), "m:f", PrerequisiteCost(steps="a"))
    assert kind.settings({"a": 1, "b": 2}) == {"toy": {"a": 1}}
    revised = PrerequisiteKind("toy", ("a",), "m:f", PrerequisiteCost(steps="a"), revision=2)
    assert revised.settings({"a": 1}) == {"toy": {"a": 1}, "revision": 2}


def test_the_trainer_refuses_a_file_of_a_prerequisite_the_method_does_not_need(tiny_stores, default_config, tmp_path):
    from debias_workbench.training.trainer import train

    from .test_bias_amplification import _run

    run = _run(default_config, "lff")
    with pytest.raises(ValueError, match="needs no prerequisite committee"):
        train(run, tiny_stores["original"], tmp_path / "run", prerequisites={"committee": tmp_path / "c.pt"})


def test_a_toy_method_with_a_prerequisite_of_its_own_reaches_a_trained_run_and_the_plan(
    tiny_stores, default_config, tmp_path, monkeypatch
):
    """Its own files (tests/toy_prerequisite/: the method, its declaration, its kind and builder) and one
    registry line each: `workbench prerequisite` builds its artifact, the trainer hands the run its file (its
    set-up's row counts the classes from it), and `workbench plan` lists and costs the artifact's job."""
    import json

    import yaml

    from debias_workbench.cli import main as workbench
    from debias_workbench.training import methods
    from debias_workbench.training.prerequisites import files, run_jobs
    from debias_workbench.training.trainer import train
    from debias_workbench.workflow.plan import plan

    from .test_bias_amplification import _run
    from .toy_prerequisite.kind import CLASS_COUNTS

    monkeypatch.setitem(methods.REGISTRY, "logit_adjusted", "tests.toy_prerequisite.method:LogitAdjusted")
    monkeypatch.setitem(methods.PREREQUISITES, CLASS_COUNTS.name, CLASS_COUNTS)
    run = _run(default_config, "logit_adjusted")
    (job,) = run_jobs(run)
    config = tmp_path / "job.json"
    config.write_text(json.dumps(job.config))
    command = ["prerequisite", "--kind", "class_counts", "--config", str(config)]
    store = str(tiny_stores["original"])
    assert workbench([*command, "--train-store", store, "--out", str(tmp_path / job.path)]) == 0
    train(run, tiny_stores["original"], tmp_path / "run", prerequisites=files(tmp_path, run))
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_metrics.jsonl").read_text().splitlines()]
    assert [r["value"] for r in rows if r["metric"] == "classes_counted"] == [9.0]  # IN-9's classes, from the file

    toy = tmp_path / "toy.yaml"
    experiment = {"method": "logit_adjusted", "dataset": "in9", "train_variant": "original", "label": "Toy"}
    toy.write_text(yaml.safe_dump({"experiments": {"toy": experiment}}))
    jobs = [j for j in plan([toy]).jobs if j.rule == "prerequisite" and "class_counts" in j.target]
    assert len(jobs) == len(default_config["seeds"]) and all(j.estimate_minutes > 0 for j in jobs)
