"""Several processes (`training.gpus`, `debias_workbench/training/distributed.py`) on the CPU with gloo: two processes
match one on the same global batches (with synchronised batch norm), keep every method's state the
same on both ranks (MoCo's queue holds both ranks' keys), resume after a kill, write one model.pt
when started by `python -m torch.distributed.run`, and the workflow starts that launcher."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .conftest import ROOT

WORLD = 2


def _run(default_config: dict, experiment: str, spec: dict | None = None, **training) -> dict:
    """The run config of `experiment` (added from `spec` when given) with `training` overrides, in
    float32 (`amp: false`): the comparisons below are exact or at float32 tolerance, and bfloat16
    (on CPUs that have it) rounds a batch of 6 rows differently from two of 3."""
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    cfg = resolve_config(copy.deepcopy(default_config))
    if spec:
        cfg["experiments"][experiment] = {"dataset": "in9", "train_variant": "original", "label": experiment, **spec}
    run = run_config(cfg, experiment, 0)
    run["training"].update({"amp": False, **training})
    return run


def _worker(rank: int, folder: Path, stores: dict[str, Path], jobs: list[tuple[str, dict, int | None]]) -> None:
    """One of WORLD gloo processes: train each job (run dir name, run config, stop_after_epochs)
    as the workflow's launcher would, and save this rank's final method state as rank<k>.pt (and
    MoCo's keys of every step); rank 0's output of each job goes to <name>/rank0.log."""
    import contextlib

    import torch.distributed as dist

    import debias_workbench.training.trainer as trainer

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=WORLD)
    built: list = []
    build = trainer.build_method
    for name, run, stop in jobs:
        keys: list[torch.Tensor] = []
        trainer.build_method = lambda *a, keys=keys: _recording_keys(build(*a), keys, built)
        aligned = {field: stores[variant] for field, variant in run["aligned_variants"].items()}
        (folder / name).mkdir(exist_ok=True)
        with open(folder / name / f"rank{rank}.log", "a") as log, contextlib.redirect_stdout(log):
            given = _prerequisite_jobs(run, stores["original"], folder / name) if name.endswith("from_job") else None
            trainer.train(run, stores["original"], folder / name, aligned, stop_after_epochs=stop, prerequisites=given)
        torch.save({"state": built[-1].state_dict(), "keys": keys}, folder / name / f"rank{rank}.pt")
    dist.destroy_process_group()


def _prerequisite_jobs(run: dict, store: Path, folder: Path) -> dict[str, Path]:
    """{kind: file} of `run`'s prerequisites (Park et al.'s BiasEnsemble committee), each built by its kind's
    builder (`workbench prerequisite`'s) in these processes."""
    from debias_workbench.core.registry import import_entry
    from debias_workbench.training.prerequisites import run_jobs

    out = {}
    for job in run_jobs(run):
        out[job.kind.name] = folder / f"{job.kind.name}.pt"
        import_entry(job.kind.builder)(job.config, store, out[job.kind.name])
    assert list(out) == ["committee"]
    return out


def _recording_keys(method, keys: list, built: list):
    """`method`, remembered in `built`; a MoCo method also records every output of its shuffled
    key encoder in `keys` (per step: the keys, then the patch negatives' keys)."""
    built.append(method)
    if hasattr(method, "shuffled_key"):
        shuffled = method.shuffled_key
        method.shuffled_key = lambda x: keys.append(shuffled(x)) or keys[-1]
    return method


# no augmentation: each process draws its own, so only then are the inputs the one-process inputs
SAME_INPUTS = dict(batch_size=6, epochs=2, augment={"crop_scale": [1.0, 1.0], "hflip": False},
                   optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9})


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory, tiny_stores, default_config_module) -> Path:
    """Every 2-process training of the tests below, in one pair of gloo processes (each start
    imports torch again: seconds on 2 cores)."""
    cfg = default_config_module
    folder = tmp_path_factory.mktemp("ddp")
    lff = _run(cfg, "lff", {"method": "lff"}, batch_size=6, epochs=2, gpus=WORLD)
    moco = _run(cfg, "moco", batch_size=6, epochs=1, gpus=WORLD)
    moco["method_args"].update(queue_size=12, negative="patch", probe_epochs=1, probe_milestones=[1])
    clad = _run(cfg, "clad", batch_size=6, epochs=1, gpus=WORLD)
    clad["method_args"].update(queue_size=4)
    park = _run(cfg, "park", {"method": "intrinsic_feature_enhancement", "method_args": {
        "committee_size": 3, "committee_steps": 2, "committee_valid_every": 2, "t1": 0, "t2": 1}},
        batch_size=6, epochs=1, gpus=WORLD)
    jobs = [("sync", _run(cfg, "base_in9", **SAME_INPUTS, gpus=WORLD, sync_bn=True), None),
            ("local", _run(cfg, "base_in9", **SAME_INPUTS, gpus=WORLD), None),
            ("killed", lff, 1), ("killed", lff, None), ("straight", lff, None),   # killed after epoch 0, retried
            ("moco", moco, None), ("clad", clad, None), ("park", park, None), ("park_from_job", park, None)]
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(folder, tiny_stores, jobs), nprocs=WORLD)
    return folder


