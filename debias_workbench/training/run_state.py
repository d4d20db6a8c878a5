"""A run between its set-up and its end (`RunState`: the method, its schedulers, its length, its metric rows
so far, its progress and log) and its checkpoint (`checkpoint.pt` in the run directory): written atomically
after every epoch and at a mid-epoch stop, with the run's progress beside it (`run_files`), and resumed from
only when it was made with the run's config (the hash of `config.json`). Tensors are saved on the CPU
(`on_cpu`), so a checkpoint or `model.pt` loads on any machine."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from debias_workbench.core.atomic import atomic_path

from .epoch_state import EpochState
from .methods.base import Method
from .progress import Progress
from .run_files import RunLog, write_progress
from .run_length import RunLength


@dataclass
class RunState:
    """A run between its set-up and its end: the method, its schedulers, its length and the metric
    rows so far (`history`, restored from the checkpoint when the run resumes), and its log."""

    method: Method
    schedulers: list[torch.optim.lr_scheduler.LRScheduler]
    length: RunLength
    tags: dict[str, Any]
    run_hash: str
    start_epoch: int
    history: list[dict]
    progress: Progress
    log: RunLog
    part: EpochState | None = None  # the epoch `start_epoch` as far as the checkpoint has it (a mid-epoch stop)


def on_cpu(state: Any) -> Any:
    """`state` (nested dicts and lists of tensors) with every tensor copied to the CPU: saved files
    then load on any machine without `map_location` (a GPU's tensors would need one on a CPU)."""
    if isinstance(state, torch.Tensor):
        return state.detach().cpu()
    if isinstance(state, dict):
        out = type(state)((k, on_cpu(v)) for k, v in state.items())
        if hasattr(state, "_metadata"):  # a state dict's module versions
            out._metadata = state._metadata  # type: ignore[attr-defined]  # set by Module.state_dict
        return out
    if isinstance(state, (list, tuple)):
        return type(state)(on_cpu(v) for v in state)
    return state


def save_checkpoint(path: Path, state: RunState, next_epoch: int, part: dict[str, Any] | None = None) -> None:
    """The run before loop epoch `next_epoch` (with `part`, `EpochState.saved`: that many of its steps
    taken), and its progress beside it (`run_files`), each atomically."""
    method = state.method
    with atomic_path(path) as tmp:
        torch.save(
            {
                "method": on_cpu(method.state_dict()),
                "optimizers": [on_cpu(o.state_dict()) for o in method.optimizers()],
                "schedulers": [s.state_dict() for s in state.schedulers],
                "next_epoch": next_epoch,
                "history": state.history,
                "config_hash": state.run_hash,
                "part": part,
            },
            tmp,
        )
    steps = state.length.steps_before(next_epoch, part["steps"] if part else 0)
    write_progress(path.parent, steps, state.length.all_steps, state.run_hash)


def resume(
    ckpt_path: Path, method: Method, schedulers, run_hash: str, log: RunLog
) -> tuple[int, list[dict], EpochState | None]:
    """(next epoch, metric rows so far, that epoch's steps taken where the checkpoint is mid-epoch)
    from the last checkpoint if it was made with this run's config (hash `run_hash`), else (0, [], None)."""
    if not ckpt_path.exists():
        return 0, [], None
    # on the CPU: `load_state_dict` copies the weights to their device, and optimiser step counts stay host
    # tensors, as in an uninterrupted run (on the GPU each would be read back every step)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    if state.get("config_hash") != run_hash:
        log.say(
            f"{ckpt_path} was made with config {state.get('config_hash')}, this run's config is {run_hash} "
            f"(see {ckpt_path.parent / 'config.json'}): starting over from epoch 0"
        )
        return 0, [], None
    method.load_state_dict(state["method"])
    for opt, opt_state in zip(method.optimizers(), state["optimizers"]):
        opt.load_state_dict(opt_state)
    for sched, sched_state in zip(schedulers, state["schedulers"]):
        sched.load_state_dict(sched_state)
    part = EpochState.loaded(state["part"]) if state.get("part") else None
    log.say(f"resumed from {ckpt_path} at epoch {state['next_epoch']}" + (f", step {part.steps}" if part else ""))
    return state["next_epoch"], state["history"], part
