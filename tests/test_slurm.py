"""The SLURM path for real: a slice of the tiny workflow through `--executor slurm` on a one-node
SLURM cluster on this machine (`devtools/local_slurm.py`), against the same slice run with
`--cores 2`. Only the documented overlay (`profiles/slurm-local`) adapts the workflow profile
to the cluster. Skips, saying why, where SLURM cannot be installed or started (no root, no apt)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from debias_workbench.training.job_time import CONTINUE_EXIT_CODE
from devtools import local_slurm

from .conftest import checkout_view, workdir
from .test_generation import store_digest
from .test_workflow import snakemake

#: a run long enough (several epochs of a few seconds) to be cancelled after its first checkpoint
PROBE = {"method": "erm", "dataset": "in9", "train_variant": "original", "label": "SLURM probe",
         "training": {"arch": "resnet50", "batch_size": 2, "epochs": 4}}
#: a run on two GPUs (`training.gpus`): one job with both of the node's GPUs, two processes
DDP_PROBE = {"method": "erm", "dataset": "in9", "train_variant": "original", "label": "SLURM DDP probe",
             "training": {"gpus": 2, "sync_bn": True}}
#: segmentation shards of the slice: 9 classes x 5 images of the tiny config in blocks of 24 images (the
#: tiny config's 8 would give 6: the same spread over submissions, in three waves of the node's 2 CPUs)
BLOCK_IMAGES, SHARDS = 24, 2
#: a run longer than its jobs: `cluster.max_job_hours` of 3 min is under the trainer's stop margin
#: (training.job_time.STOP_MARGIN_SECONDS), so every job trains one epoch and stops for the next
CHAIN_PROBE = {"method": "erm", "dataset": "in9", "train_variant": "original", "label": "SLURM chained probe",
               "training": {"epochs": 2}}
CHAIN_HOURS = 0.05


def slice_config(path: Path) -> tuple[list[str], list[str]]:
    """(config files, targets) of the slice: two IN-9 variants through per-shard segmentation and
    three training runs (GPU jobs), one of them on two GPUs."""
    results = path / "results"
    extra = path / "slice.yaml"
    path.mkdir(parents=True)
    extra.write_text(json.dumps({"results": str(results), "datasets": {"in9": {"block_images": BLOCK_IMAGES}},
                                 "experiments": {"slurm_probe": PROBE, "ddp_probe": DDP_PROBE}}))
    targets = [f"{results}/datasets/in9/mixed_rand.zarr", f"{results}/runs/base_in9/seed0/model.pt",
               f"{results}/runs/slurm_probe/seed0/model.pt", f"{results}/runs/ddp_probe/seed0/model.pt"]
    return ["tests/data/tiny.yaml", str(extra)], targets


def running_cluster(cred_expire: int | None = None) -> Iterator[local_slurm.LocalCluster]:
    """A module's local cluster (`local_slurm.start`, with `cred_expire`), stopped after its tests; a
    skip saying why where SLURM cannot run here."""
    # not pytest's tmp_path: slurmctld runs as the slurm user and must reach its folder
    directory = Path(tempfile.mkdtemp(prefix="workbench-slurm-"))
    try:
        running = local_slurm.start(directory, cred_expire)
    except local_slurm.LocalSlurmUnavailable as err:
        pytest.skip(f"no local SLURM cluster: {err}")
    pids = local_slurm.recorded_pids(directory)
    yield running
    local_slurm.stop(directory)
    assert not [pid for pid in pids if local_slurm.is_running(pid)], "a SLURM daemon outlived stop"
    assert not local_slurm.running_job_steps(), "a job step outlived stop"


@pytest.fixture(scope="module")
def cluster():
    yield from running_cluster()


def scontrol_jobs(cluster: local_slurm.LocalCluster) -> list[dict[str, str]]:
    """Every job the controller still knows (MinJobAge keeps finished ones), as key=value dicts."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, env=cluster.env,
                         check=True).stdout
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]


