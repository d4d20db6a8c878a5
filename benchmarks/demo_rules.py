"""Where a finished workflow run's time went: per rule, and per fixed cost besides arithmetic.

    python -m benchmarks.demo_rules RESULTS [BEFORE_RESULTS]

Per rule: jobs, CPU seconds and wall seconds from the Snakemake `benchmark:` files every rule
writes (results/benchmarks/<rule>/<job>.tsv). Per fixed cost: the CPU seconds each training,
scoring and analysis job spent by phase (imports, store checks, loading, set-up, epochs,
scoring, saving, other), from the line `core.phases` ends its log with
(results/logs/<job>.log); a run made before jobs logged it shows none. For both runs alike,
the training jobs' wall seconds inside their epochs (the logs' `epoch_seconds`) against the
rest of their wall time (process start, imports, set-up, monitors, saving).

With two results folders (e.g. the demo of an earlier commit in another clone), prints both side
by side and the ratios over the jobs both ran under the same name (`same work` as far as names
tell: a job of the same rule and wildcards; a grid pack whose runs changed keeps its name, so
`benchmarks.demo_epochs`, which times each model both ways, is the same-work measure for training).
Snakemake samples a job's CPU time with psutil every few seconds and misses what a process spent
after the last sample, so CPU-seconds undercount short jobs; every demo job runs one thread on a
core of its own, so its wall seconds are the steadier measure of its CPU cost (both are printed).
A job forked by a local run's job server (`workflow.job_server`) is not a child of the process
Snakemake measures: its benchmark CPU-seconds are the client's alone, its wall seconds and its
phase line the job's own.
The test suite's paper-config smoke run is measured the same way: run the fixture's command
(`tests/conftest.py`, `paper_smoke`) with `--config results=DIR` and point this script at
`DIR-smoke`.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from collections import defaultdict
from pathlib import Path

from debias_workbench.core.phases import PHASES_LINE

#: the phases `core.phases` records, in the order of a job's life
PHASES = ("imports", "store_checks", "loading", "setup", "epochs", "scoring", "saving", "other")


def job_costs(results: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """{(rule, job): (CPU seconds, wall seconds)} of every benchmark file under `results`."""
    out = {}
    for path in sorted((results / "benchmarks").glob("*/*.tsv")):
        with path.open() as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        if rows:
            row = rows[-1]  # a rerun appends nothing: Snakemake rewrites the file; the last row is the run
            out[(path.parent.name, path.stem)] = (float(row["cpu_time"]), float(row["s"]))
    return out


def per_rule(costs: dict[tuple[str, str], tuple[float, float]]) -> dict[str, tuple[int, float, float]]:
    """{rule: (jobs, CPU seconds, wall seconds)}."""
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for (rule, _job), (cpu, wall) in costs.items():
        out[rule][0] += 1
        out[rule][1] += cpu
        out[rule][2] += wall
    return {rule: (int(v[0]), v[1], v[2]) for rule, v in sorted(out.items(), key=lambda kv: -kv[1][1])}


def phase_costs(results: Path, jobs: list[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """{rule: {phase: CPU seconds}} summed over the phase lines of the jobs' logs (every process of
    a several-process job prints its own), and the job server's (`workflow.job_server`: the
    imports it made once for every job it forked, in logs/job_server.log); rules whose jobs log
    none are left out."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for rule, job in [*jobs, ("job_server", "job_server")]:
        log = results / "logs" / f"{job}.log"
        for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
            if PHASES_LINE in line:
                for name, seconds in json.loads(line.split(PHASES_LINE, 1)[1]).items():
                    out[rule][name] += seconds
    return out


def epoch_split(results: Path, costs: dict[tuple[str, str], tuple[float, float]]) -> tuple[float, float]:
    """(wall seconds inside the epochs, wall seconds outside them) of the training jobs."""
    inside = total = 0.0
    for (rule, job), (_cpu, wall) in costs.items():
        log = results / "logs" / f"{job}.log"
        if rule.startswith("train") and log.exists():
            total += wall
            inside += sum(float(s) for s in re.findall(r"epoch_seconds=([\d.e+-]+)", log.read_text(errors="replace")))
    return inside, total - inside


