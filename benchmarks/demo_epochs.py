"""CPU-seconds of every training run a config makes, per distinct model, under two settings in
the same process: the demo's training cost today vs after a change, for the same work.

    python -m benchmarks.demo_epochs [--configfile extra.yaml ...] [--results results] [--epochs 1]
                                     [--only PATTERN] [--baseline amp=false]

Reads the stores of a finished (or partly built) run under `--results` (build them first, e.g.
`snakemake --cores 2 all` or the store targets). For each distinct model - one Background-Challenge
experiment per method and training config, one run of each grid method on the grid's first train
variant - it trains `--epochs` and `--epochs` + 1 epochs with the threads a workflow job gets, with the
config as it is ("after") and with `--baseline` overrides of its `training` section ("today":
`amp=false` trains in float32, as every CPU run did before bfloat16 autocast, and glibc's malloc
keeps its defaults, as before the workflow set `JOB_ENVIRONMENT`), each in a process of its own,
alternating the two so machine drift hits both. A run's CPU-seconds (user + system time of its
process, so other work on the machine does not inflate them) are estimated as the fixed part (setup such as BiasEnsemble's committee, the
self-supervised linear probe) plus the configured epochs times one epoch's (the difference of the
two timed runs, model-selection scoring included), times its seeds. Prints per model and per rule, and the ratio after / today.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import resource
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
import yaml

from debias_workbench.workflow.config import deep_merge, resolve_config
from debias_workbench.workflow.resources import JOB_ENVIRONMENT
from debias_workbench.workflow.slices import run_config

from .loader import ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configfile", nargs="*", default=[], help="overrides merged into config/config.yaml")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=1, help="epochs of the shorter timed run (the longer has one more)")
    parser.add_argument("--only", default="*", help="time only the experiments matching this pattern")
    parser.add_argument("--baseline", nargs="*", default=["amp=false"],
                        help="training overrides that give today's setting (key=yaml value)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    for path in args.configfile:
        config = deep_merge(config, yaml.safe_load(Path(path).read_text()))
    config = resolve_config(config)
    baseline = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.baseline)}
    timed: dict[str, dict[str, float]] = {}
    rows = []
    for name, exp in config["experiments"].items():
        if not fnmatch.fnmatch(name, args.only):
            continue
        run = run_config(config, name, 0)
        key = f"{exp['grid']}/{exp['grid_method']}" if "grid" in exp else json.dumps(
            {k: run[k] for k in ("method", "method_args", "training", "dataset", "train_variant")}, sort_keys=True)
        if key not in timed:
            timed[key] = _run_costs(run, args.results, baseline, args.epochs)
        rows.append((name, key, run, len(exp.get("seeds", config["seeds"]))))
    print(f"{'experiment':40s} {'method':18s} {'epochs':>6s} {'seeds':>5s} {'CPU-s today':>11s} {'CPU-s after':>11s} "
          f"{'ratio':>6s}")
    by_rule: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for name, key, run, seeds in rows:
        t = timed[key]
        today, after = (seeds * (t[f"{s}_fixed"] + run["training"]["epochs"] * t[f"{s}_epoch"]) for s in ("today", "after"))
        by_rule[_rule(config, name)][0] += today
        by_rule[_rule(config, name)][1] += after
        print(f"{name:40s} {run['method']:18s} {run['training']['epochs']:6d} {seeds:5d} {today:11.0f} {after:11.0f} "
              f"{after / today:6.2f}")
    print(f"\n{'rule':40s} {'CPU-s today':>11s} {'CPU-s after':>11s} {'ratio':>6s}")
    for rule, (today, after) in sorted(by_rule.items()):
        print(f"{rule:40s} {today:11.0f} {after:11.0f} {after / today:6.2f}")
    today, after = (sum(v[i] for v in by_rule.values()) for i in (0, 1))
    print(f"{'all training':40s} {today:11.0f} {after:11.0f} {after / today:6.2f}   (baseline: {baseline}; "
          f"{args.threads} thread(s) per run, each in its own process; start-up counted, at this commit's imports on both sides)")


def _rule(config: dict, name: str) -> str:
    """The training rule family of an experiment: `train_<grid>` (its packs `_2`, ... counted together) or `train`."""
    grid = config["experiments"][name].get("grid")
    return f"train_{grid}" if grid else "train"


def _run_costs(run: dict, results: Path, baseline: dict, epochs: int) -> dict[str, float]:
    """{"<setting>_fixed", "<setting>_epoch"}: CPU-seconds (user + system) of `run`'s fixed part
    and of one epoch, for setting "today" (`baseline` overrides, glibc's default malloc) and
    "after" (the config as it is, in the workflow's job environment `JOB_ENVIRONMENT`), each run
    in its own process as a workflow job is: a run of `epochs` epochs and one of `epochs` + 1,
    their difference being one epoch, the two settings alternated."""
    store = results / "datasets" / run["dataset"] / f"{run['train_variant']}.zarr"
    aligned = {field: results / "datasets" / run["dataset"] / f"{variant}.zarr"
               for field, variant in run["aligned_variants"].items()}
    missing = [str(p) for p in (store, *aligned.values()) if not p.exists()]
    if missing:
        raise SystemExit(f"missing stores {missing}: build them first, e.g. `snakemake --cores 2 {' '.join(missing)}`")
    plain = {k: v for k, v in os.environ.items() if k not in JOB_ENVIRONMENT}
    cpu: dict[tuple[str, int], float] = {}
    for n in (epochs, epochs + 1):
        for setting, overrides, env in (("today", baseline, plain), ("after", {}, {**plain, **JOB_ENVIRONMENT})):
            timed = {**run, "training": {**run["training"], **overrides, "epochs": n}}
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "run.json").write_text(json.dumps(timed))
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([sys.executable, "-c", _TRAIN, tmp, str(store), json.dumps({k: str(v) for k, v in aligned.items()})],
                               env={**env, "OMP_NUM_THREADS": str(torch.get_num_threads())}, check=True,
                               stdout=subprocess.DEVNULL)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[(setting, n)] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = {}
    for setting in ("today", "after"):
        epoch = max(cpu[(setting, epochs + 1)] - cpu[(setting, epochs)], 0.0)
        out[f"{setting}_epoch"], out[f"{setting}_fixed"] = epoch, max(cpu[(setting, epochs)] - epochs * epoch, 0.0)
    return out


#: one timed run in a process of its own (threads: OMP_NUM_THREADS): argv = run folder (run.json inside), train store, aligned stores (JSON)
_TRAIN = """
import json, sys
from pathlib import Path
from debias_workbench.training.trainer import train
run_dir = Path(sys.argv[1])
train(json.loads((run_dir / "run.json").read_text()), Path(sys.argv[2]), run_dir,
      {k: Path(v) for k, v in json.loads(sys.argv[3]).items()})
"""


if __name__ == "__main__":
    main()
