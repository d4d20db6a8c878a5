"""What a config costs before anything runs: every training run grouped by the paper table it feeds, and
every job with its scheduler request, from the one cost model (`workflow.cost`) the Snakefile's
`resources:` read (`workflow.resources`).

It needs no data: the config is merged over `config/config.yaml` as the Snakefile does, validated and
expanded (`resolve_config`); the files and folders it names that are not there yet are listed
(`missing`), not fatal. The jobs mirror the rule files: a data generation job per step of each dataset
the runs, their scorings and the report read (in9's listing, segmentation jobs and gather, one job per
variant store, a derived variant's jobs and gather, each staged step's jobs of whole blocks of at least
`cluster.min_job_minutes` over the splits it builds; one job per variant of the other families), one
prerequisite job per prerequisite artifact the runs need, one training job per pack and seed
(`workflow.config.packs`), one scoring job per scoring pack, the analyses
and the report. A run's table is the protocol (`protocols.<paper>.title`) that lists it (an experiment, or
`<grid>/<method>` for every train variant of that grid method); other runs group by the reason a paper
config's `scope.extra` gives (`workflow.scope`), their grid's report section, their sweep, the table of the
paper whose expansion adds them (`workflow.paper_hooks`: U2-Net repeats), or as runs outside every protocol.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from debias_workbench.core.names import IMAGENET_EXPERIMENT
from debias_workbench.core.schema_defaults import SCHEMA_PATH
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.datasets.base import GenerationJob
from debias_workbench.training.prerequisites import jobs as prerequisites
from debias_workbench.training.run_config import RunConfig

from . import cost, paper_hooks, resources
from .config import (
    Pack,
    background_challenge_runs,
    grid_experiment,
    pack_jobs,
    packs,
    resolve_config,
    runs,
    scoring,
    scoring_packs,
)
from .job_groups import JobGroups
from .lookup import dataset_family, dataset_variants, deep_merge
from .plan_jobs import Job, grouped, job_groups
from .scope import scoped
from .slices import run_config
from .user_paths import missing_paths

#: the Snakefile's own config file, under every config given
DEFAULT_CONFIG = SCHEMA_PATH.with_name("config.yaml")
#: the report rule's estimate (rules/report.smk)
REPORT_ESTIMATE = (30.0, 4000.0)
#: groups of the jobs that feed no single table
DATA, ANALYSES = "data generation", "analyses, Base (IN) and the report"
OUTSIDE = "runs outside every protocol (no paper table names them)"
#: a training job: its pack, wildcards and run configs
PackRuns = tuple[Pack, dict[str, str], list[RunConfig]]


@dataclass(frozen=True)
class RunLine:
    """One training run (experiment, seed), its estimate, and `gpu_hours`, its share of its training job's
    GPU-hours (the job's by the runs' wall time: where its runs share a GPU with the speedup counted,
    less than the run's own `estimate.gpu_seconds`), so that a table's run rows add up to its training jobs."""

    experiment: str
    seed: int
    table: str
    estimate: cost.RunEstimate
    gpu_hours: float
    streams: bool  #: its loader streams the split (`resources.streams`): its row measured the split in memory


@dataclass
class Plan:
    files: list[str]
    max_job_hours: float
    missing: list[str]
    runs: list[RunLine] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)


def load_config(files: list[Path]) -> dict[str, Any]:
    """`config/config.yaml` with each of `files` merged over it in order, as the Snakefile's `configfile`
    and `--configfile` merge them."""
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for path in files:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text()) or {})
    return config


def _experiments_of(config: dict[str, Any], run: str) -> list[str]:
    """The experiments of a protocol's or scope's run: an experiment, or `<grid>/<method>` on every train variant."""
    grid, _, method = run.partition("/")
    return [grid_experiment(grid, method, v) for v in config["grids"][grid]["train_variants"]] if method else [grid]


def run_tables(config: dict[str, Any]) -> dict[str, str]:
    """{experiment: the table its runs feed} over an expanded config (module docstring)."""
    listed: dict[str, str] = {}
    for protocol in config.get("protocols", {}).values():
        for run in protocol.get("runs", []):
            for name in _experiments_of(config, run):
                listed.setdefault(name, protocol["title"])
    # the runs a paper config keeps with its reason (workflow/scope.py)
    extra = {
        name: reason
        for run, reason in config.get("scope", {}).get("extra", {}).items()
        for name in _experiments_of(config, run)
    }
    sweeps = {exp: name for name, sweep in config.get("sweep_points", {}).items() for _v, exp in sweep["points"]}
    papers = {name: table for tables in paper_hooks.run_tables() for name, table in tables(config).items()}
    out = {}
    for name, exp in config["experiments"].items():
        if name in listed:
            out[name] = listed[name]
        elif name in extra:
            out[name] = f"kept by the config: {extra[name]}"
        elif name in sweeps:
            out[name] = f"sweep {sweeps[name]} (a figure)"
        elif name in papers:  # runs a paper's expansion adds (workflow/paper_hooks.py)
            out[name] = papers[name]
        elif "grid" in exp:
            out[name] = f"grid {exp['grid']} (no protocol lists these runs)"
        else:
            out[name] = OUTSIDE
    return out


def _job(
    config: dict[str, Any],
    rule: str,
    target: str,
    table: str,
    gpus: int,
    estimate: tuple[float, float],
    cpus: int | None = None,
    note: str | None = None,
    runs: int = 0,
    key: str = "",
) -> Job:
    """A job with its request as `resources.rule_resources` makes it (first attempt); `cpus`: its rule's
    `threads` (default `training.threads`, as the training, scoring and analysis rules ask)."""
    hours = config["cluster"]["max_job_hours"]
    minutes, mem = estimate
    return Job(
        rule,
        target,
        table,
        gpus,
        config["training"]["threads"] if cpus is None else cpus,
        minutes,
        mem,
        cost.request_minutes(minutes, hours),
        cost.jobs_needed(minutes, hours) if gpus else 1,
        note,
        runs,
        key,
    )


def _pack_runs(config: dict[str, Any]) -> Iterator[PackRuns]:
    """(pack, wildcards, run configs) of every training job (rules/runs.smk)."""
    for pack in packs(config):
        for wc in pack_jobs(config, pack):
            yield pack, wc, [run_config(config, e, int(wc["seed"])) for e in pack.experiments(wc)]


def training_jobs(
    config: dict[str, Any], tables: dict[str, str], pack_runs: list[PackRuns]
) -> tuple[list[RunLine], list[Job]]:
    """One job per training pack and seed (rules/runs.smk, `pack_runs`, asking `training.threads` CPUs
    per GPU as `train_threads`), with its runs, each given its share of the job's GPU-hours."""
    lines, jobs = [], []
    per_gpu = config["training"]["runs_per_gpu"]
    for pack, wc, run_cfgs in pack_runs:
        gpus = resources.gpus(run_cfgs)
        cpus = config["training"]["threads"] * gpus
        shared = resources.runs_at_once(run_cfgs, per_gpu, cpus)
        several = f"{gpus} GPUs at {cost.MULTI_GPU_EFFICIENCY:.0%} of a linear speed-up (not measured)"
        target = "+".join(pack.experiments(wc)) + f" seed {wc['seed']}"
        job = _job(
            config,
            f"train{pack.name}",
            target,
            tables[run_cfgs[0]["experiment"]],
            gpus,
            resources.training(run_cfgs, per_gpu, cpus),
            cpus,
            several if gpus > 1 else shared.note,
            len(run_cfgs),
        )
        estimates = [cost.run_estimate(r) for r in run_cfgs]
        wall = sum(e.wall_seconds for e in estimates)
        lines += [
            RunLine(
                r["experiment"],
                r["seed"],
                tables[r["experiment"]],
                e,
                job.gpu_hours * e.wall_seconds / wall,
                resources.streams(r),
            )
            for r, e in zip(run_cfgs, estimates)
        ]
        jobs.append(job)
    return lines, jobs


def prerequisite_jobs(config: dict[str, Any], tables: dict[str, str], pack_runs: list[PackRuns]) -> list[Job]:
    """One job per prerequisite the runs need (rules/prerequisites.smk: the runs that would make the same one
    share it), in the table of the first run that needs it."""
    return [
        _job(
            config,
            "prerequisite",
            f"{job.kind.name} {job.config['dataset']}/{job.config['train_variant']} seed {job.config['seed']} "
            f"({job.digest})",
            tables[job.first_run["experiment"]],
            resources.gpus([job.config]),
            resources.prerequisite(job.kind, job.config),
            config["training"]["threads"] * resources.gpus([job.config]),  # rules/prerequisites.smk's threads
            key=job.digest,
        )
        for job in prerequisites(r for _, _, run_cfgs in pack_runs for r in run_cfgs)
    ]


def scoring_jobs(config: dict[str, Any], tables: dict[str, str]) -> list[Job]:
    """One job per scoring pack and wildcard value (rules/runs.smk), estimated as its rule does."""
    official = config["evaluation"].get("official_dataset")
    official_stores = len(dataset_variants(config, official)) if official else 0
    jobs = []
    for pack in scoring_packs(config):
        wildcard = next(iter(pack.constraints))
        for value in pack.constraints[wildcard]:
            experiment = pack.experiments({wildcard: value})[0]
            dataset, sets, _groups = scoring(config, experiment)
            estimate = resources.evaluation(
                config, len(sets) + official_stores * pack.official, len(pack.members) * len(pack.seeds), dataset
            )
            jobs.append(_job(config, f"evaluate{pack.name}", value, tables[experiment], 1, estimate, key=value))
    return jobs


def used_datasets(config: dict[str, Any]) -> list[str]:
    """The datasets whose stores some run, scoring or the report reads."""
    used = {config["evaluation"]["dataset"], *filter(None, [config["evaluation"].get("official_dataset")])}
    for experiment in config["experiments"]:
        used |= {config["experiments"][experiment]["dataset"], scoring(config, experiment)[0]}
    return [d for d in config["datasets"] if d in used]


def data_jobs(config: dict[str, Any]) -> list[Job]:
    """The generation jobs of every used dataset, as its family lists them (`DatasetFamily.generation_jobs`: a
    staged step's jobs of at least `resources.min_job_images` each)."""
    jobs = []
    for dataset in used_datasets(config):
        jobs += [
            _job(
                config,
                job.rule,
                job.target,
                DATA,
                int(job.gpu and _generation_gpu(config, dataset, job)),
                _generation_estimate(config, dataset, job),
                resources.variant_threads(config, dataset) if job.parallel else 1,
            )
            for job in get_family(dataset_family(config, dataset)).generation_jobs(
                config["datasets"][dataset], dataset, partial(resources.min_job_images, config, dataset)
            )
        ]
    return jobs


def _generation_gpu(config: dict[str, Any], dataset: str, job: GenerationJob) -> bool:
    """Whether a generation job its family runs on a GPU asks for one: a stylization job only where its work is at
    least `cluster.min_job_minutes` (`resources.derived_gpu`)."""
    return job.work != "derived_shard" or resources.derived_gpu(config, dataset, str(job.variant), job.images)


def _generation_estimate(config: dict[str, Any], dataset: str, job: GenerationJob) -> tuple[float, float]:
    """(minutes, MB) of a generation job of `dataset` by the work it does (`workflow.resources`)."""
    if job.work == "segment_shard":
        return resources.segment_shard(config, dataset, job.images)
    if job.work == "derived_shard":
        return resources.derived_shard(config, dataset, str(job.variant), job.images)
    return resources.generation(config, dataset)


def _models(config: dict[str, Any], experiments: list[str]) -> int:
    """The trained models (runs: experiment and seed) of `experiments`, as the rules' `run_files` lists them."""
    return sum(1 for experiment, _seed in runs(config) if experiment in experiments)


def analysis_jobs(config: dict[str, Any]) -> list[Job]:
    """The analyses the papers declare (`paper_hooks.analysis_jobs`, their rule files), Base (IN)
    (rules/evaluate.smk) and the report, estimated as their rules."""
    main_runs = background_challenge_runs(config)
    jobs = [
        _job(
            config,
            a.rule,
            a.name,
            ANALYSES,
            1,
            resources.evaluation(config, a.stores, a.extra_models + _models(config, list(a.experiments))),
            key=a.name if a.keyed else "",
        )
        for a in paper_hooks.analysis_jobs(config, main_runs)
    ]
    if config["evaluation"].get("imagenet_model"):
        stores = len(dataset_variants(config, config["evaluation"]["dataset"]))
        jobs.append(
            _job(
                config,
                "evaluate_imagenet_model",
                IMAGENET_EXPERIMENT,
                ANALYSES,
                1,
                resources.evaluation(config, stores),
            )
        )
    jobs.append(_job(config, "report", "report", ANALYSES, 0, REPORT_ESTIMATE, 1))
    return jobs


def groupable_jobs(config: dict[str, Any], tables: dict[str, str], pack_runs: list[PackRuns]) -> dict[str, list[Job]]:
    """The jobs of each phase a job group may take (`workflow.job_groups`): the prerequisite artifacts, before the runs
    that read them train, and the scorings and GPU analyses, after; no path leads from one job of a phase to another."""
    analyses = [j for j in analysis_jobs(config) if j.gpus]
    scorings = scoring_jobs(config, tables) + analyses
    return {"prerequisites": prerequisite_jobs(config, tables, pack_runs), "scorings": scorings}


def config_job_groups(config: dict[str, Any]) -> JobGroups:
    """The job groups of an expanded config, as the rules read them (rules/common.smk)."""
    return job_groups(config, groupable_jobs(config, run_tables(config), list(_pack_runs(config))))


def plan(files: list[Path]) -> Plan:
    """The plan of the config `files` (merged over config/config.yaml): runs, jobs, missing user paths."""
    config = load_config(files)
    missing = missing_paths(scoped(config))
    config = resolve_config(config)
    tables = run_tables(config)
    pack_runs = list(_pack_runs(config))  # each run's config made once, for its job and its prerequisites'
    lines, training = training_jobs(config, tables, pack_runs)
    out = Plan([str(f) for f in files], float(config["cluster"]["max_job_hours"]), missing, lines)
    phases = groupable_jobs(config, tables, pack_runs)
    report = [j for j in analysis_jobs(config) if not j.gpus]
    jobs = phases["prerequisites"] + training + phases["scorings"] + report
    out.jobs = data_jobs(config) + grouped(config, jobs, job_groups(config, phases))
    return out
