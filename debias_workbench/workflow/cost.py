"""The one cost model of the workflow: how long each job's work takes, and what the scheduler is asked for.

Training is costed from the GPU step times the device check measured (`step_times.yaml`, written by
`python -m benchmarks.device_check --write-step-times`: its card, commit and date travel with every
figure). Each registered method maps onto a measured row (the `cost` its spec declares beside its class:
the row, or a stand-in row with its reason); where a run's shape differs from the row's, its step time
scales by image pixels (side² / measured side²), by batch (linearly) and by the networks it trains (the
relative cost table of `cost_model.yaml`, GFLOPs of one forward pass), never below a launch-bound floor.
Data generation is costed from the CPU-seconds per image of the project's benchmarks (`cost_model.yaml`
names each source).

`workbench plan` and the Snakefile's `resources:` (`workflow.resources`) read the same estimates; a job's
scheduler request is `request_minutes`: the estimate times `REQUEST_MARGIN` plus `MINIMUM_MINUTES`, never
over `cluster.max_job_hours`. Torch-free, like the rest of the workflow layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from debias_workbench.pipeline.datasets import family_name, get_family, train_photos
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.methods.spec import probe_passes
from debias_workbench.training.prerequisite_kind import PrerequisiteKind
from debias_workbench.training.run_config import RunConfig
from debias_workbench.training.run_length import RunLength, run_length
from debias_workbench.training.settings import TrainingSettings

STEP_TIMES_FILE = Path(__file__).with_name("step_times.yaml")
COST_MODEL_FILE = Path(__file__).with_name("cost_model.yaml")
#: a job's runtime request: estimate x REQUEST_MARGIN + MINIMUM_MINUTES (the minimum covers the process
#: start, torch's import, the stores' checks and a cold file cache); a retried job (`attempt` >= 2) gets
#: RETRY_MARGIN, the ceiling: no request is over twice the estimate plus the minimum
REQUEST_MARGIN = 1.5
RETRY_MARGIN = 2.0
MINIMUM_MINUTES = 10
#: share of a linear speed-up that N GPUs of one node give a training run (the gradient all-reduce is not
#: overlapped with the backward pass, and the loader and the per-sample state are not sharded). Not
#: measured: the NCCL path has not run on several real GPUs (docs/cluster.md)
MULTI_GPU_EFFICIENCY = 0.8
#: the image side the GPU rows and the CPU figures are measured at
REFERENCE_SIDE = 224


@dataclass(frozen=True)
class StepRow:
    """One measured training step: the networks it trains, its batch and image side, its time."""

    networks: tuple[str, ...]
    batch: int
    image_size: int
    step_ms: float


@dataclass(frozen=True)
class OtherRun:
    """The step ms of the rows in another run of the device check on the same card (`other_runs`)."""

    commit: str
    date: str
    step_ms: dict[str, float]


@dataclass(frozen=True)
class StepTimes:
    """The device check's rows (`step_times.yaml`), where they were measured, and the same rows in its other
    runs on that card (`other_runs`: how far a row moves between runs, shown beside every figure)."""

    card: str
    commit: str
    date: str
    command: str
    setting: str
    rows: dict[str, StepRow]
    other_runs: tuple[OtherRun, ...] = ()

    def spread(self, row: str) -> tuple[float, float, int]:
        """(lowest, highest step ms, runs) of `row` over the run the rows are from and the other runs
        that measured it; one run: its own step ms twice."""
        values = [self.rows[row].step_ms, *(o.step_ms[row] for o in self.other_runs if row in o.step_ms)]
        return min(values), max(values), len(values)


@dataclass(frozen=True)
class MethodCost:
    """How a method's step is costed: by `row`, training the networks named by `trains` (config keys),
    with `reason` where the row measured another method (None: measured as is); `pretrains`, the networks
    trained before the run's own steps (`x-before-run`), as reference-row steps; `probe`, the work beside the
    steps (`training/methods/spec.py`)."""

    row: str
    reason: str | None
    trains: tuple[str, ...]
    pretrains: tuple[str, ...]
    probe: dict[str, str]  #: {epochs, augment: the method arguments of a linear probe} (empty: none)


@dataclass(frozen=True)
class CostModel:
    step_times: StepTimes
    reference_row: str  # the row ERM-like work is costed by (a prerequisite, pre-training, scoring)
    architectures: dict[str, float]
    architecture_stand_in: str
    min_step_ms: float
    forward_share: float
    cpu_seconds: dict[str, float]
    cpu_sources: dict[str, str]
    runs_at_once: tuple[int, float]  # (runs at once measured, their speedup over one)
    runs_at_once_cores: int  # the CPU cores of the machine that measured it


def read_step_times(path: Path = STEP_TIMES_FILE) -> StepTimes:
    data = yaml.safe_load(path.read_text())
    rows = {
        name: StepRow(tuple(r["networks"]), int(r["batch"]), int(r["image_size"]), float(r["step_ms"]))
        for name, r in data["rows"].items()
    }
    others = tuple(
        OtherRun(str(o["commit"]), str(o["date"]), {k: float(v) for k, v in o["step_ms"].items()})
        for o in data.get("other_runs", [])
    )
    return StepTimes(
        str(data["card"]), str(data["commit"]), str(data["date"]), data["command"], data["setting"], rows, others
    )


@cache
def cost_model() -> CostModel:
    """The model of the package's two data files, read once per process."""
    data = yaml.safe_load(COST_MODEL_FILE.read_text())
    cpu = data["cpu_seconds_per_image"]
    return CostModel(
        read_step_times(),
        data["reference_row"],
        {k: float(v) for k, v in data["architectures"].items()},
        data["architecture_stand_in"],
        float(data["min_step_ms"]),
        float(data["forward_share"]),
        {k: float(v["seconds"]) for k, v in cpu.items()},
        {k: v["source"] for k, v in cpu.items()},
        (int(data["runs_at_once"]["runs"]), float(data["runs_at_once"]["speedup"])),
        int(data["runs_at_once"]["cores"]),
    )


