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
A run longer than its job stops itself at an epoch boundary before the job's time runs out
(`job_time`: `ContinueInNextJob`) and the next job resumes it the same way. A method's pre-training
(`x-before-run`: LearnedMixin+H's G, as the ReBias authors' `pretrain()`) runs as the loop's first
epochs, before the run's own and without scheduler steps, each checkpointed as any epoch.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from .evaluation import group_metrics, predict_store, scored_accuracy, scoring_batches
from .job_time import STOP_MARGIN_SECONDS, ContinueInNextJob, JobBudget
from .methods import get_method
from .methods import spec as method_spec
from .methods.base import Method
from .methods.bias_amplification import LfFBiasEnsemble
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
class Monitor:
    """Learning curves (ReBias Fig. 4): every `every_steps` training steps, the accuracy on the
    val split of each of `stores` (with `groups`, also its `group_metrics`: the points model
    selection chooses from) and the mean of each training statistic since the last point."""

    stores: dict[str, Path]
    every_steps: int
    batch_size: int = 256
    groups: bool = False
    _batches: dict[str, ZarrBatches] = field(default_factory=dict, repr=False)  # each store's val split, read once

    def rows(self, method: Method, interval: dict[str, list], tags: dict[str, Any]) -> list[dict]:
        stats = [{"metric": k, "value": float(sum(v) / len(v))} for k, v in interval.items()]
        return [{"kind": "curve", **tags, **row} for row in stats + self.accuracies(method, tags)]

    def accuracies(self, method: Method, tags: dict[str, Any]) -> list[dict[str, Any]]:
        """[{"metric": f"{name}_accuracy", "value", "n", "se"}]: accuracy (%) on the val split of each
        store, its number of images and test-image standard error (and f"{name}_<group metric>"
        where defined), in eval mode."""
        device = next(method.parameters()).device
        method.eval()
        out = []
        for name, store in self.stores.items():
            if name not in self._batches:
                self._batches[name] = scoring_batches(store, "val", self.batch_size, device)
            result = predict_store(lambda x: method.predict(x).argmax(1), store, "val", self.batch_size,
                                   method.augmenter, device, batches=self._batches[name])
            out.append({"metric": f"{name}_accuracy", **scored_accuracy(result)})
            if self.groups:
                out += [{"metric": f"{name}_{k}", **v} for k, v in group_metrics(result, tags, name).items()
                        if math.isfinite(v["value"])]
        method.train()
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


