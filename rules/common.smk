# Paths and helpers shared by the rule files.
import json
import re

from pipeline.config import dataset_family, dataset_variants, runs
from training.methods import METHODS

R = config["results"]
# Background-Challenge experiments (trained by rules/train.smk, one job per run); grid
# experiments (rules/grids.smk) train in one job per (variant, seed).
EXPERIMENTS = [e for e, exp in config["experiments"].items() if "grid" not in exp]
RUNS = runs(config)  # every (experiment, seed), grids included
THREADS = config["training"].get("threads", 2)
# `python` with this checkout importable, also for cluster jobs that run in a conda env.
PY = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} python"
# Key order kept: the report shows methods and variants in the order the config lists them.
CONFIG_JSON = json.dumps(config)


def datasets_of(family):
    return [d for d in config["datasets"] if dataset_family(config, d) == family]


def dataset_json(name):
    return json.dumps(config["datasets"][name], sort_keys=True)


def variant_store(dataset, variant):
    return f"{R}/datasets/{dataset}/{variant}.zarr"


def run_files(name, experiments=None):
    """`name` (e.g. eval.jsonl) of every run, or of the runs of `experiments`."""
    return [f"{R}/runs/{e}/seed{s}/{name}" for e, s in RUNS if experiments is None or e in experiments]


def eval_stores(dataset):
    """{variant: store path} for every variant of `dataset`."""
    return {v: variant_store(dataset, v) for v in dataset_variants(config, dataset)}


def store_args(stores):
    """VARIANT=STORE pairs for the CLIs' --stores option."""
    return " ".join(f"{v}={p}" for v, p in stores.items())


def one_of(names):
    """A wildcard regex matching exactly one of `names` (which may hold dots)."""
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    dataset=one_of(config["datasets"]),
    variant=one_of(sorted({v for d in config["datasets"] for v in dataset_variants(config, d)})),
    experiment=one_of(EXPERIMENTS),
    seed=r"\d+",
