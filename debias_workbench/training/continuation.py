"""Where a run stops to continue in the next job (`job_time`: its budget and the scheduler's stop
signals): before an epoch the job has no room for, before the method's linear probe, or at the next step
when a stop signal came (mid-epoch, its checkpoint at that step). Each logs why in the run's log and raises
`ContinueInNextJob`; with several processes rank 0 decides for every one, so all stop at the same
checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch

from debias_workbench.core.phases import phase
from debias_workbench.training.run_config import RunConfig

from . import distributed
from .epoch_state import StopMidEpoch
from .job_time import STOP_MARGIN_SECONDS, ContinueInNextJob, JobBudget, stop_requested
from .methods import spec as method_spec
from .progress import duration
from .run_files import CHECKPOINT
from .run_state import RunState, save_checkpoint

#: a linear probe's pass over the training images (a forward of the backbone), in epochs of the run's own
#: steps: a step takes a forward and a backward at least, about three forwards' work; half, erring long
PROBE_PASS_EPOCHS = 0.5


def stop_for_next_job(budget: JobBudget | None, state: RunState, epoch: int, device: torch.device) -> None:
    """Raise `ContinueInNextJob` before `epoch` when the job's `budget` has no room for another
    epoch, or a stop signal came (rank 0 decides for every process, so all stop at the same checkpoint)."""
    signal_name = stop_requested()
    if _decided(signal_name is not None or (budget is not None and budget.must_stop()), device):
        _stop(state, f"at epoch {epoch} of {state.length.loop_epochs}", signal_name, budget)


def stop_before_finish(budget: JobBudget | None, state: RunState, run_cfg: RunConfig, device: torch.device) -> None:
    """Raise `ContinueInNextJob` before the method's linear probe (`MethodSpec.probe_passes`) when this
    job, having trained an epoch, has no room left for it (`PROBE_PASS_EPOCHS` of its longest epoch a
    pass), or a stop signal came: the next job resumes at the run's end and fits only the probe (a job
    that trained no epoch always fits it). Without a probe the finishing work is short and done."""
    passes = method_spec(run_cfg["method"]).probe_passes(run_cfg["method_args"])
    signal_name = stop_requested()
    seconds = passes * PROBE_PASS_EPOCHS * (budget.longest_epoch or 0.0) if budget is not None else 0.0
    short = budget is not None and budget.must_stop(seconds)
    if _decided(passes > 0 and (signal_name is not None or short), device):
        _stop(state, f"before the linear probe's {passes} pass(es) (about {duration(seconds)})", signal_name, budget)


def _decided(stop: bool, device: torch.device) -> bool:
    """`stop` as rank 0 decides it for every process (a collective where there are several)."""
    return stop if distributed.world() == 1 else distributed.main_decides(stop, device)


def _stop(state: RunState, where: str, signal_name: str | None, budget: JobBudget | None) -> None:
    """Log why the run stops `where` and raise `ContinueInNextJob`."""
    why = (
        f"{signal_name}: the scheduler ends the job soon"
        if signal_name or budget is None
        else f"budget: {duration(budget.left())} left of the job, the longest epoch "
        f"{duration(budget.longest_epoch or 0)}, margin {duration(STOP_MARGIN_SECONDS)}"
    )
    line = f"stopping {where} to continue in the next job ({why})"
    state.log.say(line)
    raise ContinueInNextJob(line)


def stop_mid_epoch(run_dir: Path, state: RunState, epoch: int, stop: StopMidEpoch) -> None:
    """Checkpoint the run at the step boundary `stop` holds (one process) and raise `ContinueInNextJob`."""
    with phase("saving"):
        save_checkpoint(run_dir / CHECKPOINT, state, epoch, stop.epoch.saved(state.method.generator))
    _stop(state, f"at step {stop.epoch.steps} of epoch {epoch} of {state.length.loop_epochs}", stop.signal_name, None)