def cancel_after_first_checkpoint(cluster, proc: subprocess.Popen, run_dir: Path, timeout: float = 420) -> str:
    """scancel the probe's training job once its first epoch checkpoint exists; its job id."""
    end = time.monotonic() + timeout
    while not (run_dir / "checkpoint.pt").exists():
        assert proc.poll() is None, "the workflow ended before the probe checkpointed"
        assert time.monotonic() < end, "no checkpoint of the probe run in time"
        time.sleep(0.2)
    job = next(j["JobId"] for j in scontrol_jobs(cluster)
               if "slurm_probe" in j.get("Comment", "") and j["JobState"] in ("RUNNING", "PENDING"))
    subprocess.run(["scancel", job], env=cluster.env, check=True)
    return job


def test_tiny_slice_through_slurm_matches_a_local_run(cluster, tmp_path):
    local_configs, local_targets = slice_config(tmp_path / "local")
    local_log = tmp_path / "local.log"
    configs, targets = slice_config(tmp_path / "slurm")
    results = tmp_path / "slurm" / "results"
    log = tmp_path / "slurm.log"
    # docs/cluster.md's SLURM command with the local cluster's overlay; no --config (it would replace
    # the overlay's `config:` entry)
    cmd = [sys.executable, "-m", "snakemake", *targets, "--executor", "slurm", "--workflow-profile",
           "profiles/slurm", "--profile", "profiles/slurm-local", "--configfile", *configs]
    # the local run goes beside the SLURM one, which mostly waits on the scheduler; in a folder of its own,
    # as two Snakemake runs in one folder share (and delete) one lock folder
    local_cmd = [sys.executable, "-m", "snakemake", *local_targets, "--cores", "2", "--configfile", *local_configs]
    with log.open("w") as out, local_log.open("w") as local_out:
        local = subprocess.Popen(local_cmd, cwd=checkout_view(tmp_path / "local-checkout"), stdout=local_out,
                                 stderr=subprocess.STDOUT)
        proc = subprocess.Popen(cmd, cwd=workdir(), env=cluster.env, stdout=out, stderr=subprocess.STDOUT)
        try:
            cancelled = cancel_after_first_checkpoint(cluster, proc, results / "runs" / "slurm_probe" / "seed0")
            rc = proc.wait(timeout=480)
            local_rc = local.wait(timeout=480)
        finally:
            for running in (proc, local):
                if running.poll() is None:
                    running.kill()
    assert local_rc == 0, local_log.read_text()[-4000:]
    assert rc == 0, log.read_text()[-4000:]

    # the stores are the bytes the local run made
    for store in ("in9/mixed_rand.zarr", "in9/original.zarr"):
        assert store_digest(results / "datasets" / store) == store_digest(tmp_path / "local/results/datasets" / store)

    # the cancelled run was retried, resumed from its checkpoint, and ends with the uninterrupted weights
    train_log = (results / "logs" / "train_slurm_probe_seed0.log").read_text()
    assert re.search(r"resumed from .*checkpoint\.pt at epoch [1-4]", train_log), train_log
    for run in ("slurm_probe", "base_in9", "ddp_probe"):
        mine = torch.load(results / "runs" / run / "seed0" / "model.pt", weights_only=False)["state_dict"]
        local = torch.load(tmp_path / "local/results/runs" / run / "seed0" / "model.pt", weights_only=False)["state_dict"]
        assert mine.keys() == local.keys() and all(torch.equal(mine[k], local[k]) for k in mine), run

    jobs = [j for j in scontrol_jobs(cluster) if j.get("Comment", "").startswith("rule_")]
    by_rule: dict[str, list[dict[str, str]]] = {}
    for job in jobs:
        by_rule.setdefault(re.match(r"rule_(\w+?)(?:_wildcards_|$)", job["Comment"])[1], []).append(job)
    # GPU jobs (the runs, and the probe's retry) on the GPU partition with their GPUs; no others there
    train = by_rule["train"]
    assert len(train) == 4 and cancelled in {j["JobId"] for j in train}
    # the two-GPU run: one job asking for both GPUs of one node (torchrun starts its two processes there)
    ddp = [j for j in train if "ddp_probe" in j["Comment"]]
    assert len(ddp) == 1 and ddp[0]["NumNodes"] == "1", ddp
    assert re.search(r"gpu[:=]2\b", ddp[0].get("TresPerJob", "") + ddp[0].get("TresPerNode", "")), ddp
    for rule, rule_jobs in by_rule.items():
        for job in rule_jobs:
            gpu = "gpu" in job.get("TresPerJob", "") + job.get("TresPerNode", "")
            assert (job["Partition"] == "gpu") == gpu == (rule == "train"), (rule, job)
            assert int(job["NumCPUs"]) <= local_slurm.node_size()[0], (rule, job["NumCPUs"])
    # per-shard segmentation really spread over separate submissions
    assert len(by_rule["in9_segment_shard"]) == SHARDS


