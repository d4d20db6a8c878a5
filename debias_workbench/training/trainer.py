"""Training loop: seeds, device choice, per-epoch checkpoints, resume after a kill, metrics.

A run directory holds `config.json` (the run's resolved config, its identity), `checkpoint.pt`
(rewritten atomically after every epoch: networks, optimisers, schedulers, the metric rows so far,
next epoch, the hash of the run's config; its progress beside it, `run_files`), the run's own log
`train.log` (appended by every attempt) and, once finished, `model.pt` (weights plus the run's
config) and `train_metrics.jsonl` (one tidy row per epoch and metric). The checkpoint is not a
declared workflow output, so Snakemake keeps it when it cleans up a failed job, and it stays when
`model.pt` is written: a job that fails after that is retried from the run's last epoch, not from
zero; the scoring job removes it once Snakemake has accepted the run's outputs
(`run_files.release_checkpoint`).
Re-running a killed run resumes from the last completed epoch and ends with the same weights as
an uninterrupted run; a checkpoint made with another config is ignored and the run starts over.
A run longer than its job stops itself at an epoch boundary before the job's time runs out, or at a
step when the scheduler warns (`job_time`: `ContinueInNextJob`; mid-epoch: `epoch_state`), and the next
job resumes it the same way. A method's pre-training
(`x-before-run`: LearnedMixin+H's G, as the ReBias authors' `pretrain()`) runs as the loop's first
epochs, before the run's own and without scheduler steps, each checkpointed as any epoch.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from debias_workbench.core.atomic import atomic_path, write_json
from debias_workbench.core.phases import phase
from debias_workbench.core.provenance import config_hash
from debias_workbench.core.seeding import name_seed

from . import distributed
from .build import build_method, pick_device, precision
from .data import ZarrBatches
from .epoch_state import EpochState, StopMidEpoch
from .job_time import STOP_MARGIN_SECONDS, ContinueInNextJob, JobBudget, stop_requested
from .methods import get_method
from .methods import spec as method_spec
from .methods.base import Method
from .methods.bias_amplification import LfFBiasEnsemble
from .monitor import Monitor
from .progress import Progress, duration
from .run_files import CHECKPOINT, RunLog, write_progress
from .run_length import RunLength, run_length, switches_outside
from .settings import ScheduleSettings, TrainingSettings
from .trackers import Trackers


def make_schedulers(method: Method, cfg: dict[str, Any], epochs: int) -> list[torch.optim.lr_scheduler.LRScheduler]:
    sched = ScheduleSettings.of(cfg["schedule"])
    out: list[torch.optim.lr_scheduler.LRScheduler] = []
    for opt in method.optimizers():
        if sched.name == "step":
            out.append(torch.optim.lr_scheduler.MultiStepLR(opt, list(sched.milestones), sched.gamma))
        elif sched.name == "cosine":
            out.append(torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs))
        else:
            out.append(torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 1.0))
    return out


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


def train(run_cfg: dict[str, Any], train_store: Path, run_dir: Path, aligned_stores: dict[str, Path] | None = None,
          stop_after_epochs: int | None = None, monitor: Monitor | None = None, trackers: Sequence[str] = (),
          budget: JobBudget | None = None, committee: Path | None = None) -> Path:
    """Train the run `run_cfg` (its resolved config: `workflow.slices.run_config`) on
    `train_store`; returns the path of `model.pt`.

    `aligned_stores` gives, for each of the method's `aligned_variants` fields, the store of
    that variant. `monitor` adds learning-curve rows (kind "curve") every few steps.
    `stop_after_epochs` ends the process early (as a kill would) - used by the resume test. `trackers`
    (`training.trackers`) also get every row as it is made.
    `budget` (the job's time, `job_time`): before each epoch but the job's first (and before a linear
    probe), a run whose next epoch (probe) might outlast the job raises `ContinueInNextJob`, its checkpoint
    kept for the next job; so does a stop signal (`job_time.stop_requested`), at the next step.
    `committee`: the file of the run's BiasEnsemble committee, made by its own job (`committee_job`);
    without one, a run that needs one trains it in its set-up (the same numbers).
    The finished run's checkpoint stays (`run_files`: the scoring job removes it).
    The run's config is written to `run_dir/config.json`; a checkpoint made with another config is not resumed from.

    With `training.gpus` N > 1 the run is N processes (`python -m torch.distributed.run`, see
    `training.distributed`): each trains on its share of every global batch with the gradients
    averaged, draws its augmentations from its own seed, and only rank 0 writes files.
    """
    distributed.init_from_env()
    settings = TrainingSettings.of(run_cfg["training"])
    check_processes(run_cfg, settings)
    log = RunLog(run_dir, f"{run_cfg['experiment']} seed {run_cfg['seed']}", distributed.is_main())
    if distributed.is_main():
        write_json(run_dir / "config.json", run_cfg)
    log.start()
    try:
        model = _train(run_cfg, settings, train_store, run_dir, aligned_stores, stop_after_epochs, monitor, trackers,
                       budget, committee, log)
    except BaseException as exc:
        log.end(exc)
        raise
    log.end()
    return model


def _train(run_cfg: dict[str, Any], settings: TrainingSettings, train_store: Path, run_dir: Path,
           aligned_stores: dict[str, Path] | None, stop_after_epochs: int | None, monitor: Monitor | None,
           trackers: Sequence[str], budget: JobBudget | None, committee: Path | None, log: RunLog) -> Path:
    """`train`'s work, its attempt logged in `log`."""
    device = pick_device(settings.deterministic, tf32=settings.amp)
    batches = training_batches(run_cfg, settings, train_store, aligned_stores or {}, device)
    with phase("setup"):  # the method built, its set-up (BiasEnsemble's committee), the checkpoint resumed
        state = _set_up(run_cfg, batches, device, run_dir / CHECKPOINT, committee, log)
    watch = Trackers(list(trackers) if distributed.is_main() else [], run_dir,
                     {"experiment": run_cfg["experiment"], "seed": run_cfg["seed"], "config_hash": state.run_hash},
                     fresh=state.start_epoch == 0)
    watch.log(state.history if state.start_epoch == 0 else [])
    try:
        with phase("epochs"):  # the steps, the checkpoints (saving) and monitors (scoring) taken out; a method's finish
            for epoch in range(state.start_epoch, state.length.loop_epochs):
                if stop_after_epochs is not None and epoch >= stop_after_epochs:
                    return run_dir / "model.pt"
                _stop_for_next_job(budget, state, epoch, device)
                started = time.monotonic()
                part, state.part = state.part, None
                try:
                    rows = _train_epoch(state, batches, epoch, settings, device, monitor, part)
                except StopMidEpoch as stop:
                    _stop_mid_epoch(run_dir, state, epoch, stop)
                state.history += rows
                watch.log(rows)
                if distributed.is_main():
                    with phase("saving"):
                        _save_checkpoint(run_dir / CHECKPOINT, state, epoch + 1)
                distributed.barrier()  # no process runs ahead of the last checkpoint
                if budget is not None:
                    budget.record(time.monotonic() - started)
            _stop_before_finish(budget, state, run_cfg, device)
            if final := state.method.finish(batches):
                rows = [{"kind": "train", **state.tags, "epoch": state.length.loop_epochs, "metric": k, "value": v}
                        for k, v in final.items()]
                state.history += rows
                watch.log([{**row, "kind": "final"} for row in rows])
    finally:
        watch.close()
    return _save_outputs(run_dir, run_cfg, state, batches.classes)


#: a linear probe's pass over the training images (a forward of the backbone), in epochs of the run's own
#: steps: a step takes a forward and a backward at least, about three forwards' work; half, erring long
PROBE_PASS_EPOCHS = 0.5


def _stop_for_next_job(budget: JobBudget | None, state: RunState, epoch: int, device: torch.device) -> None:
    """Raise `ContinueInNextJob` before `epoch` when the job's `budget` has no room for another
    epoch, or a stop signal came (rank 0 decides for every process, so all stop at the same checkpoint)."""
    signal_name = stop_requested()
    if _decided(signal_name is not None or (budget is not None and budget.must_stop()), device):
        _stop(state, f"at epoch {epoch} of {state.length.loop_epochs}", signal_name, budget)


def _stop_before_finish(budget: JobBudget | None, state: RunState, run_cfg: dict[str, Any],
                        device: torch.device) -> None:
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
    why = (f"{signal_name}: the scheduler ends the job soon" if signal_name or budget is None else
           f"budget: {duration(budget.left())} left of the job, the longest epoch "
           f"{duration(budget.longest_epoch or 0)}, margin {duration(STOP_MARGIN_SECONDS)}")
    line = f"stopping {where} to continue in the next job ({why})"
    state.log.say(line)
    raise ContinueInNextJob(line)


def _stop_mid_epoch(run_dir: Path, state: RunState, epoch: int, stop: StopMidEpoch) -> None:
    """Checkpoint the run at the step boundary `stop` holds (one process) and raise `ContinueInNextJob`."""
    with phase("saving"):
        _save_checkpoint(run_dir / CHECKPOINT, state, epoch, stop.epoch.saved(state.method.generator))
    _stop(state, f"at step {stop.epoch.steps} of epoch {epoch} of {state.length.loop_epochs}", stop.signal_name, None)


def check_processes(run_cfg: dict[str, Any], settings: TrainingSettings) -> None:
    """The run is started as `training.gpus` processes, and its global batch splits among them."""
    experiment, world = run_cfg["experiment"], distributed.world()
    if settings.gpus != world:
        raise ValueError(f"{experiment} seed {run_cfg['seed']} asks for training.gpus = {settings.gpus} but runs in "
                         f"{world} process(es): start it with `python -m torch.distributed.run --standalone "
                         f"--nproc_per_node {settings.gpus} -m debias_workbench train ...` (the workflow's train rule "
                         "does)")
    if settings.batch_size % world:
        raise ValueError(f"{experiment}: training.batch_size {settings.batch_size} (the global batch) does not split "
                         f"into training.gpus = {world} equal shares; make it a multiple of gpus")


def training_batches(run_cfg: dict[str, Any], settings: TrainingSettings, train_store: Path,
                      aligned_stores: dict[str, Path], device: torch.device) -> ZarrBatches:
    """The run's training split, with the fields its method reads and the stores of its aligned variants."""
    method_cls = get_method(run_cfg["method"])
    if missing := set(method_cls.aligned_variants) - set(aligned_stores):
        raise ValueError(f"method {run_cfg['method']!r} needs the stores of {method_cls.aligned_variants}; "
                         f"missing {sorted(missing)}")
    world, rank = distributed.world(), distributed.rank()
    with phase("loading"):  # the store's split read (into memory when it fits: training.loader.in_memory_max_gb)
        return ZarrBatches(train_store, "train", settings.batch_size, shuffle=True, seed=run_cfg["seed"],
                           name=run_cfg["experiment"], drop_last=True, **settings.loader.batches_args(),
                           fields=("images", "labels", "bias_labels", *method_cls.extra_fields),
                           pin_memory=device.type == "cuda", aligned=aligned_stores,
                           max_batches=settings.steps_per_epoch, shard=(rank, world) if world > 1 else None,
                           cuts_views=method_cls.cuts_photo_views)


def _set_up(run_cfg: dict[str, Any], batches: ZarrBatches, device: torch.device, ckpt_path: Path,
            committee: Path | None, log: RunLog) -> RunState:
    """The method built and set up on the training split (with its `committee` file, where given),
    its schedulers, and the checkpoint resumed."""
    experiment = run_cfg["experiment"]
    method = build_method(run_cfg, len(batches.classes), device)
    if committee is not None:
        if not isinstance(method, LfFBiasEnsemble):
            raise ValueError(f"{experiment}: method {run_cfg['method']!r} reads no BiasEnsemble committee")
        method.committee_file = committee
    distributed.broadcast_state_(method)
    spec = method_spec(run_cfg["method"])
    length = run_length(run_cfg["training"], len(batches), spec.epochs_before_run(run_cfg["method_args"]))
    if outside := switches_outside(run_cfg["method_args"], spec.within_run, length):
        raise ValueError(f"{experiment}: method_args " + "; ".join(outside.values())
                         + f" ({length.steps_per_epoch} steps an epoch): set training.iterations to the paper's "
                         "run length, or move the switch")
    method.pre_steps, method.total_steps = length.pre_steps, length.steps
    prepared = method.setup(batches)
    schedulers = make_schedulers(method, run_cfg["training"], length.epochs)
    run_hash = config_hash(run_cfg)
    start_epoch, history, part = _resume(ckpt_path, method, schedulers, run_hash, log)
    # the precision is the machine's choice as much as the config's (training.build.cpu_has_native_bf16):
    # kept with every row
    tags = {"experiment": experiment, "method": run_cfg["method"], "seed": run_cfg["seed"],
            "precision": precision(method)}
    if start_epoch == 0:  # a resumed run has these rows in its checkpoint's history
        history = [{"kind": "train", **tags, "epoch": 0, "metric": k, "value": v} for k, v in prepared.items()]
    done = length.steps_before(start_epoch, part.steps if part else 0)
    return RunState(method, schedulers, length, tags, run_hash, start_epoch, history, Progress(length.all_steps, done),
                    log, part)


def _train_epoch(state: RunState, batches: ZarrBatches, epoch: int, settings: TrainingSettings,
                 device: torch.device, monitor: Monitor | None, part: EpochState | None = None) -> list[dict]:
    """One epoch's steps (and the monitor's points within it), from `part` (a resumed epoch's steps)
    on; its rows: the curve points and the epoch's mean statistics, speed and learning rate. A stop
    signal (`job_time.stop_requested`) in a one-process run raises `StopMidEpoch` at the next step."""
    method, tags, world, rank = state.method, state.tags, distributed.world(), distributed.rank()
    experiment, seed, main = tags["experiment"], tags["seed"], distributed.is_main()
    method.train()
    # each process its own augmentations; one process keeps the seed it always had
    method.generator.manual_seed(name_seed("augment", experiment, seed, epoch, *([rank] if world > 1 else [])))
    if part is None:
        part = EpochState()
    elif part.generator is not None:  # resumed mid-epoch: the generator where the last job left it
        method.generator.set_state(part.generator)
    skipped, t0, monitor_seconds = part.steps, time.perf_counter(), 0.0
    in_epoch = state.length.steps_in_epoch(epoch)
    for batch in tqdm(itertools.islice(batches.epoch(epoch, in_epoch), skipped, None), total=in_epoch,
                      initial=skipped, desc=f"{experiment} s{seed} e{epoch}", leave=False, mininterval=5,
                      disable=None if main else True):
        part.add(method.update({k: v.to(device, non_blocking=True) for k, v in batch.items()}))
        distributed.broadcast_batch_norm_(method)  # rank 0's running statistics, as DDP's buffers
        if main and (line := state.progress.tick()):  # a cluster job's log has no progress bar
            state.log.say(line)
        if monitor and main and (epoch * len(batches) + part.steps) % monitor.every_steps == 0:
            t_mon = time.perf_counter()
            with phase("scoring"):
                part.rows += monitor.rows(method, part.interval,
                                          {**tags, "epoch": epoch, "step": epoch * len(batches) + part.steps})
            part.interval, monitor_seconds = {}, monitor_seconds + time.perf_counter() - t_mon
        if world == 1 and part.steps < in_epoch and (signal_name := stop_requested()):
            raise StopMidEpoch(part, signal_name)
    elapsed = time.perf_counter() - t0 - monitor_seconds
    speed = (part.steps - skipped) * settings.batch_size / max(elapsed, 1e-9)  # this job's steps of the epoch
    return part.rows + _epoch_rows(state, epoch, part, speed, elapsed)


def _epoch_rows(state: RunState, epoch: int, part: EpochState, images_per_second: float,
                elapsed: float) -> list[dict]:
    """The end of an epoch: the schedulers' step, and its rows (mean statistics, this job's speed
    and time on it, learning rate), logged."""
    tags, method = state.tags, state.method
    epoch_sums = {k: float(v) for k, v in part.sums.items()}  # the epoch's one read: waits for the device
    if epoch >= state.length.pre_epochs:  # the schedule counts the run's own epochs, not its pre-training
        for sched in state.schedulers:
            sched.step()
    row_stats = {**distributed.mean_over_processes(epoch_sums, part.counts), "epoch_seconds": elapsed,
                 "images_per_second": images_per_second, "lr": method.optimizers()[0].param_groups[0]["lr"]}
    if any(not math.isfinite(v) for v in row_stats.values()):
        raise FloatingPointError(f"{tags['experiment']} seed {tags['seed']}: non-finite training statistics "
                                 f"{row_stats} at epoch {epoch}")
    # `<experiment> seed <s> epoch <e>: ...`, as the benchmarks read it
    state.log.say(f"epoch {epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in row_stats.items())
                  + f"; {state.progress.line()}", after=" ")
    return [{"kind": "train", **tags, "epoch": epoch, "metric": k, "value": v} for k, v in row_stats.items()]


def _save_outputs(run_dir: Path, run_cfg: dict[str, Any], state: RunState, classes: list[str]) -> Path:
    """`train_metrics.jsonl` and `model.pt` (rank 0; the checkpoint stays: `run_files`); the others
    wait for them."""
    model_path = run_dir / "model.pt"
    if distributed.is_main():
        with phase("saving"), atomic_path(run_dir / "train_metrics.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(row) + "\n" for row in state.history))
        with phase("saving"), atomic_path(model_path) as tmp:
            torch.save({"state_dict": on_cpu(state.method.state_dict()), "run_config": run_cfg,
                        "config_hash": state.run_hash, "classes": classes}, tmp)
    distributed.barrier()  # the others return once model.pt exists
    return model_path


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


def _save_checkpoint(path: Path, state: RunState, next_epoch: int, part: dict[str, Any] | None = None) -> None:
    """The run before loop epoch `next_epoch` (with `part`, `EpochState.saved`: that many of its steps
    taken), and its progress beside it (`run_files`), each atomically."""
    method = state.method
    with atomic_path(path) as tmp:
        torch.save({"method": on_cpu(method.state_dict()),
                    "optimizers": [on_cpu(o.state_dict()) for o in method.optimizers()],
                    "schedulers": [s.state_dict() for s in state.schedulers], "next_epoch": next_epoch,
                    "history": state.history, "config_hash": state.run_hash, "part": part}, tmp)
    steps = state.length.steps_before(next_epoch, part["steps"] if part else 0)
    write_progress(path.parent, steps, state.length.all_steps, state.run_hash)


def _resume(ckpt_path: Path, method: Method, schedulers, run_hash: str,
            log: RunLog) -> tuple[int, list[dict], EpochState | None]:
    """(next epoch, metric rows so far, that epoch's steps taken where the checkpoint is mid-epoch)
    from the last checkpoint if it was made with this run's config (hash `run_hash`), else (0, [], None)."""
    if not ckpt_path.exists():
        return 0, [], None
    # on the CPU: `load_state_dict` copies the weights to their device, and optimiser step counts stay host
    # tensors, as in an uninterrupted run (on the GPU each would be read back every step)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    if state.get("config_hash") != run_hash:
        log.say(f"{ckpt_path} was made with config {state.get('config_hash')}, this run's config is {run_hash} "
                f"(see {ckpt_path.parent / 'config.json'}): starting over from epoch 0")
        return 0, [], None
    method.load_state_dict(state["method"])
    for opt, opt_state in zip(method.optimizers(), state["optimizers"]):
        opt.load_state_dict(opt_state)
    for sched, sched_state in zip(schedulers, state["schedulers"]):
        sched.load_state_dict(sched_state)
    part = EpochState.loaded(state["part"]) if state.get("part") else None
    log.say(f"resumed from {ckpt_path} at epoch {state['next_epoch']}" + (f", step {part.steps}" if part else ""))
    return state["next_epoch"], state["history"], part
