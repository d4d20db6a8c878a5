# Paths and helpers shared by the rule files.
import json

from pipeline.config import runs
from training.methods import METHODS

R = config["results"]
VARIANTS = config["datasets"]["in9"]["variants"]
EXPERIMENTS = list(config["experiments"])
RUNS = runs(config)  # every (experiment, seed)
THREADS = config["training"].get("threads", 2)
# `python` with this checkout importable, also for cluster jobs that run in a conda env.
PY = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} python"
CONFIG_JSON = json.dumps(config, sort_keys=True)


def dataset_json(name):
    return json.dumps(config["datasets"][name], sort_keys=True)


def variant_store(dataset, variant):
    return f"{R}/datasets/{dataset}/{variant}.zarr"


def run_files(name, experiments=None):
    """`name` (e.g. eval.jsonl) of every run, or of the runs of `experiments`."""
    return [f"{R}/runs/{e}/seed{s}/{name}" for e, s in RUNS if experiments is None or e in experiments]


def eval_stores(dataset):
    """{variant: store path} for every variant of `dataset`."""
    return {v: variant_store(dataset, v) for v in config["datasets"][dataset]["variants"]}


def store_args(stores):
    """VARIANT=STORE pairs for the CLIs' --stores option."""
    return " ".join(f"{v}={p}" for v, p in stores.items())


wildcard_constraints:
    dataset="|".join(config["datasets"]),
    variant="|".join(VARIANTS),
    experiment="|".join(EXPERIMENTS),
    seed=r"\d+",