def test_slurm_dry_run_gives_a_two_gpu_run_two_gpus_on_one_node(tmp_path):
    """`training.gpus: 2` in the SLURM profile's dry run: gpu=2 and nodes=1 for that run's job,
    gpu=1 for a one-device run (no cluster needed)."""
    configs, targets = slice_config(tmp_path / "dry")
    out = snakemake("-n", "--executor", "slurm", "--workflow-profile", "profiles/slurm", *targets[1:],
                    "--configfile", *configs)
    blocks = dict(re.findall(r"^rule train:\n(?:    .*\n)*?    wildcards: experiment=(\w+).*\n(?:    .*\n)*?"
                             r"    resources: (.*)$", out, re.M))
    assert set(blocks) == {"base_in9", "slurm_probe", "ddp_probe"}, out[-3000:]
    assert re.search(r"\bgpu=2\b", blocks["ddp_probe"]) and "nodes=1" in blocks["ddp_probe"], blocks
    assert re.search(r"\bgpu=1\b", blocks["base_in9"]), blocks
    # SLURM's warning before the time limit, on which the trainer checkpoints at its next step (job_time)
    # (180 s, or a quarter of a shorter request: never at the job's start)
    for block in blocks.values():
        runtime = int(re.search(r"runtime=(\d+)", block)[1])
        assert f"slurm_extra=--signal=USR1@{min(180, runtime * 15)}," in block, block


def test_a_run_longer_than_a_job_continues_over_several_jobs(cluster, tmp_path):
    """`cluster.max_job_hours` of 3 min and a run of 2 epochs: two `train` jobs, neither asking for more
    than 3 min, the second continuing from the first one's checkpoint (the profile's `retries: 1`; the
    cost model's count is tested in test_cost.py), ending with the weights of the same run trained in
    one local job."""
    results = tmp_path / "results"
    extra = tmp_path / "chain.yaml"
    extra.write_text(json.dumps({"results": str(results), "experiments": {"chain_probe": CHAIN_PROBE},
                                 "cluster": {"max_job_hours": CHAIN_HOURS}}))
    run_dir = results / "runs" / "chain_probe" / "seed0"
    target, configs = str(run_dir / "model.pt"), ["tests/data/tiny.yaml", str(extra)]
    snakemake(target, "--cores", "2", "--configfile", *configs)  # the store, and the run in one job
    straight = torch.load(run_dir / "model.pt", weights_only=False)["state_dict"]
    shutil.rmtree(run_dir)

    log = tmp_path / "slurm.log"
    cmd = [sys.executable, "-m", "snakemake", target, "--executor", "slurm", "--workflow-profile", "profiles/slurm",
           "--profile", "profiles/slurm-local", "--retries", "1", "--configfile", *configs]
    with log.open("w") as out:
        rc = subprocess.run(cmd, cwd=workdir(), env=cluster.env, stdout=out, stderr=subprocess.STDOUT, timeout=900).returncode
    assert rc == 0, log.read_text()[-4000:]

    jobs = [j for j in scontrol_jobs(cluster) if "chain_probe" in j.get("Comment", "")]
    assert len(jobs) == 2, jobs  # one epoch a job
    assert all(j["TimeLimit"] == "00:03:00" for j in jobs), [j["TimeLimit"] for j in jobs]
    assert sorted(j["JobState"] for j in jobs) == ["COMPLETED", "FAILED"], jobs
    # each failed job stopped to continue (the train command's CONTINUE_EXIT_CODE), none crashed
    job_logs = dict(re.findall(r"submitted with SLURM jobid (\d+) \(log: (\S+)\)", log.read_text()))
    for job in (j["JobId"] for j in jobs if j["JobState"] == "FAILED"):
        assert f"non-zero exit status {CONTINUE_EXIT_CODE}" in Path(job_logs[job]).read_text(), job
    train_log = (results / "logs" / "train_chain_probe_seed0.log").read_text()  # the last job's
    assert re.search(r"resumed from .*checkpoint\.pt at epoch 1", train_log), train_log
    mine = torch.load(run_dir / "model.pt", weights_only=False)["state_dict"]
    assert mine.keys() == straight.keys() and all(torch.equal(mine[k], straight[k]) for k in mine)
    # the checkpoint stays until the run's scoring job (not asked for here) has the accepted model; the run's own
    # log holds both jobs (Snakemake's log above only the last one's)
    assert (run_dir / "checkpoint.pt").exists()
    assert (run_dir / "train.log").read_text().count("== attempt started ") == 2