def runs_at_once_speedup(k: int) -> float:
    """How much faster k runs go through one GPU side by side than one after the other (cost_model.yaml's
    measured point, linear between 1 and it, not extrapolated beyond)."""
    measured, speedup = cost_model().runs_at_once
    return 1 + (speedup - 1) * (min(k, measured) - 1) / (measured - 1)


def method_cost(method: str, method_args: dict[str, Any]) -> MethodCost:
    """The row and networks a run of `method` with `method_args` is costed by: the `cost` its spec
    declares (`training/methods/spec.py`; `when` entries first)."""
    entry = declared = method_spec(method).cost
    for arg, values in entry.get("when", {}).items():
        if method_args.get(arg) in values:
            entry = values[method_args[arg]]
    return MethodCost(
        entry["row"],
        entry.get("reason"),
        tuple(entry.get("trains", ("arch",))),
        tuple(entry.get("pretrains", ())),
        dict(declared.get("probe", {})),
    )


def networks(run: RunConfig, keys: tuple[str, ...]) -> list[str]:
    """The networks `keys` (a method's `trains` or `pretrains`) name in `run`: each looked up in the run's
    method_args, then its training section."""
    return [str(run["method_args"].get(k) or run["training"][k]) for k in keys]


def architecture_cost(names: list[str] | tuple[str, ...]) -> float:
    """Summed forward cost of `names` (an architecture not in the table costs as the stand-in's)."""
    model = cost_model()
    return sum(model.architectures.get(n, model.architectures[model.architecture_stand_in]) for n in names)