@pytest.fixture(scope="module")
def default_config_module() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def _ranks(run_dir: Path) -> list[dict]:
    return [torch.load(run_dir / f"rank{r}.pt") for r in range(WORLD)]


def _assert_ranks_equal(run_dir: Path) -> None:
    states = [r["state"] for r in _ranks(run_dir)]
    for other in states[1:]:  # bit for bit (NaN where Park et al.'s BN score has no reference yet)
        torch.testing.assert_close(other, states[0], rtol=0, atol=0, equal_nan=True, msg=str(run_dir))


def _max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel())


def _nudged_by_one_ulp(build):
    """`training.build.build_method` whose network starts one float32 ulp above the seeded weights
    (every parameter times 1 + eps): the rounding a reordered sum makes, in every weight at once."""
    def nudged(*args):
        method = build(*args)
        with torch.no_grad():
            for parameter in method.parameters():
                parameter.mul_(1 + torch.finfo(torch.float32).eps)
        return method
    return nudged


def float32_rounding_floor(run: dict, store: Path, reference: dict, folder: Path) -> float:
    """How far float32 rounding alone carries `run`'s weights from `reference` (its state dict):
    the largest difference after the same steps from weights one ulp apart. A batch of 6 against two
    of 3 sums in another order, and how the kernels order it depends on the CPU (oneDNN's AVX-512
    convolutions block the batch otherwise than its AVX2 ones: 6.8e-7 against 3.8e-5 here, on a
    floor of 1.5e-5 and 3.8e-5), so the tolerance is this floor, measured on the machine the test
    runs on, not a constant."""
    import debias_workbench.training.trainer as trainer

    build = trainer.build_method
    trainer.build_method = _nudged_by_one_ulp(build)
    try:
        nudged = torch.load(trainer.train(run, store, folder))["state_dict"]
    finally:
        trainer.build_method = build
    return _max_difference(nudged, reference)


def test_two_processes_with_sync_bn_match_one_on_the_same_global_batches(two_processes, tmp_path, tiny_stores,
                                                                        default_config):
    """The same global batches (each rank its half), gradients averaged, batch norm over both
    halves: ERM's weights and running statistics after 6 steps are the one-process ones up to
    float32 rounding (the runs are pinned to float32, `_run`; the tolerance is 10x what one ulp in
    every starting weight grows to over the same 6 steps on this machine). Without synchronised BN
    each rank normalises its own 3 images and the weights move apart: over 100x that floor."""
    from debias_workbench.training.trainer import train

    run = _run(default_config, "base_in9", **SAME_INPUTS)
    one = torch.load(train(run, tiny_stores["original"], tmp_path / "one"))["state_dict"]
    floor = float32_rounding_floor(run, tiny_stores["original"], one, tmp_path / "nudged")
    synced = torch.load(two_processes / "sync" / "model.pt")["state_dict"]
    local = torch.load(two_processes / "local" / "model.pt")["state_dict"]
    assert synced.keys() == one.keys()  # the batch norms' state dicts are those of nn.BatchNorm2d
    assert 0 < floor < 1e-4   # rounding, not another computation (1.5e-5 AVX2, 3.8e-5 AVX-512)
    assert _max_difference(synced, one) <= 10 * floor
    assert _max_difference(local, one) > 100 * floor
    for name in ("sync", "local"):
        _assert_ranks_equal(two_processes / name)
        assert sorted(p.name for p in (two_processes / name).iterdir()) == [  # the checkpoint kept: run_files
            "checkpoint.json", "checkpoint.pt", "config.json", "model.pt", "rank0.log", "rank0.pt", "rank1.log",
            "rank1.pt", "train.log", "train_metrics.jsonl"]