def test_small_gpu_jobs_run_as_one_snakemake_group_job(cluster, tmp_path):
    """With `cluster.min_job_minutes` set, the tiny config's two Biased MNIST grid scorings (seconds each) go to
    SLURM as one job of their group (`workflow.job_groups`): one `sbatch` on the GPU partition with one GPU, its
    time limit the members' runtimes summed as the plan computes them, the members run one after the other in it,
    each writing its scores. Their models are trained locally first, so the group is the only SLURM job."""
    from debias_workbench.workflow.config import resolve_config, scoring_packs
    from debias_workbench.workflow.plan import config_job_groups, load_config

    results = tmp_path / "results"
    extra = tmp_path / "grouped.yaml"
    extra.write_text(json.dumps({"results": str(results), "cluster": {"min_job_minutes": 10}}))
    configs = ["tests/data/tiny.yaml", str(extra)]
    config = resolve_config(load_config([Path(workdir()) / c for c in configs]))
    (pack,) = [p for p in scoring_packs(config) if p.name == "_rebias_mnist"]  # its seed 0
    scored = {value: pack.experiments({"variant": value}) for value in pack.constraints["variant"]}
    assert len(scored) == 2
    runs = [f"{results}/runs/{e}/seed{s}" for names in scored.values() for e in names for s in pack.seeds]
    snakemake(*[f"{r}/model.pt" for r in runs], "--cores", "2", "--configfile", *configs)
    groups = config_job_groups(config)
    rule = f"evaluate{pack.name}"
    (name,) = {groups.group(rule, value) for value in scored}
    assert name is not None and len(groups.members[name]) > 2  # the config's other small scorings are not asked for

    log = tmp_path / "slurm.log"
    cmd = [sys.executable, "-m", "snakemake", *[f"{r}/eval.jsonl" for r in runs], "--executor", "slurm",
           "--workflow-profile", "profiles/slurm", "--profile", "profiles/slurm-local", "--configfile", *configs]
    with log.open("w") as out:
        rc = subprocess.run(cmd, cwd=workdir(), env=cluster.env, stdout=out, stderr=subprocess.STDOUT, timeout=900).returncode
    assert rc == 0, log.read_text()[-4000:]
    assert all(Path(f"{r}/eval.jsonl").stat().st_size > 0 for r in runs)
    (job,) = [j for j in scontrol_jobs(cluster) if j.get("Comment", "").startswith(f"rule_{name}")]
    assert job["JobState"] == "COMPLETED" and job["Partition"] == "gpu", job
    assert re.search(r"gpu[:=]1\b", job.get("TresPerJob", "") + job.get("TresPerNode", "")), job
    minutes = sum(groups.request_minutes(rule, value, config["cluster"]["max_job_hours"]) for value in scored)
    assert job["TimeLimit"] == f"{minutes // 60:02d}:{minutes % 60:02d}:00", (job["TimeLimit"], minutes)
    text = log.read_text()
    assert text.count("Group job ") == 1 and f"Group job {name}" in text, text[-3000:]
