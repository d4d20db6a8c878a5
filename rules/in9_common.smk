# The helpers of in9's staged generation (rules/in9_data.smk, rules/in9_derived.smk): each source item's split
# (from the listing checkpoint, or the config for the synthetic source), the jobs of whole blocks of a generation
# step (pipeline/shards.py), their files and their images (each job's estimate), and a derived variant's job
# config and the files it reads beside the segmented store.
# Uses rules/common.smk: JOB_CONFIGS, R, res.
import json

from debias_workbench.pipeline.shards import ALL_SPLITS, expected_splits, images_in, job_blocks

_LISTED = {}  # item_splits()'s, by dataset (synthetic) or by listing file and its modification time


def item_splits(dataset):
    """The split of each source item of `dataset` in listing order: from the config for the synthetic
    source (every train item before every val item, as their ids sort), from the listing (a checkpoint) for folders."""
    ds = config["datasets"][dataset]
    if ds["source"]["kind"] == "synthetic":
        key = (dataset, None)
        if key not in _LISTED:
            _LISTED[key] = expected_splits({split: res.dataset_images(ds, split) for split in ALL_SPLITS})
        return _LISTED[key]
    path = checkpoints.in9_list.get(dataset=dataset).output.listing
    key = (path, os.path.getmtime(path))
    if key not in _LISTED:
        with open(path) as fh:
            _LISTED[key] = [item["split"] for item in json.load(fh)["items"]]
    return _LISTED[key]


def step_splits(dataset, step):
    """The splits generation step `step` ("segment" or a derived variant) of `dataset` builds."""
    return ALL_SPLITS if step == "segment" else config["datasets"][dataset][step]["splits"]


_SHARD_JOBS = {}  # shard_jobs()'s, by dataset, step and the item splits they were cut from


def shard_jobs(dataset, step):
    """The block ranges of the jobs of generation step `step` ("segment" or a derived variant) of `dataset`:
    whole blocks of `block_images` items holding at least workbench.resources.min_job_images of its splits' items
    each (pipeline/shards.py), only where the step builds a split."""
    splits = item_splits(dataset)
    key = (dataset, step, id(splits))  # _LISTED keeps `splits` alive: its id names it
    if key not in _SHARD_JOBS:
        block, wanted = int(config["datasets"][dataset]["block_images"]), step_splits(dataset, step)
        _SHARD_JOBS[key] = job_blocks(splits, block, wanted, res.min_job_images(config, dataset, step))
    return _SHARD_JOBS[key]


def shard_images(wildcards, step):
    """The images of its step's splits that a shard job (wildcards: dataset, shard) makes: its estimate's."""
    blocks = shard_jobs(wildcards.dataset, step)[int(wildcards.shard)]
    block = int(config["datasets"][wildcards.dataset]["block_images"])
    return images_in(item_splits(wildcards.dataset), block, step_splits(wildcards.dataset, step), blocks)


def shard_files(wildcards, step="segment"):
    """One file per job of generation step `step` ("segment", or a derived variant: its `<variant>_shards`
    folder) of the dataset (`shard_jobs`)."""
    folder = "shards" if step == "segment" else f"{step}_shards"
    count = len(shard_jobs(wildcards.dataset, step))
    return [f"{R}/intermediate/{wildcards.dataset}/{folder}/{k:05d}.npz" for k in range(count)]


def derived_inputs(wildcards):
    """The files a derived variant's jobs read beside the segmented store: the style folder and
    the AdaIN weights when the config names them (checked before the DAG: workbench.user_paths)."""
    section = config["datasets"][wildcards.dataset][wildcards.derived]
    if wildcards.derived != "stylized":
        return []
    paths = [section[k] for k in ("vgg", "decoder") if section.get(k)]
    if section["styles"]["kind"] in ("folder", "flat") and section["styles"].get("root"):
        paths.append(section["styles"]["root"])
    return [os.path.expanduser(p) for p in paths]


def derived_config_file(wildcards):
    """A derived variant's job config: the dataset section with that variant's own section."""
    return JOB_CONFIGS.path("datasets", dataset_job_config(config, wildcards.dataset, wildcards.derived))
