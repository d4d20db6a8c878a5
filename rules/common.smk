# Paths and helpers shared by the rule files. Each job reads its config slice from a file
# named by the slice's hash (workbench.slices): a job reruns when, and only when, its slice,
# its input files or its code change.
import re
import sys

from training.methods import spec
from workbench import resources as res
from workbench.config import dataset_family, dataset_variants, runs
from workbench.slices import (analysis_config, dataset_job_config, evaluation_config, grid_job_config,
                              imagenet_evaluation_config, report_config, run_config, slice_file)

R = config["results"]
# Background-Challenge experiments (trained by rules/train.smk, one job per run); grid
# experiments (rules/grids.smk) train in one job per (variant, seed).
EXPERIMENTS = [e for e, exp in config["experiments"].items() if "grid" not in exp]
RUNS = runs(config)  # every (experiment, seed), grids included
THREADS = config["training"].get("threads", 2)
# The interpreter that runs Snakemake, or the job's own environment's under --use-conda; the
# checkout is importable either way (conda environments do not install the project).
PYTHON = "python" if workflow.deployment_settings.deployment_method else sys.executable
PY = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} {PYTHON}"


def datasets_of(family):
    return [d for d in config["datasets"] if dataset_family(config, d) == family]


def dataset_config_file(dataset):
    """The job config of every generation step of `dataset` (its section and the seed)."""
    return slice_file(R, "datasets", dataset_job_config(config, dataset))


def run_config_file(experiment, seed):
    return slice_file(R, "runs", run_config(config, experiment, int(seed)))


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
    shard=r"\d+",
