"""Jobs a site's scheduler accepts (issue 61): a staged generation step has jobs only over the blocks holding
the splits it builds, packed into jobs of at least `cluster.min_job_minutes` by the cost model; the stores'
bytes do not depend on the packing; the small GPU jobs run in Snakemake job groups of at least that much
(`workflow.job_groups`), a small stylization on a CPU; the real-scale configs plan at most 500 scheduler jobs and no
GPU job under 5 minutes; the plan's generation jobs and GPU jobs are the ones Snakemake would run."""

from __future__ import annotations

import collections
import math
import re
from pathlib import Path

import pytest
import zarr

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.derived_stage import derived_jobs
from debias_workbench.pipeline.segment_stage import segment_jobs
from debias_workbench.pipeline.shards import ALL_SPLITS, expected_splits, images_in, job_blocks
from debias_workbench.pipeline.sources.listing import read_listing
from debias_workbench.workflow import cost, resources
from debias_workbench.workflow.config import resolve_config
from debias_workbench.workflow.job_groups import MEMBER_MINIMUM_MINUTES, JobGroups, Member, pack
from debias_workbench.workflow.lookup import dataset_family
from debias_workbench.workflow.plan import DATA, config_job_groups, load_config, plan, used_datasets
from debias_workbench.workflow.plan_jobs import GROUPED

from .test_generation import store_digest
from .test_workflow import planned, snakemake

ROOT = Path(__file__).resolve().parents[1]
#: the paper configs at real scale (the matrix at paper scale with them): each a site's queue must take
REAL_SCALE = ["imagenet9.yaml", "imagenet100_ssl.yaml", "park_real_data.yaml", "biased_mnist_paper.yaml",
              "matrix_paper.yaml"]
#: the most scheduler jobs one of them may plan
MAX_JOBS = 500
#: the least estimate of a GPU job of a paper config at real scale (minutes)
LEAST_GPU_MINUTES = 5
#: the configs whose scorings, after training, hold less than that together and have no larger job of their phase
#: to join (a job group cannot take a training job a scoring waits for without holding it back)
SMALL_SCORINGS = ["imagenet100_ssl.yaml", "park_real_data.yaml", "biased_mnist_paper.yaml"]


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
    out = snakemake("-n", "all", "--cores", "2", "--configfile", str(extra))
    jobs = planned(out)
    assert {rule: n for rule, n in jobs.items() if rule.startswith("in9_") or rule == "dataset_variant"} == dict(ours)
    assert ours["in9_segment_shard"] == (10 if least == 0 else 1)
    assert ours["in9_corrupted_shard"] == (2 if least == 0 else 1)  # val only: the two blocks holding val rows
    # the GPU jobs: one job per rule and wildcard value (the demo's 0), or the small ones in Snakemake's job groups,
    # each member asking its share of the group's runtime (Snakemake sums them: one GPU, one member after another)
    top, groups = dry_run_gpu_jobs(out)
    assert top == collections.Counter(j.rule for j in p.jobs if j.gpus and not j.members)
    planned_groups = {j.rule: j for j in p.jobs if j.members}
    assert {g: sorted(r for r, _ in m) for g, m in groups.items()} == {
        g: sorted(m.rule for m in j.members) for g, j in planned_groups.items()
    }
    assert all(sum(t for _, t in groups[g]) == j.request_minutes for g, j in planned_groups.items())
    assert bool(groups) == (least > 0) and all(len(m) > 1 for m in groups.values())


def dry_run_gpu_jobs(output: str) -> tuple[collections.Counter, dict[str, list[tuple[str, int]]]]:
    """(GPU jobs by rule outside any group, {group id: (rule, runtime) of each member}) of a dry run's listing."""
    top: collections.Counter = collections.Counter()
    groups: dict[str, list[tuple[str, int]]] = {}
    member = re.compile(r"^    (?:rule|localrule) (\w+):\n(?:        .*\n)*?        resources: (.*)$", re.M)
    alone = re.compile(r"(?:rule|localrule) (\w+):\n(?:    .*\n)*?    resources: (.*)$", re.M)
    for block in re.split(r"^\[[^\]\n]*\][ \n]", output, flags=re.M):
        if block.startswith("Group job "):
            runtimes = [(rule, int(re.search(r"runtime=(\d+)", res)[1])) for rule, res in member.findall(block)]
            groups[block.split()[2]] = runtimes
        elif (job := alone.match(block)) and re.search(r"\bgpu=[1-9]", job[2]):
            top[job[1]] += 1
    return top, groups


def test_pack_joins_jobs_in_order_until_each_group_holds_the_least():
    assert pack([4, 4, 4, 4, 4], 10) == [[0, 1, 2, 3, 4]]  # 12 >= 10; the two left (8) join that group
    assert pack([6, 6, 6, 6, 1], 10) == [[0, 1], [2, 3, 4]]
    assert pack([1, 2, 3], 10) == [[0, 1, 2]]  # all of them hold less: one group of them all
    assert pack([3], 10) == [] and pack([], 10) == []  # a group of one is no group
    groups = JobGroups.of({"a": [Member("r", str(i), m) for i, m in enumerate([6, 6, 6, 6, 1])], "b": []}, 10)
    assert groups.components() == {"a_1": 2, "a_2": 3}
    assert groups.group("r", "4") == "a_2" and groups.group("r", "9") is None
    assert JobGroups.of({"a": [Member("r", "0", 1), Member("r", "1", 1)]}, 0).members == {}