def test_a_killed_two_process_run_resumes_and_ends_as_an_uninterrupted_one(two_processes):
    """LfF (per-sample loss EMAs, two optimisers stepped together) in two processes, stopped
    after its first epoch's checkpoint and started again."""
    logs = [(two_processes / "killed" / f"rank{r}.log").read_text() for r in range(WORLD)]
    assert "resumed from" in logs[0] and "at epoch 1" in logs[0] and "resumed" not in logs[1]  # rank 0 logs
    resumed = torch.load(two_processes / "killed" / "model.pt")["state_dict"]
    straight = torch.load(two_processes / "straight" / "model.pt")["state_dict"]
    assert all(torch.equal(resumed[k], straight[k]) for k in straight)
    assert bool(resumed["ema_b.seen"].all())  # every row's EMA, from both processes' rows
    _assert_ranks_equal(two_processes / "killed")
    rows = [json.loads(line) for line in (two_processes / "killed" / "train_metrics.jsonl").read_text().splitlines()]
    assert sorted({r["epoch"] for r in rows}) == [0, 1]


def test_methods_keep_the_same_state_on_every_process(two_processes):
    """MoCo-v2: shuffled BN across the processes, both ranks' keys enqueued in rank order, the
    same weights and queue on both; CLAD's dictionaries and Park et al.'s per-sample state
    (loss EMAs, BN score, partners drawn for the global batch) likewise."""
    for name in ("moco", "clad", "park"):
        _assert_ranks_equal(two_processes / name)
    moco = _ranks(two_processes / "moco")
    # 18 training images: 3 global batches of 6 keys (3 per rank) into a queue of 12, which wraps once
    assert [len(m["keys"]) for m in moco] == [6, 6]   # per step the keys, then the patch negatives' keys
    assert int(moco[0]["state"]["queue_ptr"]) == 3 * 6 % 12
    keys = [torch.cat([m["keys"][2 * step] for m in moco]) for step in range(3)]  # rank 0's keys, then rank 1's
    queue = moco[0]["state"]["queue"]
    assert torch.equal(queue[6:], torch.nn.functional.normalize(keys[1], dim=1))   # step 2 in slots 6-11
    assert torch.equal(queue[:6], torch.nn.functional.normalize(keys[2], dim=1))   # step 3 in slots 0-5
    assert bool(_ranks(two_processes / "park")[0]["state"]["bn_score.seen"].all())


def test_a_committee_job_of_two_processes_trains_the_runs_committee(two_processes):
    """Park et al. in two processes reading its BiasEnsemble committee from the committee job's file (that
    job in two processes too, each scoring its share of the rows) ends as the run training it in its set-up."""
    _assert_ranks_equal(two_processes / "park_from_job")
    own, from_job = (_ranks(two_processes / name)[0]["state"] for name in ("park", "park_from_job"))
    torch.testing.assert_close(from_job, own, rtol=0, atol=0, equal_nan=True)