def train(run_cfg: dict[str, Any], train_store: Path, run_dir: Path, aligned_stores: dict[str, Path] | None = None,
          stop_after_epochs: int | None = None, monitor: Monitor | None = None, trackers: Sequence[str] = (),
          budget: JobBudget | None = None, committee: Path | None = None) -> Path:
    """Train the run `run_cfg` (its resolved config: `workflow.slices.run_config`) on
    `train_store`; returns the path of `model.pt`.

    `aligned_stores` gives, for each of the method's `aligned_variants` fields, the store of
    that variant. `monitor` adds learning-curve rows (kind "curve") every few steps.
    `stop_after_epochs` ends the process early (as a kill would) - used by the resume test. `trackers`
    (`training.trackers`) also get every row as it is made.
    `budget` (the job's time, `job_time`): before each epoch but the job's first, a run whose next
    epoch might outlast the job raises `ContinueInNextJob`, its checkpoint kept for the next job.
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
                rows = _train_epoch(state, batches, epoch, settings, device, monitor)
                state.history += rows
                watch.log(rows)
                if distributed.is_main():
                    with phase("saving"):
                        _save_checkpoint(run_dir / CHECKPOINT, state, epoch + 1)
                distributed.barrier()  # no process runs ahead of the last checkpoint
                if budget is not None:
                    budget.record(time.monotonic() - started)
            if final := state.method.finish(batches):
                rows = [{"kind": "train", **state.tags, "epoch": state.length.loop_epochs, "metric": k, "value": v}
                        for k, v in final.items()]
                state.history += rows
                watch.log([{**row, "kind": "final"} for row in rows])
    finally:
        watch.close()
    return _save_outputs(run_dir, run_cfg, state, batches.classes)


def _stop_for_next_job(budget: JobBudget | None, state: RunState, epoch: int, device: torch.device) -> None:
    """Raise `ContinueInNextJob` before `epoch` when the job's `budget` has no room for another
    epoch (rank 0 decides for every process, so all stop at the same checkpoint)."""
    if budget is None or not distributed.main_decides(budget.must_stop(), device):
        return
    line = (f"stopping at epoch {epoch} of {state.length.loop_epochs} to continue in the next job (budget: "
            f"{duration(budget.left())} left of the job, the longest epoch {duration(budget.longest_epoch or 0)}, "
            f"margin {duration(STOP_MARGIN_SECONDS)})")
    state.log.say(line)
    raise ContinueInNextJob(line)


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
    start_epoch, history = _resume(ckpt_path, method, schedulers, run_hash, log)
    # the precision is the machine's choice as much as the config's (training.build.cpu_has_native_bf16):
    # kept with every row
    tags = {"experiment": experiment, "method": run_cfg["method"], "seed": run_cfg["seed"],
            "precision": precision(method)}
    if start_epoch == 0:  # a resumed run has these rows in its checkpoint's history
        history = [{"kind": "train", **tags, "epoch": 0, "metric": k, "value": v} for k, v in prepared.items()]
    done = sum(length.steps_in_epoch(e) for e in range(start_epoch))
    return RunState(method, schedulers, length, tags, run_hash, start_epoch, history, Progress(length.all_steps, done),
                    log)


def _train_epoch(state: RunState, batches: ZarrBatches, epoch: int, settings: TrainingSettings,
                 device: torch.device, monitor: Monitor | None) -> list[dict]:
    """One epoch's steps (and the monitor's points within it); its rows: the curve points and the
    epoch's mean statistics, speed and learning rate."""
    method, tags, world, rank = state.method, state.tags, distributed.world(), distributed.rank()
    experiment, seed, main = tags["experiment"], tags["seed"], distributed.is_main()
    method.train()
    # each process its own augmentations; one process keeps the seed it always had
    method.generator.manual_seed(name_seed("augment", experiment, seed, epoch, *([rank] if world > 1 else [])))
    sums: dict[str, torch.Tensor | float] = {}  # device tensors or host numbers
    counts: dict[str, int] = {}  # a statistic may be logged by some steps only (LearnedMixin's G phase)
    interval: dict[str, list[torch.Tensor | float]] = {}  # statistics since the last curve point
    rows: list[dict] = []
    steps, t0, monitor_seconds = 0, time.perf_counter(), 0.0
    in_epoch = state.length.steps_in_epoch(epoch)
    for batch in tqdm(batches.epoch(epoch, in_epoch), total=in_epoch, desc=f"{experiment} s{seed} e{epoch}",
                      leave=False, mininterval=5, disable=None if main else True):
        stats = method.update({k: v.to(device, non_blocking=True) for k, v in batch.items()})
        distributed.broadcast_batch_norm_(method)  # rank 0's running statistics, as DDP's buffers
        for key, value in stats.items():
            # a device tensor stays there (float64: the sum a Python float would give), read once an
            # epoch; a host number stays a host number
            value = value.double() if isinstance(value, torch.Tensor) else float(value)
            sums[key] = sums.get(key, 0.0) + value
            counts[key] = counts.get(key, 0) + 1
            interval.setdefault(key, []).append(value)
        steps += 1
        if main and (line := state.progress.tick()):  # a cluster job's log has no progress bar
            state.log.say(line)
        if monitor and main and (epoch * len(batches) + steps) % monitor.every_steps == 0:
            t_mon = time.perf_counter()
            with phase("scoring"):
                rows += monitor.rows(method, interval, {**tags, "epoch": epoch, "step": epoch * len(batches) + steps})
            interval, monitor_seconds = {}, monitor_seconds + time.perf_counter() - t_mon
    epoch_sums = {k: float(v) for k, v in sums.items()}  # the epoch's one read: waits for the device
    if epoch >= state.length.pre_epochs:  # the schedule counts the run's own epochs, not its pre-training
        for sched in state.schedulers:
            sched.step()
    elapsed = time.perf_counter() - t0 - monitor_seconds
    row_stats = {**distributed.mean_over_processes(epoch_sums, counts), "epoch_seconds": elapsed,
                 "images_per_second": steps * settings.batch_size / max(elapsed, 1e-9),
                 "lr": method.optimizers()[0].param_groups[0]["lr"]}
    if any(not math.isfinite(v) for v in row_stats.values()):
        raise FloatingPointError(f"{experiment} seed {seed}: non-finite training statistics {row_stats} "
                                 f"at epoch {epoch}")
    # `<experiment> seed <s> epoch <e>: ...`, as the benchmarks read it
    state.log.say(f"epoch {epoch}: " + ", ".join(f"{k}={v:.4g}" for k, v in row_stats.items())
                  + f"; {state.progress.line()}", after=" ")
    return rows + [{"kind": "train", **tags, "epoch": epoch, "metric": k, "value": v} for k, v in row_stats.items()]


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


def _save_checkpoint(path: Path, state: RunState, next_epoch: int) -> None:
    """The run before loop epoch `next_epoch`, and its progress beside it (`run_files`), each atomically."""
    method = state.method
    with atomic_path(path) as tmp:
        torch.save({"method": on_cpu(method.state_dict()),
                    "optimizers": [on_cpu(o.state_dict()) for o in method.optimizers()],
                    "schedulers": [s.state_dict() for s in state.schedulers], "next_epoch": next_epoch,
                    "history": state.history, "config_hash": state.run_hash}, tmp)
    steps = sum(state.length.steps_in_epoch(e) for e in range(next_epoch))
    write_progress(path.parent, steps, state.length.all_steps, state.run_hash)


def _resume(ckpt_path: Path, method: Method, schedulers, run_hash: str, log: RunLog) -> tuple[int, list[dict]]:
    """(next epoch, metric rows so far) from the last checkpoint if it was made with this run's
    config (hash `run_hash`), else (0, [])."""
    if not ckpt_path.exists():
        return 0, []
    # on the CPU: `load_state_dict` copies the weights to their device, and optimiser step counts stay host
    # tensors, as in an uninterrupted run (on the GPU each would be read back every step)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    if state.get("config_hash") != run_hash:
        log.say(f"{ckpt_path} was made with config {state.get('config_hash')}, this run's config is {run_hash} "
                f"(see {ckpt_path.parent / 'config.json'}): starting over from epoch 0")
        return 0, []
    method.load_state_dict(state["method"])
    for opt, opt_state in zip(method.optimizers(), state["optimizers"]):
        opt.load_state_dict(opt_state)
    for sched, sched_state in zip(schedulers, state["schedulers"]):
        sched.load_state_dict(sched_state)
    log.say(f"resumed from {ckpt_path} at epoch {state['next_epoch']}")
    return state["next_epoch"], state["history"]
