"""A training job's log says how far the run is and how long it has left, with no terminal."""

from __future__ import annotations

import copy
import re

from debias_workbench.training.progress import Progress, duration
from debias_workbench.training.trainer import train
from debias_workbench.workflow.slices import run_config


def test_progress_lines_come_every_interval_with_the_time_left():
    now = [0.0]
    progress = Progress(total=1000, done=200, every_seconds=60, clock=lambda: now[0])  # resumed at step 200
    lines = []
    for _ in range(400):
        now[0] += 0.5                                      # 2 steps/s
        lines.append(progress.tick())
    printed = [line for line in lines if line]
    assert len(printed) == 3                               # at 60, 120 and 180 s
    assert printed[0] == "step 320 of 1,000 (32.0 %), 2 steps/s, about 5 min 40 s left"
    assert progress.line() == "step 600 of 1,000 (60.0 %), 2 steps/s, about 3 min 20 s left"
    assert duration(3 * 3600 + 5 * 60 + 9) == "3 h 05 min" and duration(7) == "7 s"


def test_the_trainers_log_has_the_runs_step_of_its_total(tmp_path, tiny_store, default_config, capsys):
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=2, batch_size=6)
    train(run_config(cfg, "base_in9", 0), tiny_store, tmp_path / "run")
    epochs = [line for line in capsys.readouterr().out.splitlines() if re.match(r"base_in9 seed 0 epoch \d:", line)]
    assert len(epochs) == 2
    totals = [re.search(r"; step (\d+) of (\d+) \(", line).groups() for line in epochs]
    assert totals[1][0] == totals[1][1] and int(totals[0][0]) * 2 == int(totals[0][1])   # half way, then done
    assert "left" in epochs[0]
