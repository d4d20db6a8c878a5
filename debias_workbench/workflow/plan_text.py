"""`workbench plan --configfile config/X.yaml [--json]`: what a config costs, as a terminal table per paper
table with totals at the end, or as one JSON object (`summary`), from `workflow.plan`."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from . import cost
from .plan import Plan, RunLine, plan
from .plan_jobs import Job


def _hours(minutes: float) -> float:
    return round(minutes / 60, 3)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _table_figures(p: Plan) -> dict[str, dict[str, Any]]:
    """{table: its runs and their GPU-hours (each run's share of its training job's), its scheduler jobs and
    their GPU- and CPU-hours} in first-seen order. A table's GPU-hours are its jobs' (GPUs x hours), and its
    training jobs' are its runs' shares: the table is the sum of its rows either way."""
    out: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"runs": 0, "run_gpu_hours": 0.0, "jobs": 0, "gpu_hours": 0.0, "cpu_hours": 0.0}
    )
    for line in p.runs:
        out[line.table]["runs"] += 1
        out[line.table]["run_gpu_hours"] += line.gpu_hours
    for job in p.jobs:
        figures = out[job.table]
        figures["jobs"] += job.jobs_needed
        figures["gpu_hours"] += job.gpu_hours
        figures["cpu_hours"] += job.cpu_hours
    return {k: {n: round(v, 3) if isinstance(v, float) else v for n, v in f.items()} for k, f in out.items()}


def _row_spread(row: str) -> dict[str, Any]:
    """The measured row's lowest and highest step ms over the device check's runs (`StepTimes.spread`)."""
    low, high, runs = cost.cost_model().step_times.spread(row)
    return {"low_ms": low, "high_ms": high, "runs": runs}


def _spread_text(row: str) -> str:
    """A row's step ms beside the run rows: its range over the check's runs, or "one run"."""
    spread = _row_spread(row)
    if spread["runs"] == 1:
        return f"{spread['low_ms']:g} one run"
    return f"{spread['low_ms']:g}-{spread['high_ms']:g} ({spread['runs']})"


def _runs_text() -> str:
    """Which runs of the device check the step rows come from, and what the plan shows of their spread."""
    times = cost.cost_model().step_times
    if not times.other_runs:
        return "step rows: one run of the device check (no spread between runs known)"
    commits = ", ".join([times.commit, *(o.commit for o in times.other_runs)])
    return (
        f"step rows: {1 + len(times.other_runs)} runs of the device check (commits {commits}); the figures use "
        f"{times.commit}'s, 'row ms' beside each run its row's lowest-highest step ms over the runs"
    )


def _run_json(line: RunLine) -> dict[str, Any]:
    e = line.estimate
    return {
        "experiment": line.experiment,
        "seed": line.seed,
        "table": line.table,
        "method": e.method,
        "row": e.row,
        "estimate": e.estimate,
        "stand_in_reason": e.reason,
        "loader": "streams" if line.streams else "in memory",
        "steps": e.steps,
        "images_per_step": e.images_per_step,
        "step_ms": round(e.step_ms, 2),
        "row_step_ms": _row_spread(e.row),
        "gpus": e.gpus,
        "gpu_hours_alone": round(e.gpu_seconds / 3600, 4),
        "gpu_hours": round(line.gpu_hours, 4),
    }


def _job_json(job: Job) -> dict[str, Any]:
    return {
        "rule": job.rule,
        "target": job.target,
        "table": job.table,
        "gpus": job.gpus,
        "cpus": job.cpus,
        "mem_mb": int(job.mem_mb),
        "estimate_hours": _hours(job.estimate_minutes),
        "gpu_hours": round(job.gpu_hours, 4),
        "cpu_hours": round(job.cpu_hours, 4),
        "runtime_minutes": job.request_minutes,
        "jobs_needed": job.jobs_needed,
        "runs": job.runs,
        "note": job.note,
        **({"members": [_job_json(m) for m in job.members]} if job.members else {}),
    }


def summary(p: Plan) -> dict[str, Any]:
    """The plan as one JSON-ready object: totals, per-table figures, every run and every job."""
    times = cost.cost_model().step_times
    largest = max(p.jobs, key=lambda j: j.request_minutes)
    return {
        "config_files": p.files,
        "card": times.card,
        "step_times": {
            "commit": times.commit,
            "date": times.date,
            "setting": times.setting,
            "other_runs": [{"commit": o.commit, "date": o.date} for o in times.other_runs],
        },
        "max_job_hours": p.max_job_hours,
        "missing_paths": p.missing,
        "gpu_hours": round(sum(j.gpu_hours for j in p.jobs), 2),
        "cpu_hours": round(sum(j.cpu_hours for j in p.jobs), 2),
        "scheduler_jobs": sum(j.jobs_needed for j in p.jobs),
        "largest_request": {
            "runtime_hours": _hours(largest.request_minutes),
            "rule": largest.rule,
            "target": largest.target,
        },
        "tables": _table_figures(p),
        "runs": [_run_json(r) for r in p.runs],
        "jobs": [_job_json(j) for j in p.jobs],
    }


def _run_rows(lines: list[RunLine]) -> list[str]:
    """One line per experiment (its seeds together): method, row, steps, images per step, its GPU-hours
    (its runs' shares of their jobs', `RunLine.gpu_hours`)."""
    by_experiment: dict[str, list[RunLine]] = defaultdict(list)
    for line in lines:
        by_experiment[line.experiment].append(line)
    out = [
        f"  {'experiment':<44} {'method':<18} {'row':<14} {'row ms':<12} {'seeds':>5} {'steps':>8} {'img/step':>8} "
        f"{'GPU-h/run':>9} {'GPU-h':>8}"
    ]
    for name, group in by_experiment.items():
        e = group[0].estimate
        each = sum(g.gpu_hours for g in group) / len(group)
        row = e.row + ("*" if e.estimate else "") + ("~" if group[0].streams else "")
        out.append(
            f"  {name[:44]:<44} {e.method[:18]:<18} {row:<14} {_spread_text(e.row):<12} {len(group):>5} {e.steps:>8,} "
            f"{e.images_per_step:>8} {each:>9.2f} {each * len(group):>8.2f}"
        )
    return out


def _job_rows(jobs: list[Job]) -> list[str]:
    """One line per rule: its jobs, GPUs and CPUs, largest runtime request, memory, scheduler jobs needed,
    its GPU- or CPU-hours; below it, how its runs share a GPU where several do, or the speed-up assumed of
    several GPUs (`Job.note`)."""
    by_rule: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        by_rule[job.rule].append(job)
    out = []
    for rule, group in by_rule.items():
        longest = max(group, key=lambda j: j.request_minutes)
        needed = sum(j.jobs_needed for j in group)
        hours = sum(j.gpu_hours for j in group) if longest.gpus else sum(j.cpu_hours for j in group)
        out.append(
            f"  jobs {rule}: {len(group)} x {f'{longest.gpus} GPU' if longest.gpus else 'CPU'}"
            f" + {_count(max(j.cpus for j in group), 'CPU')}, "
            f"request up to {longest.request_minutes / 60:.1f} h (estimate {longest.estimate_minutes / 60:.2f} h), "
            f"{max(j.mem_mb for j in group) / 1024:.1f} GiB"
            + (f"; {needed} scheduler jobs" if needed > len(group) else "")
            + f"; {hours:.2f} {'GPU' if longest.gpus else 'CPU'}-h"
        )
        out += [f"    {note}" for note in dict.fromkeys(j.note for j in group if j.note)]
    return out


def text(p: Plan) -> str:
    """The plan for a terminal: per table its runs and its jobs' requests, totals at the end."""
    s, times = summary(p), cost.cost_model().step_times
    lines = [
        f"workbench plan: {' + '.join(['config/config.yaml', *p.files])}",
        f"GPU figures for {times.card} (step times of commit {times.commit}, {times.date}: {times.setting}); "
        f"* = a scaled estimate or a stand-in row (docs/cluster.md, What a config costs); ~ = the run streams its "
        "split, its row measured it in memory (streaming rows: 0.94-1.32x the step, docs/measurements.md)",
        "GPU-h = GPUs x hours. A table's GPU-h is the sum of its job rows; its training jobs' the sum of its run "
        "rows (each run its share of its job's, with several runs at once on a GPU where the job's request "
        "lets the measured speedup count: the note under the job row says)",
        _runs_text(),
    ]
    if p.missing:
        lines += [
            "",
            "paths still to fill (the workflow stops on these; the plan does not):",
            *[f"  {m}" for m in p.missing],
        ]
    for table, figures in s["tables"].items():
        lines += [
            "",
            f"== {table}: {figures['runs']} runs, {figures['gpu_hours']:.1f} GPU-h, {figures['cpu_hours']:.1f} CPU-h, "
            f"{figures['jobs']} jobs",
        ]
        lines += _run_rows([r for r in p.runs if r.table == table]) if figures["runs"] else []
        lines += _job_rows([j for j in p.jobs if j.table == table])
    big = s["largest_request"]
    lines += [
        "",
        f"total: {s['gpu_hours']:.1f} GPU-h on {times.card}, {s['cpu_hours']:.1f} CPU-h, {len(p.runs)} runs, "
        f"{s['scheduler_jobs']} scheduler jobs; largest request {big['runtime_hours']:.1f} h ({big['rule']} "
        f"{big['target'][:60]}); cluster.max_job_hours {p.max_job_hours:g}",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="workbench plan", description=__doc__.split("\n")[0])
    ap.add_argument(
        "--configfile",
        type=Path,
        nargs="*",
        default=[],
        help="config files merged over config/config.yaml in order (as snakemake --configfile)",
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    args = ap.parse_args(argv)
    p = plan(args.configfile)
    print(json.dumps(summary(p), indent=1) if args.json else text(p))
    return 0
