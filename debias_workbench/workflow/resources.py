"""Cluster resources of every job, in one place: the partition follows from whether the job asks
for a GPU, and runtime and memory from the config (images, image size, epochs, architecture).

Every runtime comes from the one cost model (`workflow.cost`: measured GPU step times, the
benchmarks' CPU figures) with its stated margin and minimum, never over `cluster.max_job_hours`
(a retry, `attempt`, gets the larger margin; a training run longer than that continues over
several jobs, its rule's retries: `continuation_retries`; a training job asks only for the work its
runs' checkpoints leave: `training_left`); `profiles/slurm/config.yaml` can still
override any rule with `set-resources`. Locally (`--cores N`) only `gpu`, `mem_mb` and threads matter, and the GPU jobs
running at once are capped by the GPUs the node shows (`local_gpu_cap`, applied by the Snakefile; a submitting
run that got it says so at its start: `cluster_gpu_cap_note`).
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debias_workbench.core.provenance import config_hash
from debias_workbench.pipeline.datasets import train_photos
from debias_workbench.training.job_time import WARNING_SECONDS
from debias_workbench.training.prerequisite_kind import PrerequisiteKind
from debias_workbench.training.run_config import RunConfig
from debias_workbench.training.run_files import fraction_done
from debias_workbench.training.settings import LoaderSettings, TrainingSettings

from .cost import (
    cost_model,
    cpu_minutes,
    dataset_images,
    forward_seconds_per_image,
    image_side,
    jobs_needed,
    prerequisite_seconds,
    request_minutes,
    run_estimate,
    runs_at_once_speedup,
    train_side,
)


def partition(config: dict[str, Any], gpu: bool) -> str:
    """The SLURM partition of a job: the GPU partition exactly when it asks for a GPU."""
    return config["cluster"]["gpu_partition" if gpu else "cpu_partition"]


Estimate = Callable[[Any], tuple[float, float]]  # wildcards -> (runtime in minutes, memory in MB)


def visible_gpus() -> int:
    """GPUs this node shows its processes: the devices CUDA_VISIBLE_DEVICES lists where it is set
    (up to the first invalid entry, as CUDA reads it), else the GPUs `nvidia-smi -L` lists, else 0.
    No torch import: the Snakefile asks before planning."""
    shown = os.environ.get("CUDA_VISIBLE_DEVICES")
    if shown is not None:
        count = 0
        for entry in shown.split(","):
            if not entry.strip() or entry.strip().startswith("-"):
                break
            count += 1
        return count
    if (smi := shutil.which("nvidia-smi")) is None:
        return 0
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listing.splitlines())


def local_gpu_cap(given: int | None) -> int | None:
    """The `gpu` resource a local run (`snakemake --cores N`) gets: what the user gave
    (`--resources gpu=K`), else the node's visible GPUs, so that GPU jobs (training, scoring,
    stylization, each `gpu=1`, or `training.gpus`) never share a GPU; None (no cap) on a node
    without GPUs, where those jobs run on the CPU and `--cores` limits them."""
    if given is not None:
        return given
    return visible_gpus() or None


def rule_resources(
    config: dict[str, Any],
    gpu: bool | Callable[[Any], bool],
    estimate: Estimate,
    gpus: Callable[[Any], int] | None = None,
    minutes_left: Callable[[Any], float] | None = None,
) -> dict[str, Any]:
    """`resources:` of a rule (`resources: **rule_resources(...)`): its partition, `gpu=1` if it
    needs one, and each job's memory from `estimate` and its runtime request from the estimate, or
    from `minutes_left` where given (wildcards -> the minutes of work left, read when the attempt is
    submitted: Snakemake evaluates a retry's resources anew) (`cost.request_minutes`: margin and
    minimum, a retry the larger margin, never over `cluster.max_job_hours`). Training rules give
    `gpus` (wildcards -> the run's `training.gpus`): the job then asks for that many GPUs on one
    node (`python -m torch.distributed.run` starts one process per GPU there). `gpu` may be a function of the
    wildcards (`derived_gpu`): the job then asks `gpu` 1 or 0 and its partition follows."""
    if callable(gpu):
        wants = gpu
        return {
            **rule_resources(config, False, estimate, None, minutes_left),
            "slurm_partition": lambda wildcards: partition(config, wants(wildcards)),
            "gpu": lambda wildcards: int(wants(wildcards)),
        }
    minutes = minutes_left or (lambda wildcards: estimate(wildcards)[0])
    out: dict[str, Any] = {
        "slurm_partition": partition(config, gpu),
        "mem_mb": lambda wildcards: int(estimate(wildcards)[1]),
        "runtime": lambda wildcards, attempt: request_minutes(
            minutes(wildcards), config["cluster"]["max_job_hours"], attempt
        ),
    }
    if gpu:
        out["gpu"] = gpus if gpus is not None else 1
        if gpus is not None:
            out["nodes"] = 1
    return out


def warning_seconds(minutes: float) -> int:
    """How long before the end of a job asking `minutes` SLURM warns it: `job_time.WARNING_SECONDS`, or a quarter
    of a shorter job's request (a warning as long as the job would come at its start, and every attempt would then
    stop at its first step)."""
    return int(min(WARNING_SECONDS, minutes * 60 / 4))


def slurm_warning(runtime: Callable[[Any, int], int]) -> dict[str, Any]:
    """The `resources:` that make SLURM send a training job's processes USR1 `warning_seconds` before its
    time limit (`runtime`: the rule's, wildcards and attempt -> minutes) (`sbatch --signal`, through the
    executor's `slurm_extra`): the trainer then checkpoints at its next step and the job ends to continue in
    the next one. A site that sets `slurm_extra` for these rules itself (`set-resources`) adds the option to
    its own."""
    return {"slurm_extra": lambda wildcards, attempt: f"--signal=USR1@{warning_seconds(runtime(wildcards, attempt))}"}


def cluster_gpu_cap_note(local_exec: bool, cap: int | None) -> str | None:
    """What a Snakemake that submits its jobs (not `local_exec`) says at its start where the Snakefile gave it the
    node's GPU count as its `gpu` limit (`cap`, `local_gpu_cap`): while Snakemake reads the Snakefile it has not
    chosen its executor, so a login node with GPUs holds the cluster's GPU jobs in flight to its own count. The
    workflow profile (profiles/slurm) sets the limit itself, and then no cap is applied; None there and locally."""
    if local_exec or cap is None:
        return None
    return (
        f"note: at most {cap} GPU jobs will be in flight at once, the GPUs this node shows (the limit of a local "
        "run, applied while Snakemake read the Snakefile, before it knew it would submit jobs). Give the limit you "
        "want (--resources gpu=N) or use the workflow profile (--workflow-profile profiles/slurm), which sets one."
    )


def allocation_note(local_exec: bool, environ: Mapping[str, str] = os.environ) -> str | None:
    """What a Snakemake that runs its jobs itself (`local_exec`, `--cores N`) inside a SLURM allocation
    (`sbatch` or `salloc`: `SLURM_JOB_ID` set) says at its start, None elsewhere. Its training jobs
    inherit the allocation's job and budget against its time limit (`training.job_time`): a run that
    would outlast it stops at an epoch boundary with its checkpoint and exits 75, which fails its job
    there, since no later job of that Snakemake continues it."""
    job = environ.get("SLURM_JOB_ID")
    if not local_exec or not job:
        return None
    return (
        f"note: this Snakemake runs its jobs itself inside SLURM job {job} (an sbatch or salloc allocation): "
        "each training job budgets against the allocation's time limit, and a run that would outlast it stops "
        "at an epoch boundary with its checkpoint and exits 75, which fails its job here (nothing continues it "
        "in this allocation). Run the workflow again in a new allocation to continue from the checkpoints, or "
        "let Snakemake submit the jobs (--executor slurm --workflow-profile profiles/slurm), where a job that "
        "stops continues in the next one."
    )


def ignore_warning_signal(main_process: bool) -> None:
    """In a cluster job's own Snakemake (not `main_process`, the one that submits): ignore USR1.
    SLURM sends its warning signal to every process of the job step, and Snakemake's default for it
    would end the step, whose remaining processes SLURM then kills before the trainer checkpoints;
    the job's shell and the `train` command inherit the ignored signal, and the train command takes it
    (`job_time.install_stop_signals`)."""
    if not main_process:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def continuation_retries(given: int, job_minutes: Iterable[float], max_job_hours: float) -> int:
    """Retries of a training rule on a cluster: `given` (`--retries`, the profile's, for a job the
    scheduler kills) plus one for each further job its longest job needs (`cost.jobs_needed`). A run
    longer than its job stops at an epoch boundary and exits (`training.job_time`); the retry, asking
    for at most `max_job_hours` again, continues it from its checkpoint."""
    return given + max((jobs_needed(m, max_job_hours) for m in job_minutes), default=1) - 1


def apply_continuation_retries(
    workflow: Any, job_minutes: Callable[[], Mapping[str, Iterable[float]]], max_job_hours: float
) -> None:
    """Where `workflow` (Snakemake's) submits its jobs to a cluster, each training rule's retries (`job_minutes`:
    {rule name: its jobs' estimates}, asked for only there): the given `--retries` plus its continuations
    (`continuation_retries`). Known only once Snakemake executes: it chooses the executor after reading the
    Snakefile, where `workflow.local_exec` is always true, so the workflow calls this at its start
    (`onstart`); a local run and a submitted job's own Snakemake keep `--retries` as given."""
    if not workflow.is_main_process or workflow.local_exec:
        return
    given = workflow.execution_settings.retries
    for rule, minutes in job_minutes().items():
        workflow.get_rule(rule).restart_times = continuation_retries(given, minutes, max_job_hours)


def gpus(runs: Iterable[Mapping[str, Any]]) -> int:
    """The `training.gpus` of a training job's runs (run configs, or a prerequisite's job config), which one
    launcher starts."""
    runs = list(runs)
    asked = {TrainingSettings.of(run["training"]).gpus for run in runs}
    if len(asked) > 1:
        raise ValueError(
            f"runs {[run['experiment'] for run in runs]} train in one job (a pack) but ask for different "
            f"training.gpus {sorted(asked)}: set gpus once for all of them (for a grid: grids.<name>.training)"
        )
    return asked.pop()


def launcher(python: str, gpus: int, threads: int) -> str:
    """The command that starts a training job's Python `python`: itself for one device; for
    `gpus` N > 1, torch's launcher as a module of the same interpreter (`torchrun`) with N
    processes on this node, each with `threads` CPU threads (its OMP_NUM_THREADS overrides the
    job's, which counts the threads of all N)."""
    if gpus == 1:
        return python
    return f"OMP_NUM_THREADS={threads} {python} -m torch.distributed.run --standalone --nproc_per_node {gpus}"


def image_mb(ds_cfg: dict[str, Any], images: int, side: int | None = None) -> float:
    """MiB of `images` uint8 RGB images of `side` px (default: the dataset's image size)."""
    return images * (side or image_side(ds_cfg)) ** 2 * 3 / 2**20


def loader_mb(ds_cfg: dict[str, Any], loader: LoaderSettings, images: int) -> float:
    """Memory of one image field of the training loader (`training.data.ZarrBatches`): the split where
    it fits in `in_memory_max_gb`, else two streamed windows (one read ahead), each of `window_gb`
    and at least 8 read units per class (`training.data.UNITS_PER_CLASS`)."""
    split = image_mb(ds_cfg, images, train_side(ds_cfg))
    if split <= loader.in_memory_max_gb * 1024:
        return split
    unit = image_mb(ds_cfg, ds_cfg.get("chunk_images", 32) * loader.read_chunks, train_side(ds_cfg))
    return 2 * max(loader.window_gb * 1024, 8 * len(ds_cfg.get("classes", [])) * unit)


def streams(run: RunConfig) -> bool:
    """Whether a run's loader streams its training split: the images of the split and of its aligned
    variants together over `training.loader.in_memory_max_gb`, as `training.data.ZarrBatches` decides."""
    ds, loader = run["dataset_config"], TrainingSettings.of(run["training"]).loader
    split = image_mb(ds, dataset_images(ds), train_side(ds)) * (1 + len(run["aligned_variants"]))
    return split > loader.in_memory_max_gb * 1024


def busy_threads(run: RunConfig) -> int:
    """CPU threads one training process keeps busy on a GPU: its main thread launching the kernels (the
    small networks' steps are launch-bound, docs/measurements.md), its loader's reading thread
    (`training.data.in_background`, where `prefetch_batches` > 0) and, streaming, its window reader."""
    read_ahead = TrainingSettings.of(run["training"]).loader.prefetch_batches > 0
    return 1 + read_ahead + (read_ahead and streams(run))


@dataclass(frozen=True)
class RunsAtOnce:
    """How a training job's runs share its GPU (`training.runs_per_gpu`): `at_once` processes side by
    side (its memory follows), `credited` of them counted in its runtime (the measured speedup), and
    `note`, what the plan says of it (None: one run at a time)."""

    at_once: int
    credited: int
    note: str | None


def runs_at_once(runs: list[RunConfig], runs_per_gpu: int, cpus: int) -> RunsAtOnce:
    """The runs of a job asking `cpus` CPUs that train side by side, and whether the measured speedup
    (`cost_model.yaml`'s `runs_at_once`: split in memory, a core or more per busy thread) is counted:
    only where each run holds its split in memory and `cpus` covers every run's busy threads
    (`busy_threads`), else the runs are costed one after the other and the note says why."""
    k = min(runs_per_gpu, len(runs)) if gpus(runs) == 1 else 1
    if k <= 1:
        return RunsAtOnce(1, 1, None)
    model = cost_model()
    measured = f"measured: {model.runs_at_once[0]} runs on {model.runs_at_once_cores} cores, split in memory"
    if streamed := [run["experiment"] for run in runs if streams(run)]:
        why = f"{streamed[0]} streams its split (over training.loader.in_memory_max_gb)"
    elif cpus < (need := k * max(busy_threads(run) for run in runs)):
        why = f"the job asks {cpus} CPU(s) (training.threads), its {k} runs keep {need} threads busy"
    else:
        counted = f"{runs_at_once_speedup(k):.2f}x counted ({cpus} CPUs >= {need} busy threads, assumed enough"
        return RunsAtOnce(k, k, f"{k} runs at once, {counted}; {measured})")
    return RunsAtOnce(k, 1, f"{k} runs at once, speedup not counted: {why}; {measured}")


def training(
    runs: list[RunConfig], runs_per_gpu: int = 1, cpus: int = 1, done: Callable[[RunConfig], float] | None = None
) -> tuple[float, float]:
    """A job training `runs` (run configs) one after the other, each on its `training.gpus` GPUs, asking
    `cpus` CPUs: the minutes of the cost model (`cost.run_estimate`, which credits N GPUs), and N processes
    N times the memory (each caches the training split). With `runs_per_gpu` K > 1 (`training.runs_per_gpu`,
    one GPU each) K of its runs train side by side, each in a process of its own: K times the memory, and
    where the request gives what the speedup was measured with (`runs_at_once`) the minutes divided by it,
    never under the longest run's. `done` (run -> the part of it its checkpoint holds): the minutes of the
    work left (`cost.RunEstimate.seconds_left`)."""
    run_minutes = {  # each run's estimate, once
        id(run): run_estimate(run).seconds_left(done(run) if done else 0.0) / 60 for run in runs
    }
    minutes, mem = sum(run_minutes.values()), 0.0
    for run in runs:
        ds, settings = run["dataset_config"], TrainingSettings.of(run["training"])
        mem = max(
            mem,
            settings.gpus
            * (4000 + loader_mb(ds, settings.loader, dataset_images(ds)) * (1 + len(run["aligned_variants"]))),
        )
    shared = runs_at_once(runs, runs_per_gpu, cpus)
    if shared.credited > 1:
        minutes = max(max(run_minutes.values()), minutes / runs_at_once_speedup(shared.credited))
    return minutes, mem * shared.at_once


def training_left(runs: list[RunConfig], runs_per_gpu: int, cpus: int, runs_dir: str | Path) -> float:
    """Minutes of the work left of a job training `runs` (`training`, asking `cpus` CPUs), each run's checkpoint under
    `runs_dir/<experiment>/seed<seed>/` telling how much of it is done (`training.run_files`): a job
    retried or continued after most of its epochs asks the scheduler for the rest, not for the whole."""

    def done(run: RunConfig) -> float:
        return fraction_done(Path(runs_dir) / run["experiment"] / f"seed{run['seed']}", config_hash(run))

    return training(runs, runs_per_gpu, cpus, done)[0]


def prerequisite(kind: PrerequisiteKind, job_cfg: dict[str, Any]) -> tuple[float, float]:
    """A prerequisite's job (`training.prerequisites.job_config`): its work on its `training.gpus` GPUs
    (`cost.prerequisite_seconds`), and a training job's memory for one run."""
    ds, settings = job_cfg["dataset_config"], TrainingSettings.of(job_cfg["training"])
    seconds = prerequisite_seconds(kind, job_cfg)
    return seconds / 60 / settings.gpus, settings.gpus * (4000 + loader_mb(ds, settings.loader, dataset_images(ds)))


def evaluation(config: dict[str, Any], stores: int, models: int = 1, dataset: str | None = None) -> tuple[float, float]:
    """A job scoring `models` on `stores` val sets of `dataset` (default: the evaluation dataset): a
    forward pass of each image through the config's network (`cost.forward_seconds_per_image`)."""
    ds = config["datasets"][dataset or config["evaluation"]["dataset"]]
    images = dataset_images(ds, "val") * stores * models
    return (
        images * forward_seconds_per_image([config["training"]["arch"]], image_side(ds)) / 60,
        4000 + image_mb(ds, dataset_images(ds, "val")) * 2,
    )


def segment_shard(config: dict[str, Any], dataset: str, images: int) -> tuple[float, float]:
    """One segmentation job of `images` items: GrabCut's CPU time per image, scaled by its iterations (measured
    at 10); its memory, the job's arrays (with its squashed photos under `train_views: photo`)."""
    ds = config["datasets"][dataset]
    minutes = cpu_minutes("segment", images, image_side(ds), ds["segmentation"]["iterations"] / 10)
    photos = image_mb(ds, images, train_side(ds)) if train_photos(ds) else 0.0
    return minutes, 1000 + image_mb(ds, images) * 4 + photos


def derived_shard(config: dict[str, Any], dataset: str, variant: str, images: int) -> tuple[float, float]:
    """One job of a derived variant making `images` images: AdaIN (a GPU job), texture synthesis or corruption
    (CPU), at its work size."""
    ds = config["datasets"][dataset]
    side = ds[variant].get("work_size") or image_side(ds)
    return cpu_minutes(variant, images, side), 3000 + image_mb(ds, images) * 4


def derived_gpu(config: dict[str, Any], dataset: str, variant: str, images: int) -> bool:
    """Whether a job of a derived variant that runs on a GPU (stylization) making `images` images asks for one: only
    where its work on one core (the cost model's CPU figure) is at least `cluster.min_job_minutes`. Less (a small
    dataset's whole stylization in a real-scale config) is a CPU job's minutes of work, which would wait in a GPU
    queue and hold a GPU for its start-up; the step runs on the CPU where it finds no GPU. Where the setting is 0 (the
    demo) every such job asks for a GPU."""
    return derived_shard(config, dataset, variant, images)[0] >= config["cluster"]["min_job_minutes"]


def min_job_images(config: dict[str, Any], dataset: str, step: str) -> int:
    """The fewest images a job of generation step `step` ("segment" or a derived variant) of `dataset` takes:
    enough for `cluster.min_job_minutes` by the cost model (`pipeline.shards.job_blocks` packs whole blocks up
    to it), so that no such job is a scheduler's minute of work; 1 (a job per block) where that is 0."""
    one = segment_shard(config, dataset, 1) if step == "segment" else derived_shard(config, dataset, step, 1)
    return max(1, math.ceil(config["cluster"]["min_job_minutes"] / one[0]))


#: below this many images a variant store is a few seconds of work: one process builds it, so a
#: 2-core machine does not hold a core idle waiting to give the job both
PARALLEL_VARIANT_IMAGES = 20_000


def variant_threads(config: dict[str, Any], dataset: str) -> int:
    """Worker processes of one variant job: 8 for real data, 1 for the small embedded set."""
    ds = config["datasets"][dataset]
    return 8 if dataset_images(ds) + dataset_images(ds, "val") >= PARALLEL_VARIANT_IMAGES else 1


def generation(config: dict[str, Any], dataset: str) -> tuple[float, float]:
    """A CPU job over a whole dataset (listing, gather, one variant store)."""
    ds = config["datasets"][dataset]
    images = dataset_images(ds) + dataset_images(ds, "val")
    return cpu_minutes("dataset_pass", images, image_side(ds)), 2000 + image_mb(ds, 256) * 8
