"""Which runs of a training job share a process when the job trains several at once on a GPU
(`training.runs_per_gpu`). Torch-free: the workflow's cost model (`workflow.resources`) reads it too."""

from __future__ import annotations

from typing import Any


def process_groups(runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The pack's runs in the groups that train side by side, each group's runs one after the other in
    one process: the runs with a BiasEnsemble committee together (LfF+BE and Park et al. on one train
    variant and seed share one committee, `bias_amplification._COMMITTEES`, within a process), every
    other run alone; the committee group first (the longest)."""
    committee = [run for run in runs if "committee_steps" in run["method_args"]]
    return ([committee] if committee else []) + [[run] for run in runs if "committee_steps" not in run["method_args"]]
