"""`training.trackers`: a run's curves and scores as TensorBoard event files, read back with
TensorBoard's own reader; trackers are no part of a run's identity; a missing package or a
per-experiment setting stops at start, naming the key."""

from __future__ import annotations

import copy
import json

import pytest

from debias_workbench.training.trainer import Monitor, train
from debias_workbench.workflow.config import ConfigError, resolve_config
from debias_workbench.workflow.slices import run_config

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="TensorBoard is the `trackers` extra (in the `test` extra too: pip install -e '.[test]')")


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    events = event_accumulator.EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _train_config(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=2, batch_size=6, trackers=["tensorboard"])
    return cfg


def test_a_run_with_tensorboard_writes_its_curves_and_scores_as_event_files(tmp_path, tiny_store, default_config,
                                                                            monkeypatch):
    from debias_workbench.training.cli import evaluate

    cfg = resolve_config(_train_config(default_config))
    run = run_config(cfg, "base_in9", 0)
    assert "trackers" not in run["training"]  # not part of the run's identity
    model = train(run, tiny_store, tmp_path / "run", monitor=Monitor({"original": tiny_store}, every_steps=2),
                  trackers=["tensorboard"])
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_metrics.jsonl").read_text().splitlines()]
    scalars = _scalars(tmp_path / "run" / "tensorboard")
    for row in rows:  # every number of the JSON lines is in TensorBoard, at its epoch or step
        if row["kind"] == "train":
            assert (row["epoch"], pytest.approx(row["value"], rel=1e-6)) in scalars[f"train/{row['metric']}"]
        else:
            assert (row["step"], pytest.approx(row["value"], rel=1e-6)) in scalars[f"curve/{row['metric']}"]
    assert [step for step, _ in scalars["train/loss"]] == [0, 1] and len(scalars["train/lr"]) == 2
    assert any(tag.startswith("curve/original_accuracy") for tag in scalars)

    config = tmp_path / "eval.json"
    config.write_text(json.dumps({"dataset": "in9", "split": "val", "batch_size": 16}))
    monkeypatch.setenv("WORKBENCH_TRACKERS", "tensorboard")  # as rules/common.smk hands them to the jobs
    assert evaluate(["--config", str(config), "--models", str(model), "--stores", f"original={tiny_store}",
                     "--out", str(tmp_path / "eval.jsonl")]) == 0
    score = json.loads((tmp_path / "eval.jsonl").read_text().splitlines()[0])
    assert _scalars(tmp_path / "run" / "tensorboard")["eval/in9/original/accuracy"] == [
        (0, pytest.approx(score["value"], rel=1e-6))]


def test_trackers_change_no_runs_identity_and_are_checked_at_start(default_config, monkeypatch):
    watched = copy.deepcopy(default_config)
    watched["training"]["trackers"] = ["tensorboard"]
    plain, watched = resolve_config(copy.deepcopy(default_config)), resolve_config(watched)
    assert run_config(plain, "clad", 0) == run_config(watched, "clad", 0)
    per_experiment = _train_config(default_config)
    per_experiment["experiments"]["clad"]["training"] = {"trackers": ["tensorboard"]}
    with pytest.raises(ConfigError, match=r"experiments.clad.training.trackers: set trackers in the top-level"):
        resolve_config(per_experiment)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(ConfigError, match=r"training.trackers: tensorboard needs the tensorboard package: pip install"):
        resolve_config(_train_config(default_config))
