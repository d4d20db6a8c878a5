"""Training curves in the trackers researchers watch (`training.trackers`), beside the JSON lines the
report reads: each run's rows as they are made, under the run's folder.

- `tensorboard`: event files in `<run dir>/tensorboard/` (`torch.utils.tensorboard`, which needs the
  `tensorboard` package: `pip install -e '.[trackers]'`): per epoch `train/<metric>` (losses and
  other statistics, `lr`, speed) at step = epoch; each monitor point `curve/<metric>` at step = the
  training step; what a method's `finish` reports `final/<metric>`; the scoring job's accuracies
  `eval/<dataset>/<variant>/<metric>`. The run is named by a text entry `run`: experiment, seed and
  config hash. `tensorboard --logdir results/runs` shows every run side by side.

A run that starts from epoch 0 clears its folder's old events; a resumed run appends to them.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol

#: the folder of a run's TensorBoard events, inside the run's folder
TENSORBOARD_DIR = "tensorboard"
#: the keys that tell apart several rows of one metric (a bias x class cell, a corruption severity)
ROW_PARTS = ("bias_label", "class_label", "severity")


class Tracker(Protocol):
    def log(self, rows: list[dict[str, Any]]) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    """One run's rows as TensorBoard scalars (`SummaryWriter`)."""

    def __init__(self, run_dir: Path, run: dict[str, Any], fresh: bool):
        from torch.utils.tensorboard import SummaryWriter

        folder = run_dir / TENSORBOARD_DIR
        if fresh:
            shutil.rmtree(folder, ignore_errors=True)
        self.writer = SummaryWriter(str(folder))
        if fresh:
            self.writer.add_text("run", ", ".join(f"{k}: {v}" for k, v in run.items()))

    def log(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if (named := scalar(row)) is not None:
                self.writer.add_scalar(*named)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def scalar(row: dict[str, Any]) -> tuple[str, float, int] | None:
    """(tag, value, step) of a tidy metric row; None for a row that is no number."""
    value = row.get("value")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    kind, metric = row["kind"], row["metric"]
    if kind in ("train", "final"):  # "final": a method's `finish` rows, as the trainer hands them over
        return f"{kind}/{metric}", float(value), int(row.get("epoch", 0))
    if kind == "curve":
        return f"curve/{metric}", float(value), int(row["step"])
    if kind == "eval":
        parts = "".join(f"/{key}={row[key]}" for key in ROW_PARTS if key in row)
        return f"eval/{row.get('dataset', '')}/{row['variant']}/{metric}{parts}", float(value), 0
    return None


#: tracker name -> its class (`training.trackers`; the config check names the package each needs)
TRACKERS: dict[str, type] = {"tensorboard": TensorBoardTracker}


class Trackers:
    """The run's trackers (none: every call does nothing)."""

    def __init__(self, names: list[str], run_dir: Path, run: dict[str, Any], fresh: bool):
        unknown = [n for n in names if n not in TRACKERS]
        if unknown:
            raise ValueError(f"training.trackers: unknown {unknown}; known: {sorted(TRACKERS)}")
        self.trackers: list[Tracker] = [TRACKERS[n](run_dir, run, fresh) for n in names]

    def log(self, rows: list[dict[str, Any]]) -> None:
        for tracker in self.trackers:
            tracker.log(rows)

    def close(self) -> None:
        for tracker in self.trackers:
            tracker.close()


def parse_trackers(text: str) -> list[str]:
    """The `--trackers` argument of the train and evaluate commands: names joined by commas ("" none)."""
    return [name for name in text.split(",") if name]
