"""Training loop: seeds, device choice, per-epoch checkpoints, resume after a kill, metrics.

A run directory holds `config.json` (the run's resolved config, its identity), `checkpoint.pt`
(rewritten atomically after every epoch: networks, optimisers, schedulers, the metric rows so far,
next epoch, the hash of the run's config; its progress beside it, `run_files`; `run_state`), the run's own log
`train.log` (appended by every attempt) and, once finished, `model.pt` (weights plus the run's
config) and `train_metrics.jsonl` (one tidy row per epoch and metric). The checkpoint is not a
declared workflow output, so Snakemake keeps it when it cleans up a failed job, and it stays when
`model.pt` is written: a job that fails after that is retried from the run's last epoch, not from
zero; the scoring job removes it once Snakemake has accepted the run's outputs
(`run_files.release_checkpoint`).
Re-running a killed run resumes from the last completed epoch and ends with the same weights as
an uninterrupted run; a checkpoint made with another config is ignored and the run starts over.
A run longer than its job stops itself at an epoch boundary before the job's time runs out, or at a
step when the scheduler warns (`continuation`; `job_time`: `ContinueInNextJob`; mid-epoch: `epoch_state`), and the next
job resumes it the same way. A method's pre-training
(`x-before-run`: LearnedMixin+H's G, as the ReBias authors' `pretrain()`) runs as the loop's first
epochs, before the run's own and without scheduler steps, each checkpointed as any epoch.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from debias_workbench.core.atomic import atomic_path, write_json
from debias_workbench.core.phases import phase
from debias_workbench.core.provenance import config_hash
from debias_workbench.core.seeding import name_seed
from debias_workbench.training.run_config import RunConfig

from . import distributed
from .build import build_method, pick_device, precision
from .continuation import stop_before_finish, stop_for_next_job, stop_mid_epoch
from .data import ZarrBatches
from .epoch_state import EpochState, StopMidEpoch
from .job_time import JobBudget, stop_requested
from .methods import get_method
from .methods import spec as method_spec
from .methods.base import Method
from .monitor import Monitor
from .progress import Progress
from .run_files import CHECKPOINT, RunLog
from .run_length import run_length, switches_outside
from .run_state import RunState, on_cpu, resume, save_checkpoint
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


def train(
    run_cfg: RunConfig,
    train_store: Path,
    run_dir: Path,
    aligned_stores: dict[str, Path] | None = None,
    stop_after_epochs: int | None = None,
    monitor: Monitor | None = None,
    trackers: Sequence[str] = (),
    budget: JobBudget | None = None,
    prerequisites: Mapping[str, Path] | None = None,
) -> Path:
    """Train the run `run_cfg` (its resolved config: `workflow.slices.run_config`) on
    `train_store`; returns the path of `model.pt`.

    `aligned_stores` gives, for each of the method's `aligned_variants` fields, the store of
    that variant. `monitor` adds learning-curve rows (kind "curve") every few steps.
    `stop_after_epochs` ends the process early (as a kill would) - used by the resume test. `trackers`
    (`training.trackers`) also get every row as it is made.
    `budget` (the job's time, `job_time`): before each epoch but the job's first (and before a linear
    probe), a run whose next epoch (probe) might outlast the job raises `ContinueInNextJob`, its checkpoint
    kept for the next job; so does a stop signal (`job_time.stop_requested`), at the next step.
    `prerequisites`: {kind: file} of the run's prerequisite artifacts (`training.prerequisites`), each made by
    a job of its own; a kind the run needs and is given no file of, its method makes in its set-up (the same
    numbers).
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
        model = _train(
            run_cfg,
            settings,
            train_store,
            run_dir,
            aligned_stores,
            stop_after_epochs,
            monitor,
            trackers,
            budget,
            prerequisites or {},
            log,
        )
    except BaseException as exc:
        log.end(exc)
        raise
    log.end()
    return model


def _train(
    run_cfg: RunConfig,
    settings: TrainingSettings,
    train_store: Path,
    run_dir: Path,
    aligned_stores: dict[str, Path] | None,
    stop_after_epochs: int | None,
    monitor: Monitor | None,
    trackers: Sequence[str],
    budget: JobBudget | None,
    prerequisites: Mapping[str, Path],
    log: RunLog,
) -> Path:
    """`train`'s work, its attempt logged in `log`."""
    device = pick_device(settings.deterministic, tf32=settings.amp)
    batches = training_batches(run_cfg, settings, train_store, aligned_stores or {}, device)
    with phase("setup"):  # the method built, its set-up (its prerequisites read), the checkpoint resumed
        state = _set_up(run_cfg, batches, device, run_dir / CHECKPOINT, prerequisites, log)
    watch = Trackers(
        list(trackers) if distributed.is_main() else [],
        run_dir,
        {"experiment": run_cfg["experiment"], "seed": run_cfg["seed"], "config_hash": state.run_hash},
        fresh=state.start_epoch == 0,
    )
    watch.log(state.history if state.start_epoch == 0 else [])
    try:
        with phase("epochs"):  # the steps, the checkpoints (saving) and monitors (scoring) taken out; a method's finish
            for epoch in range(state.start_epoch, state.length.loop_epochs):
                if stop_after_epochs is not None and epoch >= stop_after_epochs:
                    return run_dir / "model.pt"
                stop_for_next_job(budget, state, epoch, device)
                started = time.monotonic()
                part, state.part = state.part, None
                try:
                    rows = _train_epoch(state, batches, epoch, settings, device, monitor, part)
                except StopMidEpoch as stop:
                    stop_mid_epoch(run_dir, state, epoch, stop)
                state.history += rows
                watch.log(rows)
                if distributed.is_main():
                    with phase("saving"):
                        save_checkpoint(run_dir / CHECKPOINT, state, epoch + 1)
                distributed.barrier()  # no process runs ahead of the last checkpoint
                if budget is not None:
                    budget.record(time.monotonic() - started)
            stop_before_finish(budget, state, run_cfg, device)
            if final := state.method.finish(batches):
                rows = [
                    {"kind": "train", **state.tags, "epoch": state.length.loop_epochs, "metric": k, "value": v}
                    for k, v in final.items()
                ]
                state.history += rows
                watch.log([{**row, "kind": "final"} for row in rows])
    finally:
        watch.close()
    return _save_outputs(run_dir, run_cfg, state, batches.classes)


def check_processes(run_cfg: RunConfig, settings: TrainingSettings) -> None:
    """The run is started as `training.gpus` processes, and its global batch splits among them."""
    experiment, world = run_cfg["experiment"], distributed.world()
    if settings.gpus != world:
        raise ValueError(
            f"{experiment} seed {run_cfg['seed']} asks for training.gpus = {settings.gpus} but runs in "
            f"{world} process(es): start it with `python -m torch.distributed.run --standalone "
            f"--nproc_per_node {settings.gpus} -m debias_workbench train ...` (the workflow's train rule "
            "does)"
        )
    if settings.batch_size % world:
        raise ValueError(
            f"{experiment}: training.batch_size {settings.batch_size} (the global batch) does not split "
            f"into training.gpus = {world} equal shares; make it a multiple of gpus"
        )


def training_batches(
    run_cfg: RunConfig,
    settings: TrainingSettings,
    train_store: Path,
    aligned_stores: dict[str, Path],
    device: torch.device,
) -> ZarrBatches:
    """The run's training split, with the fields its method reads and the stores of its aligned variants."""
    method_cls = get_method(run_cfg["method"])
    if missing := set(method_cls.aligned_variants) - set(aligned_stores):
        raise ValueError(
            f"method {run_cfg['method']!r} needs the stores of {method_cls.aligned_variants}; missing {sorted(missing)}"
        )
    world, rank = distributed.world(), distributed.rank()
    with phase("loading"):  # the store's split read (into memory when it fits: training.loader.in_memory_max_gb)
        return ZarrBatches(
            train_store,
            "train",
            settings.batch_size,
            shuffle=True,
            seed=run_cfg["seed"],
            name=run_cfg["experiment"],
            drop_last=True,
            **settings.loader.batches_args(),
            fields=("images", "labels", "bias_labels", *method_cls.extra_fields),
            pin_memory=device.type == "cuda",
            aligned=aligned_stores,
            max_batches=settings.steps_per_epoch,
            shard=(rank, world) if world > 1 else None,
            cuts_views=method_cls.cuts_photo_views,
        )


def _set_up(
    run_cfg: RunConfig,
    batches: ZarrBatches,
    device: torch.device,
    ckpt_path: Path,
    prerequisites: Mapping[str, Path],
    log: RunLog,
) -> RunState:
    """The method built and set up on the training split (with its `prerequisites`' files, where given),
    its schedulers, and the checkpoint resumed."""
    experiment = run_cfg["experiment"]
    method = build_method(run_cfg, len(batches.classes), device)
    spec = method_spec(run_cfg["method"])
    if unneeded := sorted(set(prerequisites) - set(spec.prerequisites)):
        raise ValueError(
            f"{experiment}: method {run_cfg['method']!r} needs no prerequisite {', '.join(unneeded)} "
            f"(it needs: {', '.join(spec.prerequisites) or 'none'})"
        )
    method.prerequisite_files = dict(prerequisites)
    distributed.broadcast_state_(method)
    length = run_length(run_cfg["training"], len(batches), spec.epochs_before_run(run_cfg["method_args"]))
    if outside := switches_outside(run_cfg["method_args"], spec.within_run, length):
        raise ValueError(
            f"{experiment}: method_args "
            + "; ".join(outside.values())
            + f" ({length.steps_per_epoch} steps an epoch): set training.iterations to the paper's "
            "run length, or move the switch"
        )
    method.pre_steps, method.total_steps = length.pre_steps, length.steps
    prepared = method.setup(batches)
    schedulers = make_schedulers(method, run_cfg["training"], length.epochs)
    run_hash = config_hash(run_cfg)
    start_epoch, history, part = resume(ckpt_path, method, schedulers, run_hash, log)
    # the precision is the machine's choice as much as the config's (training.build.cpu_has_native_bf16):
    # kept with every row
    tags = {
        "experiment": experiment,
        "method": run_cfg["method"],
        "seed": run_cfg["seed"],
        "precision": precision(method),
    }
    if start_epoch == 0:  # a resumed run has these rows in its checkpoint's history
        history = [{"kind": "train", **tags, "epoch": 0, "metric": k, "value": v} for k, v in prepared.items()]
    done = length.steps_before(start_epoch, part.steps if part else 0)
    return RunState(
        method, schedulers, length, tags, run_hash, start_epoch, history, Progress(length.all_steps, done), log, part
    )


def _train_epoch(
    state: RunState,
    batches: ZarrBatches,
    epoch: int,
    settings: TrainingSettings,
    device: torch.device,
    monitor: Monitor | None,
    part: EpochState | None = None,
) -> list[dict]:
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
    for batch in tqdm(
        itertools.islice(batches.epoch(epoch, in_epoch), skipped, None),
        total=in_epoch,
        initial=skipped,
        desc=f"{experiment} s{seed} e{epoch}",
        leave=False,
        mininterval=5,
        disable=None if main else True,
    ):
        part.add(method.update({k: v.to(device, non_blocking=True) for k, v in batch.items()}))
        distributed.broadcast_batch_norm_(method)  # rank 0's running statistics, as DDP's buffers
        if main and (line := state.progress.tick()):  # a cluster job's log has no progress bar
            state.log.say(line)
        if monitor and main and (epoch * len(batches) + part.steps) % monitor.every_steps == 0:
            t_mon = time.perf_counter()
            with phase("scoring"):
                part.rows += monitor.rows(
                    method, part.interval, {**tags, "epoch": epoch, "step": epoch * len(batches) + part.steps}
                )
            part.interval, monitor_seconds = {}, monitor_seconds + time.perf_counter() - t_mon
        if world == 1 and part.steps < in_epoch and (signal_name := stop_requested()):
            raise StopMidEpoch(part, signal_name)
    elapsed = time.perf_counter() - t0 - monitor_seconds
    speed = (part.steps - skipped) * settings.batch_size / max(elapsed, 1e-9)  # this job's steps of the epoch
    return part.rows + _epoch_rows(state, epoch, part, speed, elapsed)


def _epoch_rows(state: RunState, epoch: int, part: EpochState, images_per_second: float, elapsed: float) -> list[dict]:
    """The end of an epoch: the schedulers' step, and its rows (mean statistics, this job's speed
    and time on it, learning rate), logged."""
    tags, method = state.tags, state.method
    epoch_sums = {k: float(v) for k, v in part.sums.items()}  # the epoch's one read: waits for the device
    if epoch >= state.length.pre_epochs:  # the schedule counts the run's own epochs, not its pre-training
        for sched in state.schedulers:
            sched.step()
    row_stats = {
        **distributed.mean_over_processes(epoch_sums, part.counts),
        "epoch_seconds": elapsed,
        "images_per_second": images_per_second,
        "lr": method.optimizers()[0].param_groups[0]["lr"],
    }
    if any(not math.isfinite(v) for v in row_stats.values()):
        raise FloatingPointError(
            f"{tags['experiment']} seed {tags['seed']}: non-finite training statistics {row_stats} at epoch {epoch}"
        )
    # `<experiment> seed <s> epoch <e>: ...`, as the benchmarks read it
    state.log.say(
        f"epoch {epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in row_stats.items()) + f"; {state.progress.line()}",
        after=" ",
    )
    return [{"kind": "train", **tags, "epoch": epoch, "metric": k, "value": v} for k, v in row_stats.items()]


def _save_outputs(run_dir: Path, run_cfg: RunConfig, state: RunState, classes: list[str]) -> Path:
    """`train_metrics.jsonl` and `model.pt` (rank 0; the checkpoint stays: `run_files`); the others
    wait for them."""
    model_path = run_dir / "model.pt"
    if distributed.is_main():
        with phase("saving"), atomic_path(run_dir / "train_metrics.jsonl") as tmp:
            tmp.write_text("".join(json.dumps(row) + "\n" for row in state.history))
        with phase("saving"), atomic_path(model_path) as tmp:
            torch.save(
                {
                    "state_dict": on_cpu(state.method.state_dict()),
                    "run_config": run_cfg,
                    "config_hash": state.run_hash,
                    "classes": classes,
                },
                tmp,
            )
    distributed.barrier()  # the others return once model.pt exists
    return model_path