def test_torchrun_on_the_cpu_writes_one_model(tmp_path, tiny_stores, default_config):
    run = _run(default_config, "base_in9", batch_size=6, epochs=1, gpus=WORLD, sync_bn=True)
    config = tmp_path / "job.json"
    config.write_text(json.dumps({"runs": [run]}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(WORLD),
           "-m", "debias_workbench", "train", "--config", str(config), "--train-store", str(tiny_stores["original"]),
           "--runs-dir", str(tmp_path / "runs")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run_dir = tmp_path / "runs" / run["experiment"] / f"seed{run['seed']}"
    assert sorted(p.name for p in run_dir.iterdir()) == [  # the checkpoint kept until scoring: run_files
        "checkpoint.json", "checkpoint.pt", "config.json", "model.pt", "train.log", "train_metrics.jsonl"]
    assert (run_dir / "train.log").read_text().count("== attempt started ") == 1  # rank 0 writes it
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("model.pt")] == [run_dir.relative_to(tmp_path) / "model.pt"]
    assert proc.stdout.count("base_in9 seed 0 epoch 0:") == 1  # one process logs


def test_one_process_run_refuses_a_two_gpu_config(tmp_path, tiny_store, default_config):
    from debias_workbench.training.trainer import train

    with pytest.raises(ValueError, match="nproc_per_node 2"):
        train(_run(default_config, "base_in9", gpus=2), tiny_store, tmp_path)


def test_a_two_gpu_job_asks_for_both_on_one_node_in_less_time(default_config):
    from debias_workbench.workflow import resources as res

    one = _run(default_config, "base_in9")
    two = _run(default_config, "base_in9", gpus=2)
    assert res.training([two])[0] < res.training([one])[0] and res.training([two])[1] == 2 * res.training([one])[1]
    job = res.rule_resources(default_config, True, lambda wc: res.training([two]), lambda wc: res.gpus([two]))
    assert job["gpu"](None) == 2 and job["nodes"] == 1 and job["slurm_partition"] == "gpu"
    assert res.launcher("python", 1, 1) == "python"
    assert res.launcher("python", 2, 1).endswith("python -m torch.distributed.run --standalone --nproc_per_node 2")
    with pytest.raises(ValueError, match=r"different training\.gpus \[1, 2\]"):
        res.gpus([one, two])  # a grid job's runs share one launcher


def test_the_workflow_starts_torchrun_for_a_two_gpu_experiment(tmp_path):
    extra = tmp_path / "ddp.yaml"
    extra.write_text(json.dumps({"experiments": {"ddp_probe": {
        "method": "erm", "dataset": "in9", "train_variant": "original", "label": "DDP probe",
        "training": {"gpus": 2, "sync_bn": True}}}}))
    runs = tmp_path / "results" / "runs"
    from .test_workflow import snakemake  # here: the CUDA tests import this module on a machine without Snakemake

    out = snakemake("-n", "-p", str(runs / "ddp_probe/seed0/model.pt"), str(runs / "base_in9/seed0/model.pt"),
                    "--cores", "2", "--configfile", "tests/data/tiny.yaml", str(extra),
                    "--config", f"results={tmp_path / 'results'}")
    commands = [line for line in out.splitlines() if " -m debias_workbench train " in line]
    assert len(commands) == 2, out[-3000:]
    ddp = next(c for c in commands if "ddp_probe" in c)
    one = next(c for c in commands if "base_in9" in c)
    assert 'OMP_NUM_THREADS=1 "${WORKBENCH_PYTHON:-python}" -m torch.distributed.run --standalone --nproc_per_node 2 ' \
           "-m debias_workbench train" in ddp   # each process its configured thread
    assert "torch.distributed.run" not in one and '"${WORKBENCH_PYTHON:-python}" -m debias_workbench train' in one


def _bucket_worker(rank: int, folder: Path) -> None:
    """Each of two gloo processes: gradients of a 4-layer net on its own rows, averaged by
    `averaged_gradients` in buckets of one layer; saves what it saw."""
    import torch.distributed as dist

    from debias_workbench.training.distributed import averaged_gradients

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    net = torch.nn.Sequential(*(torch.nn.Linear(8, 8) for _ in range(4)))
    unused = torch.nn.Linear(8, 8)                                  # in the optimiser, never in the loss
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(rank))
    own = torch.autograd.grad(net(x).square().sum(), list(net.parameters()))
    sync = averaged_gradients([*net.parameters(), *unused.parameters()], bucket_bytes=8 * 8 * 4 + 8 * 4)
    with sync:
        net(x).square().sum().backward()
        started_in_backward = len(sync.works)
    averaged = [p.grad.clone() for p in net.parameters()]
    net.zero_grad(set_to_none=True)
    with (all_used := averaged_gradients(net.parameters(), bucket_bytes=8 * 8 * 4 + 8 * 4)):
        net(x).square().sum().backward()
        all_started = len(all_used.works) == len(all_used.buckets) == 4
    torch.save({"own": own, "averaged": averaged, "unused": [p.grad for p in unused.parameters()],
                "buckets": len(sync.buckets), "started_in_backward": started_in_backward, "all_started": all_started,
                "again": [p.grad for p in net.parameters()]}, folder / f"rank{rank}.pt")
    dist.destroy_process_group()


def test_gradients_are_averaged_bucket_by_bucket_while_backward_runs(tmp_path):
    """Buckets of one layer each: those after the unused layer's (the first bucket, as the last
    parameters) cannot start before it, so none starts during backward; the means are exact and the
    unused layer keeps no gradient. Without the unused layer every bucket starts inside backward."""
    import torch.multiprocessing as mp

    mp.spawn(_bucket_worker, args=(tmp_path,), nprocs=WORLD)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    assert ranks[0]["buckets"] == 5 and ranks[0]["started_in_backward"] == 0 and ranks[0]["all_started"]
    for k, mean in enumerate(ranks[0]["averaged"]):
        torch.testing.assert_close(mean, (ranks[0]["own"][k] + ranks[1]["own"][k]) / 2)
        assert torch.equal(mean, ranks[1]["averaged"][k]) and torch.equal(mean, ranks[0]["again"][k])
    assert all(g is None for r in ranks for g in r["unused"])
