"""Jobs a site's scheduler accepts (issue 61): a staged generation step has jobs only over the blocks holding
the splits it builds, packed into jobs of at least `cluster.min_job_minutes` by the cost model; the stores'
bytes do not depend on the packing; the real-scale configs plan at most 500 scheduler jobs; the plan's
generation jobs are the ones Snakemake would run."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import zarr

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.derived_stage import derived_jobs
from debias_workbench.pipeline.segment_stage import segment_jobs
from debias_workbench.pipeline.shards import ALL_SPLITS, expected_splits, images_in, job_blocks
from debias_workbench.pipeline.sources.listing import read_listing
from debias_workbench.workflow import resources
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.lookup import dataset_family
from debias_workbench.workflow.plan import DATA, load_config, plan, used_datasets

from .test_generation import store_digest
from .test_workflow import planned, snakemake

ROOT = Path(__file__).resolve().parents[1]
#: the paper configs at real scale (the matrix at paper scale with them): each a site's queue must take
REAL_SCALE = ["imagenet9.yaml", "imagenet100_ssl.yaml", "park_real_data.yaml", "biased_mnist_paper.yaml",
              "matrix_paper.yaml"]
#: the most scheduler jobs one of them may plan
MAX_JOBS = 500


def test_job_blocks_take_only_the_blocks_of_the_splits_and_pack_them_to_the_fewest_images():
    items = ["train"] * 10 + ["val"] * 7  # blocks of 4: [t t t t] [t t t t] [t t v v] [v v v v] [v]
    assert job_blocks(items, 4, ["val"], 1) == [range(2, 3), range(3, 4), range(4, 5)]
    assert job_blocks(items, 4, ["val"], 5) == [range(2, 5)]  # 2 + 4 >= 5; the 1 left joins that job
    assert job_blocks(items, 4, ["val"], 6) == [range(2, 5)]
    assert job_blocks(items, 4, ["train"], 1) == [range(0, 1), range(1, 2), range(2, 3)]
    assert job_blocks(items, 4, ALL_SPLITS, 8) == [range(0, 2), range(2, 5)]  # the last 9 hold 8 or more
    assert job_blocks(items, 4, ALL_SPLITS, 9) == [range(0, 5)]  # 12 >= 9; the 5 left join that job
    assert job_blocks(items, 4, ALL_SPLITS, 100) == [range(0, 5)]
    assert job_blocks(["train"] * 5, 4, ["val"], 1) == [range(0, 1)]  # no such item: one empty part
    assert job_blocks([], 4, ALL_SPLITS, 1) == []
    for splits in (["train"], ["val"], ALL_SPLITS):
        for fewest in (1, 3, 5, 11):
            jobs = job_blocks(items, 4, splits, fewest)
            held = [images_in(items, 4, splits, blocks) for blocks in jobs]
            assert sum(held) == sum(s in splits for s in items)  # every item of the splits, once
            assert all(n >= fewest for n in held) or len(jobs) == 1
            assert all(a.stop == b.start for a, b in zip(jobs, jobs[1:]))  # consecutive whole blocks
    assert expected_splits({"train": 2, "val": 1}) == ["train", "train", "val"]


def _build(root: Path, listing: Path, cfg: dict, min_images: int) -> tuple[list[Path], int, int]:
    """The segmented store and the corrupted (val only) store of `cfg` built job by job as the workflow runs
    them, with jobs of at least `min_images` images; (both stores, segmentation jobs, corruption jobs)."""
    family = get_family("in9")
    items = read_listing(listing)
    seg, shards = root / "segmented.zarr", []
    for k in range(len(segment_jobs(items, cfg, min_images))):
        shards.append(root / "shards" / f"{k:05d}.npz")
        family.run_step("segment-shard", cfg, 0, shards[-1], [listing], 1, None, k, min_images)
    family.run_step("segment-gather", cfg, 0, seg, [listing, *shards])
    jobs = derived_jobs(list(zarr.open_group(seg, mode="r")["splits"][:]), cfg, "corrupted", min_images)
    parts = [root / "corrupted_shards" / f"{k:05d}.npz" for k in range(len(jobs))]
    for k, part in enumerate(parts):
        family.run_step("derived-shard", cfg, 0, part, [seg], 1, "corrupted", k, min_images)
    corrupted = root / "corrupted.zarr"
    family.run_step("derived-gather", cfg, 0, corrupted, [seg, root / "segmented.manifest.json", *parts], 1,
                    "corrupted")
    return [seg, corrupted], len(shards), len(parts)


def _file_bytes(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file()}


def test_packed_jobs_make_the_same_bytes_as_a_job_per_block(tmp_path, tiny_ds_cfg):
    """45 items in blocks of 8 (27 train, 18 val): a job per block (6 segmentation jobs, 3 corruption jobs over
    the blocks holding val rows, none over the 3 train-only blocks) and jobs of at least 20 images (2 and 1)
    make byte-identical segmented and corrupted stores."""
    family = get_family("in9")
    family.run_step("source", tiny_ds_cfg, 0, tmp_path / "src", [], 1, None)
    listing = tmp_path / "listing.json"
    family.run_step("list", tiny_ds_cfg, 0, listing, [tmp_path / "src"])
    one, six, three = _build(tmp_path / "one", listing, tiny_ds_cfg, 1)
    packed, two, single = _build(tmp_path / "packed", listing, tiny_ds_cfg, 20)
    assert (six, three, two, single) == (6, 3, 2, 1)
    for a, b in zip(one, packed):
        assert store_digest(a) == store_digest(b)
        assert _file_bytes(a) == _file_bytes(b), a.name


@pytest.mark.parametrize("name", REAL_SCALE)
def test_a_real_scale_config_plans_few_jobs_and_none_over_a_split_it_does_not_build(name):
    """At most `MAX_JOBS` scheduler jobs; each staged step's jobs hold together exactly the images of the splits
    it builds (a stylization built for val only costs val's images, not every block's), and each holds at least
    `cluster.min_job_minutes` of work unless it is its step's only job."""
    p = plan([ROOT / "config" / name])
    config = resolve_config(load_config([ROOT / "config" / name]))
    assert sum(j.jobs_needed for j in p.jobs) <= MAX_JOBS
    least = config["cluster"]["min_job_minutes"]
    assert least >= 10
    steps = collections.defaultdict(list)
    for job in p.jobs:
        if job.table == DATA and " shard " in job.target:
            steps[job.target.rsplit(" shard ", 1)[0]].append(job)
    staged = [d for d in used_datasets(config) if get_family(dataset_family(config, d)).name == "in9"]
    assert set(steps) >= set(staged)  # every staged dataset segments in jobs of its own
    for step, jobs in steps.items():
        dataset, _, variant = step.partition("/")
        ds = config["datasets"][dataset]
        splits = ds[variant]["splits"] if variant else ALL_SPLITS
        images = sum(get_family("in9").expected_images(ds, s) for s in splits)
        whole = (resources.derived_shard(config, dataset, variant, images) if variant else
                 resources.segment_shard(config, dataset, images))[0]
        assert sum(j.estimate_minutes for j in jobs) == pytest.approx(whole), step
        assert len(jobs) == 1 or min(j.estimate_minutes for j in jobs) >= least, step


@pytest.mark.parametrize("least", [0, 10])
def test_the_plans_generation_jobs_are_the_dry_runs(default_config, tmp_path, least):
    """The demo's generation jobs as `workbench plan` lists them, rule by rule, are those Snakemake's dry run
    would run, with a job per block (the demo's 0) and packed (10 minutes: one job a step at its scale)."""
    extra = tmp_path / "cluster.yaml"
    extra.write_text(f"cluster: {{min_job_minutes: {least}}}\nresults: {tmp_path / 'results'}\n")
    p = plan([extra])
    ours = collections.Counter(j.rule for j in p.jobs if j.table == DATA)
    jobs = planned(snakemake("-n", "all", "--cores", "2", "--configfile", str(extra)))
    assert {rule: n for rule, n in jobs.items() if rule.startswith("in9_") or rule == "dataset_variant"} == dict(ours)
    assert ours["in9_segment_shard"] == (10 if least == 0 else 1)
    assert ours["in9_corrupted_shard"] == (2 if least == 0 else 1)  # val only: the two blocks holding val rows
