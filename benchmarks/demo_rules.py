"""CPU-seconds of a finished workflow run per rule, from the Snakemake `benchmark:` files every
rule writes (results/benchmarks/<rule>/<job>.tsv: wall seconds, peak memory, CPU seconds).

    python -m benchmarks.demo_rules RESULTS [BEFORE_RESULTS]

With two results folders (e.g. the demo of an earlier commit in another clone), prints both side
by side and the ratios over the jobs both ran under the same name (`same work` as far as names
tell: a job of the same rule and wildcards; a grid pack whose runs changed keeps its name, so
`benchmarks.demo_epochs`, which times each model both ways, is the same-work measure for training).
Snakemake samples a job's CPU time with psutil every few seconds and misses what a process spent
after the last sample, so CPU-seconds undercount short jobs; every demo job runs one thread on a
core of its own, so its wall seconds are the steadier measure of its CPU cost (both are printed).
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path


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
        print(f"{'all':32s} {sum(j for j, _, _ in rules.values()):5d} {total:9.0f} {100.0:5.1f}%")
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
    print(f"{'all':32s} {len(before):11d} {sum(c for c, _ in before.values()):12.0f} "
          f"{sum(w for _, w in before.values()):13.0f} {len(after):10d} {total:11.0f} "
          f"{sum(w for _, w in after.values()):12.0f} {ratio(shared, 0):13.2f} {ratio(shared, 1):14.2f}")

if __name__ == "__main__":
    main()