def scaled_step_ms(row_name: str, nets: list[str], side: int, batch: int) -> tuple[float, bool]:
    """(ms of one step of `nets` at `side` px and `batch` images scaled from measured row `row_name`,
    whether it was scaled at all)."""
    model = cost_model()
    row = model.step_times.rows[row_name]
    factor = (
        (side / row.image_size) ** 2 * (batch / row.batch) * architecture_cost(nets) / architecture_cost(row.networks)
    )
    scaled = not math.isclose(factor, 1.0) or sorted(nets) != sorted(row.networks)
    return (max(row.step_ms * factor, model.min_step_ms) if scaled else row.step_ms), scaled


def forward_seconds_per_image(nets: list[str], side: int) -> float:
    """GPU seconds of a forward pass of one image through `nets` (scoring, probe features, model
    selection): the reference row's measured per-image step cost, scaled, times the model's forward share."""
    model = cost_model()
    batch = model.step_times.rows[model.reference_row].batch
    ms, _ = scaled_step_ms(model.reference_row, nets, side, batch)
    return ms / 1000 / batch * model.forward_share


def dataset_images(ds_cfg: dict[str, Any], split: str = "train") -> int:
    """Images of a dataset's split, from its config (its family's estimate)."""
    return get_family(family_name(ds_cfg)).expected_images(ds_cfg, split)


def image_side(ds_cfg: dict[str, Any]) -> int:
    return int(ds_cfg.get("image_size", 28))


def train_side(ds_cfg: dict[str, Any]) -> int:
    """Side of the stored training images: the squashed photos' where the dataset's family stores whole training
    photos (`DatasetFamily.train_photos`), else `image_side`."""
    photos = train_photos(ds_cfg)
    return photos.side if photos else image_side(ds_cfg)


@dataclass(frozen=True)
class RunEstimate:
    """A training run's GPU work on the card of `step_times.yaml`: its optimiser steps at `step_ms`, and
    the extra work beside them (the linear probe, scoring during training); a prerequisite, made by a job of its
    own, is not part of it (`prerequisite_seconds`)."""

    method: str
    row: str
    reason: str | None  #: why `row` stands in for this method (None: the row measured it)
    scaled: bool  #: the step time is scaled from the row (another size, batch or network)
    steps: int
    images_per_step: int
    step_ms: float
    extra_seconds: float
    gpus: int

    @property
    def wall_seconds(self) -> float:
        """Seconds the run takes on its `gpus` GPUs: one GPU's work, or on N GPUs each working
        1 / (N x `MULTI_GPU_EFFICIENCY`) of it (the job's runtime follows this)."""
        return self.seconds_left(0.0)

    def seconds_left(self, done: float) -> float:
        """`wall_seconds` still to go once the part `done` (0 to 1) of the run's steps is (its
        checkpoint's, when a job continues or retries it): the steps left, and the extra work whole
        (the probe comes last; pre-training and scoring during training are counted whole, erring long)."""
        work = self.steps * (1.0 - done) * self.step_ms / 1000 + self.extra_seconds
        return work / (self.gpus * MULTI_GPU_EFFICIENCY) if self.gpus > 1 else work

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds the run holds: its wall seconds on each of its `gpus` GPUs (a run on two GPUs at
        `MULTI_GPU_EFFICIENCY` costs 1 / 0.8 = 1.25x the GPU-hours of one, though it ends sooner)."""
        return self.wall_seconds * self.gpus

    @property
    def estimate(self) -> bool:
        """Whether the figure is a scaled estimate or a stand-in's, not the measured row as is."""
        return self.scaled or self.reason is not None


def run_estimate(run: RunConfig) -> RunEstimate:
    """The estimate of one run (a run config, `workflow.slices.run_config`)."""
    ds, training, args = run["dataset_config"], run["training"], run["method_args"]
    batch, side, images = int(training["batch_size"]), image_side(ds), dataset_images(ds)
    cost = method_cost(run["method"], args)
    nets = networks(run, cost.trains)
    step_ms, scaled = scaled_step_ms(cost.row, nets, side, batch)
    length = run_length(training, math.ceil(images / batch), method_spec(run["method"]).epochs_before_run(args))
    return RunEstimate(
        run["method"],
        cost.row,
        cost.reason,
        scaled,
        length.steps,
        batch,
        step_ms,
        _extra_seconds(run, cost, length, images),
        TrainingSettings.of(training).gpus,
    )


