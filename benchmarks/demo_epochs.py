"""Per-epoch training time of every model a config trains, and the training time it adds up to.

    python -m benchmarks.demo_epochs [--configfile extra.yaml ...] [--results results] [--threads 1]

Reads the stores of a finished (or partly built) run under `--results` (build them first, e.g.
`snakemake --cores 2 all` or the store targets), trains one epoch of each distinct model - one
Background-Challenge experiment per method and training config, one run of each grid method on
the grid's first train variant - with the threads a workflow job gets, and prints seconds per
epoch, the configured epochs and the estimated wall time of all its runs (every seed and train
variant) on `--cores` cores, one job per core. Meant for fitting the demo into its time budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
import yaml

from training.trainer import train
from workbench.config import deep_merge, resolve_config
from workbench.slices import run_config

from .loader import ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", nargs="*", default=[], help="overrides merged into config/config.yaml")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for path in args.configfile:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text()))
    config = resolve_config(config)
    timed: dict[str, tuple[str, float]] = {}  # model key -> (experiment timed, seconds per epoch)
    rows = []
    for name, exp in config["experiments"].items():
        run = run_config(config, name, 0)
        key = json.dumps({k: run[k] for k in ("method", "training", "dataset", "train_variant")},
                         sort_keys=True)
        if "grid" in exp:  # every grid method is timed on the grid's first train variant
            key = f"{exp['grid']}/{exp['grid_method']}"
            if exp["train_variant"] != config["grids"][exp["grid"]]["train_variants"][0] and key in timed:
                rows.append((name, key, run, len(exp.get("seeds", config["seeds"]))))
                continue
        if key not in timed:
            timed[key] = (name, _epoch_seconds(run, args.results))
        rows.append((name, key, run, len(exp.get("seeds", config["seeds"]))))
    total = 0.0
    print(f"{'experiment':44s} {'method':18s} {'arch':12s} {'s/epoch':>8s} {'epochs':>6s} {'seeds':>5s} {'minutes':>8s}")
    for name, key, run, seeds in rows:
        seconds = timed[key][1]
        minutes = seconds * run["training"]["epochs"] * seeds / 60
        total += minutes
        print(f"{name:44s} {run['method']:18s} {run['training']['arch']:12s} {seconds:8.1f} "
              f"{run['training']['epochs']:6d} {seeds:5d} {minutes:8.1f}")
    print(f"training in all: {total:.1f} job-minutes, about {total / args.cores:.1f} min of wall time on "
          f"{args.cores} cores (one {args.threads}-thread job per core; process starts and evaluation not counted)")


def _epoch_seconds(run: dict, results: Path) -> float:
    """Seconds of one training epoch of `run` on its training store under `results`."""
    store = results / "datasets" / run["dataset"] / f"{run['train_variant']}.zarr"
    aligned = {field: results / "datasets" / run["dataset"] / f"{variant}.zarr"
               for field, variant in run["aligned_variants"].items()}
    missing = [str(p) for p in (store, *aligned.values()) if not p.exists()]
    if missing:
        raise SystemExit(f"missing stores {missing}: build them first, e.g. `snakemake --cores 2 {' '.join(missing)}`")
    one_epoch = {**run, "training": {**run["training"], "epochs": 1}}
    with tempfile.TemporaryDirectory() as tmp:
        train(one_epoch, store, Path(tmp), aligned)
        rows = [json.loads(line) for line in (Path(tmp) / "train_metrics.jsonl").read_text().splitlines()]
    return next(r["value"] for r in rows if r["metric"] == "epoch_seconds")


if __name__ == "__main__":
    main()
