"""A method plugs in (docs/architecture.md, "Add a method"): a toy method outside the package, its module and its
declaration beside it (tests/toy_method/) and one registry line here, reaches the config check, a trained run, its
scoring, `workbench plan`'s costs and the report. (A method with a prerequisite artifact of its own:
tests/test_prerequisites.py.)"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from debias_workbench.training import methods

NAME = "label_smoothing"
#: the toy experiment on the demo's IN-9 (its `label` is what the report shows)
EXPERIMENT = {"method": NAME, "dataset": "in9", "train_variant": "original", "label": "Toy smoothing",
              "method_args": {"smoothing": 0.2}, "seeds": [0]}


@pytest.fixture
def toy_method(monkeypatch) -> str:
    monkeypatch.setitem(methods.REGISTRY, NAME, "tests.toy_method.smoothing:LabelSmoothing")  # the one line
    return NAME


def test_the_config_check_reads_a_registered_methods_declaration(toy_method, default_config):
    """Its `method_args` are checked against `smoothing.yaml`: a value out of its range and an argument it does
    not take are refused by their key; its step is costed by the row it names."""
    from debias_workbench.training.methods import spec
    from debias_workbench.workflow.config import ConfigError, resolve_config

    config = copy.deepcopy(default_config)
    config["experiments"]["toy"] = EXPERIMENT
    assert resolve_config(config)["experiments"]["toy"]["method"] == toy_method
    assert spec(toy_method).cost["row"] == "erm" and spec(toy_method).defaults == {"smoothing": 0.1}
    config["experiments"]["toy"] = {**EXPERIMENT, "method_args": {"smoothing": 1.0}}
    with pytest.raises(ConfigError, match=r"experiments\.toy\.method_args\.smoothing: 1\.0 is greater than or equal"):
        resolve_config(config)
    config["experiments"]["toy"] = {**EXPERIMENT, "method_args": {"epsilon": 0.2}}
    with pytest.raises(ConfigError, match=r"experiments\.toy\.method_args: .*'epsilon'.*takes \['smoothing'\]"):
        resolve_config(config)


def test_a_toy_method_reaches_a_trained_run_its_scores_the_plan_and_the_report(
    toy_method, tiny_stores, default_config, tmp_path
):
    """The trainer builds it by name with its `method_args` (the loss reads the run's smoothing), the scoring
    loads it by name, `workbench plan` lists and costs its run (by the row its declaration names), and the report's
    table of every variant of the evaluated dataset shows its label."""
    from debias_workbench.report.build import build_report
    from debias_workbench.report.context import ReportInputs
    from debias_workbench.training.evaluation import evaluate_run
    from debias_workbench.training.trainer import train
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.plan import OUTSIDE, plan
    from debias_workbench.workflow.slices import evaluation_config, run_config

    from .test_paper_units import _inputs

    config = copy.deepcopy(default_config)
    config["experiments"]["toy"] = EXPERIMENT
    run = run_config(resolve_config(config), "toy", 0)
    run["training"].update(batch_size=6, epochs=2, arch="small_cnn", small_cnn_channels=[8, 8])  # a few CPU steps
    model = train(run, tiny_stores["original"], tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_metrics.jsonl").read_text().splitlines()]
    smoothing = [r["value"] for r in rows if r["metric"] == "smoothing"]  # its own update's, averaged per epoch
    assert smoothing and smoothing == pytest.approx([0.2] * len(smoothing))
    scored = evaluate_run(model, evaluation_config(config), tiny_stores)
    (accuracy,) = [r for r in scored if r["metric"] == "accuracy" and r["variant"] == "original"]
    assert (accuracy["experiment"], accuracy["n"]) == ("toy", 18)

    toy = tmp_path / "toy.yaml"
    toy.write_text(yaml.safe_dump({"experiments": {"toy": EXPERIMENT}}))
    p = plan([toy])
    (line,) = [r for r in p.runs if r.experiment == "toy"]
    assert line.table == OUTSIDE and line.estimate.gpu_seconds > 0
    assert [j.target for j in p.jobs if j.rule.startswith("train") and j.target.startswith("toy ")] == ["toy seed 0"]

    config, metrics, quality, stores = _inputs(tmp_path, config)
    (tmp_path / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scored))
    build_report(ReportInputs(config, [*metrics, tmp_path / "toy.jsonl"], quality, [], stores), tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    variants = md[md.index("## Accuracy on every variant (%)") :]  # the generic table of the evaluated dataset
    assert f"| Toy smoothing | {accuracy['value']:.1f} |" in variants[: variants.index("\n## ")]
