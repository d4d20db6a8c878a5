# Paths and helpers shared by the rule files. Each job reads its config slice from a file
# named by the slice's hash (workbench.slices): a job reruns when, and only when, its slice,
# its input files or its code change.
import json
import os
import re
import sys
from pathlib import Path

from pipeline import variants
from pipeline.segment_stage import shard_count
from pipeline.sources.listing import folder_fingerprint
from training.methods import spec
from workbench import resources as res
from workbench.config import (dataset_family, dataset_variants, grid_experiment, grid_experiments,
                              grid_seed_groups, runs, test_sets)
from workbench.slices import (analysis_config, dataset_job_config, evaluation_config, grid_job_config,
                              imagenet_evaluation_config, official_evaluation_config, report_config, run_config,
                              slice_file)

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


def idx_files(dataset):
    """The MNIST idx files an MNIST-family dataset reads (a missing one stops the DAG build, named)."""
    source = config["datasets"][dataset]["source"]
    if source["kind"] != "idx":
        return []
    return [os.path.expanduser(source[key]) for key in ("train_images", "train_labels", "test_images", "test_labels")]


def labelled_inputs(wildcards):
    """The files and folders a dataset reads (a missing one stops the DAG build, named): MNIST idx
    files, or the CUB, segmentation and Places folders of Waterbirds."""
    ds = config["datasets"][wildcards.dataset]
    if ds.get("family") == "waterbirds":
        return [os.path.expanduser(ds[key]) for key in ("cub_root", "segmentations", "places_root")]
    if ds.get("family") == "released_bias_folders":
        return [os.path.expanduser(ds["root"])]
    return idx_files(wildcards.dataset)


def variant_store(dataset, variant):
    return f"{R}/datasets/{dataset}/{variant}.zarr"


def run_files(name, experiments=None):
    """`name` (e.g. eval.jsonl) of every run, or of the runs of `experiments`."""
    return [f"{R}/runs/{e}/seed{s}/{name}" for e, s in RUNS if experiments is None or e in experiments]


EVAL_DATASET = config["evaluation"]["dataset"]


def experiment_eval_dataset(experiment):
    """The dataset whose variants `experiment` is scored on (grid runs: scored in their own job)."""
    return config["experiments"][experiment].get("eval_dataset") or EVAL_DATASET


# the runs of the main evaluation dataset: the analyses, the official test images and the main tables
MAIN_EXPERIMENTS = [e for e in EXPERIMENTS if experiment_eval_dataset(e) == EVAL_DATASET]


def run_evaluation(experiment):
    """(config slice, stores) of the `evaluate` job of `experiment`'s runs: `evaluation.dataset`'s
    stores, or its `eval_dataset`'s (the slice then names that dataset: the rows are tagged with it)."""
    dataset = experiment_eval_dataset(experiment)
    return {**evaluation_config(config), "dataset": dataset}, eval_stores(dataset)


def external_folder(wildcards):
    """The user's folder of an `external` test set (ImageNet-Sketch, ImageNet-R) of a dataset."""
    return os.path.expanduser(config["datasets"][wildcards.dataset]["external"][wildcards.variant])


def eval_stores(dataset):
    """{variant: store path} for every variant of `dataset`."""
    return {v: variant_store(dataset, v) for v in dataset_variants(config, dataset)}


def store_args(stores):
    """VARIANT=STORE pairs for the CLIs' --stores option."""
    return " ".join(f"{v}={p}" for v, p in stores.items())