def _extra_seconds(run: RunConfig, cost: MethodCost, length: RunLength, images: int) -> float:
    """GPU seconds beside the run's own optimiser steps: the pre-training before them
    (`length.pre_steps`, LearnedMixin+H's G alone: reference-row steps of the method's `pretrains`), the
    linear probe (`epochs` passes of the training images through the backbone with `augment`, else one),
    and the scoring of the validation split every `every_steps` for curves and model selection; not a
    prerequisite, which the run reads from its own job's file (`prerequisite_seconds`)."""
    ds, args, reference = run["dataset_config"], run["method_args"], cost_model().reference_row
    side, batch = image_side(ds), int(run["training"]["batch_size"])
    nets = networks(run, cost.trains)
    seconds = 0.0
    if length.pre_steps:
        pre_ms, _ = scaled_step_ms(reference, networks(run, cost.pretrains), side, batch)
        seconds += length.pre_steps * pre_ms / 1000
    if passes := probe_passes(cost.probe, args):
        seconds += passes * images * forward_seconds_per_image([run["training"]["arch"]], side)
    for monitor in ("curves", "model_selection"):
        if monitor in run:
            scorings = length.all_steps // run[monitor]["every_steps"]
            seconds += scorings * dataset_images(ds, "val") * forward_seconds_per_image(nets, side)
    return seconds


def prerequisite_seconds(kind: PrerequisiteKind, job_cfg: dict[str, Any]) -> float:
    """GPU seconds of a prerequisite's job (`training.prerequisites.job_config`), as its kind's cost declares
    (`PrerequisiteCost`): its `networks` networks of the run's architecture, `steps` steps each of the
    reference row, at the run's batch size on the dataset's image side."""
    training, args = job_cfg["training"], job_cfg[kind.name]
    reference, side = cost_model().reference_row, image_side(job_cfg["dataset_config"])
    step_ms, _ = scaled_step_ms(reference, [training["arch"]], side, int(training["batch_size"]))
    networks = int(args[kind.cost.networks]) if kind.cost.networks else 1
    return networks * int(args[kind.cost.steps]) * step_ms / 1000


def request_minutes(estimate_minutes: float, max_job_hours: float, attempt: int = 1, minimum_share: float = 1.0) -> int:
    """The runtime a job asks the scheduler for: `estimate_minutes` x `REQUEST_MARGIN` (a retry:
    `RETRY_MARGIN`) + `MINIMUM_MINUTES` (x `minimum_share`: the first members of a job group,
    `workflow.job_groups`), never over `max_job_hours` (a run longer than that trains over several jobs:
    `jobs_needed`)."""
    margin = REQUEST_MARGIN if attempt <= 1 else RETRY_MARGIN
    return min(math.ceil(estimate_minutes * margin + MINIMUM_MINUTES * minimum_share), int(max_job_hours * 60))


def job_budget_minutes(max_job_hours: float) -> float:
    """The work one job of at most `max_job_hours` can promise to finish under the margin."""
    return max(1.0, (max_job_hours * 60 - MINIMUM_MINUTES) / REQUEST_MARGIN)


def jobs_needed(estimate_minutes: float, max_job_hours: float) -> int:
    """Scheduler jobs a training job of `estimate_minutes` needs, each continuing from the last one's
    checkpoint, when the cap `max_job_hours` is below its request."""
    return max(1, math.ceil(estimate_minutes / job_budget_minutes(max_job_hours)))


def cpu_minutes(step: str, images: int, side: int, factor: float = 1.0) -> float:
    """Minutes of one core for generation step `step` (a key of `cpu_seconds_per_image`) over `images`
    images at `side` px, times `factor` (GrabCut's iterations / 10)."""
    return images * cost_model().cpu_seconds[step] * (side / REFERENCE_SIDE) ** 2 * factor / 60