@pytest.mark.parametrize("minutes", [[0.5, 0.5, 0.5], [4.0, 0.12, 7.3, 0.2], [12.0, 9.5]])
def test_a_groups_members_ask_the_request_of_its_summed_estimate(minutes):
    """The members' runtimes add up to `cost.request_minutes` of the group's estimate, each member at least
    `MEMBER_MINIMUM_MINUTES` (its own process's start, where a rerun runs it alone), for every attempt."""
    members = [Member("r", str(i), m) for i, m in enumerate(minutes)]
    groups = JobGroups.of({"p": members}, 100)
    for attempt in (1, 2, 3):
        shares = [groups.request_minutes("r", m.key, 24, attempt) for m in members]
        whole = cost.request_minutes(sum(minutes), 24, attempt)
        floors = MEMBER_MINIMUM_MINUTES * sum(s == MEMBER_MINIMUM_MINUTES for s in shares)
        assert min(shares) >= MEMBER_MINIMUM_MINUTES and whole <= sum(shares) <= whole + floors
        assert sum(shares) == groups.group_request_minutes("p_1", 24, attempt)


@pytest.mark.parametrize("name", REAL_SCALE[:4])
def test_no_gpu_job_of_a_real_scale_config_is_small_but_a_group_of_all_its_phase_holds_less(name):
    """No GPU job under `LEAST_GPU_MINUTES` but, where a phase's small jobs all together hold less (the scorings in
    `SMALL_SCORINGS`), the one group of all of them; a stylization under `cluster.min_job_minutes` is a CPU job.
    Each group job asks one GPU, its members' summed estimates and requests, their largest memory and CPUs."""
    p = plan([ROOT / "config" / name])
    config = resolve_config(load_config([ROOT / "config" / name]))
    small = [j for j in p.jobs if j.gpus and j.estimate_minutes < LEAST_GPU_MINUTES]
    assert [j.rule for j in small] == (["scorings_1"] if name in SMALL_SCORINGS else [])
    assert not [j for j in p.jobs if j.rule == "in9_stylized_shard" and j.gpus and j.estimate_minutes < 10]
    groups = config_job_groups(config)
    for job in (j for j in p.jobs if j.members):
        assert job.table == GROUPED and job.gpus == 1 and len(job.members) > 1
        assert job.estimate_minutes == pytest.approx(sum(m.estimate_minutes for m in job.members))
        assert job.mem_mb == max(m.mem_mb for m in job.members) and job.cpus == max(m.cpus for m in job.members)
        assert {groups.group(m.rule, m.key) for m in job.members} == {job.rule}
        assert job.request_minutes == groups.group_request_minutes(job.rule, p.max_job_hours)
        floors = MEMBER_MINIMUM_MINUTES * len(job.members)
        assert job.request_minutes <= math.ceil(2 * job.estimate_minutes + cost.MINIMUM_MINUTES) + floors
    if name in SMALL_SCORINGS:  # the scorings' one group, and no scoring of their phase left to join it
        (group,) = small
        assert all(m.rule.startswith(("evaluate", "analysis")) for m in group.members)
        assert not [j for j in p.jobs if j.gpus and not j.members and j.rule.startswith(("evaluate", "analysis"))]


def test_a_paper_configs_job_groups_are_its_dry_runs(tmp_path):
    """park_real_data (its committees in three groups, its scorings in one) with the stand-in files at its FILL ME
    keys, at real scale: Snakemake's dry run groups the jobs as `workbench plan` of the same files does, member by
    member, each group's runtimes summed to the plan's request (the Snakefile's config and the plan's hold their keys
    in different orders: the groups must not depend on it)."""
    import yaml

    from .standins import write_paper_paths

    config = ROOT / "config" / "park_real_data.yaml"
    standins = yaml.safe_load(write_paper_paths(tmp_path / "files", None).read_text())
    own = set(yaml.safe_load(config.read_text())["datasets"]) | {"in9", "biased_mnist", "colored_mnist"}
    grids = set(yaml.safe_load(config.read_text())["grids"])
    paths = tmp_path / "paths.yaml"
    paths.write_text(yaml.safe_dump({"datasets": {k: v for k, v in standins["datasets"].items() if k in own},
                                     "grids": {k: v for k, v in standins["grids"].items() if k in grids},
                                     "results": str(tmp_path / "results")}))
    out = snakemake("-n", "all", "--cores", "32", "--configfile", str(config), str(paths))
    _top, groups = dry_run_gpu_jobs(out)
    planned_groups = {j.rule: j for j in plan([config, paths]).jobs if j.members}
    assert {g for g in planned_groups if g.startswith("prerequisites_")} and "scorings_1" in planned_groups
    assert {g: sorted(r for r, _ in m) for g, m in groups.items()} == {
        g: sorted(m.rule for m in j.members) for g, j in planned_groups.items()
    }
    runtimes = {g: sum(t for _, t in m) for g, m in groups.items()}
    assert runtimes == {g: j.request_minutes for g, j in planned_groups.items()}