def one_of(names):
    """A wildcard regex matching exactly one of `names` (which may hold dots); nothing when
    there are none (an empty constraint would match everything)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def source_paths(dataset):
    """What the listing reads: the synthetic folder the workflow makes, or the folders (and
    mapping file) the user supplies, as declared inputs: a missing one stops the DAG build."""
    source = config["datasets"][dataset]["source"]
    if source["kind"] == "synthetic":
        return [f"{R}/sources/{dataset}_synthetic"]
    spec_ = source[source["kind"]]
    return [os.path.expanduser(spec_[k]) for k in ("root", "annotations", "masks", "mapping") if spec_.get(k)]


def user_folders_fingerprint(wildcards):
    """Changes when images are added, removed or renamed in the user's folders (their folders'
    modification times), so the listing and everything after it rerun."""
    if config["datasets"][wildcards.dataset]["source"]["kind"] == "synthetic":
        return ""
    return folder_fingerprint(source_paths(wildcards.dataset))


def shard_files(wildcards, folder="shards"):
    """One segmentation shard per `block_images` items (in `folder`; the derived variants' shards
    follow the same split): counted from the config for the synthetic source, from the listing
    (a checkpoint) for folders."""
    ds = config["datasets"][wildcards.dataset]
    if ds["source"]["kind"] == "synthetic":
        n_items = res.dataset_images(ds, "train") + res.dataset_images(ds, "val")
    else:
        with open(checkpoints.in9_list.get(dataset=wildcards.dataset).output.listing) as fh:
            n_items = len(json.load(fh)["items"])
    return [f"{R}/intermediate/{wildcards.dataset}/{folder}/{k:05d}.npz" for k in range(shard_count(n_items, ds))]


def derived_inputs(wildcards):
    """The files a derived variant's jobs read beside the segmented store: the style folder and
    the AdaIN weights when the config names them (a missing one stops the DAG build, named)."""
    section = config["datasets"][wildcards.dataset][wildcards.derived]
    if wildcards.derived != "stylized":
        return []
    paths = [section[k] for k in ("vgg", "decoder") if section.get(k)]
    if section["styles"]["kind"] in ("folder", "flat") and section["styles"].get("root"):
        paths.append(section["styles"]["root"])
    return [os.path.expanduser(p) for p in paths]


def derived_config_file(wildcards):
    """A derived variant's job config: the dataset section with that variant's own section."""
    return slice_file(R, "datasets", dataset_job_config(config, wildcards.dataset, wildcards.derived))


def train_inputs(wildcards):
    """The run's config, its training store, the stores of the variants the method reads
    alongside it, and its pretrained weights if it starts from some (a missing file then stops
    the DAG build, naming the path)."""
    run = run_config(config, wildcards.experiment, int(wildcards.seed))
    pretrained = run["training"].get("pretrained")
    return {"config": slice_file(R, "runs", run), "store": variant_store(run["dataset"], run["train_variant"]),
            **{field: variant_store(run["dataset"], variant) for field, variant in run["aligned_variants"].items()},
            **({"pretrained": os.path.expanduser(pretrained)} if pretrained else {})}


def aligned_args(wildcards, input):
    exp = config["experiments"][wildcards.experiment]
    return " ".join(f"{field}={input[field]}" for field in spec(exp["method"]).aligned_variants)


def analysis_config_file(analysis):
    return slice_file(R, "analyses", {"analysis": analysis, **analysis_config(config, analysis)})


def grid_stores(grid_name, variant):
    """{"train": store, <test set>: store, ...} of one grid job."""
    grid = config["grids"][grid_name]
    tests = test_sets(config, grid["dataset"], variant)
    return {"train": variant_store(grid["dataset"], variant),
            **{name: variant_store(grid["dataset"], v) for name, v in tests.items()}}


def train_runs(wildcards):
    """The run config of a `train` job (one run), as `res.training` / `res.gpus` take them."""
    return [run_config(config, wildcards.experiment, int(wildcards.seed))]


def grid_job(grid_name, variant, seed):
    return grid_job_config(config, grid_name, grid_experiments(config, grid_name, variant, int(seed)), variant,
                           int(seed))


def grid_config_file(grid_name, variant, seed):
    return slice_file(R, "grids", grid_job(grid_name, variant, seed))


wildcard_constraints:
    dataset=one_of(config["datasets"]),
    variant=one_of(sorted({v for d in config["datasets"] for v in dataset_variants(config, d)})),
    experiment=one_of(EXPERIMENTS),
    seed=r"\d+",
    shard=r"\d+",


def write_job_configs():
    """Write the config file of every job before the DAG is built. Input functions name (and
    write) them too, but Snakemake caches a folder's listing once it has looked into it, so a
    file written there afterwards could be reported missing (seen with several targets given)."""
    for dataset in config["datasets"]:
        dataset_config_file(dataset)
        for variant in dataset_variants(config, dataset):
            if variant in config["datasets"][dataset]:  # a derived variant: its section is its jobs' slice
                slice_file(R, "datasets", dataset_job_config(config, dataset, variant))
    for experiment, seed in RUNS:
        if experiment in EXPERIMENTS:
            slice_file(R, "runs", run_config(config, experiment, seed))
    for analysis in ("consistency", "fivecrop"):
        analysis_config_file(analysis)
    for grid_name, grid in config.get("grids", {}).items():
        for variant in grid["train_variants"]:
            members = grid_experiments(config, grid_name, variant)
            for seed in sorted({s for e, s in RUNS if e in members}):
                grid_config_file(grid_name, variant, seed)


write_job_configs()