def print_phases(label: str, results: Path, costs: dict[tuple[str, str], tuple[float, float]]) -> dict[str, float]:
    """The per-rule phase table of one run; its phase totals."""
    phases = phase_costs(results, list(costs))
    inside, outside = epoch_split(results, costs)
    print(f"\n{label}: training jobs' wall seconds inside their epochs {inside:.0f}, outside {outside:.0f}")
    if not phases:
        print(f"{label}: no job logged its CPU seconds by phase (made before core.phases)")
        return {}
    print(f"{'CPU-s by phase (' + label + ')':32s} " + " ".join(f"{p:>12s}" for p in PHASES))
    totals = {p: sum(rule.get(p, 0.0) for rule in phases.values()) for p in PHASES}
    for rule, by_phase in sorted(phases.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"{rule:32s} " + " ".join(f"{by_phase.get(p, 0.0):12.1f}" for p in PHASES))
    print(f"{'all':32s} " + " ".join(f"{totals[p]:12.1f}" for p in PHASES))
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("before", type=Path, nargs="?")
    args = parser.parse_args()
    after = job_costs(args.results)
    if not after:
        raise SystemExit(f"no benchmark files under {args.results / 'benchmarks'}: run the workflow first")
    rules = per_rule(after)
    total = sum(c for _, c, _ in rules.values())
    if args.before is None:
        print(f"{'rule':32s} {'jobs':>5s} {'CPU-s':>9s} {'share':>6s} {'wall-s':>9s}")
        for rule, (jobs, cpu, wall) in rules.items():
            print(f"{rule:32s} {jobs:5d} {cpu:9.0f} {100 * cpu / total:5.1f}% {wall:9.0f}")
        print(f"{'all':32s} {sum(j for j, _, _ in rules.values()):5d} {total:9.0f} {100.0:5.1f}% "
              f"{sum(w for _, w in after.values()):9.0f}")
        print_phases("this run", args.results, after)
        return
    before = job_costs(args.before)
    old = per_rule(before)
    shared = set(after) & set(before)

    def ratio(keys, column: int) -> float:
        base = sum(before[k][column] for k in keys)
        return sum(after[k][column] for k in keys) / base if keys and base else float("nan")

    print(f"{'rule':32s} {'jobs before':>11s} {'CPU-s before':>12s} {'wall-s before':>13s} {'jobs after':>10s} "
          f"{'CPU-s after':>11s} {'wall-s after':>12s} {'same-name CPU':>13s} {'same-name wall':>14s}")
    for rule in sorted(set(rules) | set(old), key=lambda r: -old.get(r, (0, 0.0, 0.0))[2]):
        jobs_b, cpu_b, wall_b = old.get(rule, (0, 0.0, 0.0))
        jobs_a, cpu_a, wall_a = rules.get(rule, (0, 0.0, 0.0))
        same = [k for k in shared if k[0] == rule]
        print(f"{rule:32s} {jobs_b:11d} {cpu_b:12.0f} {wall_b:13.0f} {jobs_a:10d} {cpu_a:11.0f} {wall_a:12.0f} "
              f"{ratio(same, 0):13.2f} {ratio(same, 1):14.2f}")
    wall_before, wall_after = sum(w for _, w in before.values()), sum(w for _, w in after.values())
    print(f"{'all':32s} {len(before):11d} {sum(c for c, _ in before.values()):12.0f} "
          f"{wall_before:13.0f} {len(after):10d} {total:11.0f} "
          f"{wall_after:12.0f} {ratio(shared, 0):13.2f} {ratio(shared, 1):14.2f}")
    print(f"job wall-seconds after / before: {wall_after / wall_before:.2f}")
    print_phases("before", args.before, before)
    print_phases("after", args.results, after)


if __name__ == "__main__":
    main()
