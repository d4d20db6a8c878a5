"""On a CUDA GPU (`pytest -m cuda`; skipped without one, and run by `python -m benchmarks.device_check`
on the lent GPU machine): one step of every benchmarked method at its paper's shapes and precision,
with no host synchronisation in ERM's and ReBias's steps; resume equality under the deterministic
settings; two processes on one GPU (gloo on CUDA tensors); scoring on the GPU equal to the CPU's;
saved files that load on a CPU-only machine; the process's CUDA settings."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from benchmarks.gpu_throughput import CASES, image_pool, paper_run_configs, write_stores
from debias_workbench.training.build import build_method, pick_device
from debias_workbench.training.data import ZarrBatches
from debias_workbench.training.evaluation import predict_store
from debias_workbench.training.methods import get_method
from debias_workbench.training.trainer import train
from debias_workbench.workflow.slices import run_config

from .test_distributed import WORLD, SAME_INPUTS, _assert_ranks_equal, _run, _worker

pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU: run on a GPU node, or `python -m benchmarks.device_check`")]

#: images per paper-shape store: two batches of the largest paper batch (128), plus a val split
PAPER_ROWS, PAPER_VAL = 256, 64


@pytest.fixture(scope="module")
def paper_stores(tmp_path_factory) -> dict:
    """224-px stores in the workflow's format (original with masks, ONLY_BG_T, Stylized)."""
    pool, _ = image_pool(64, 224)
    return write_stores(tmp_path_factory.mktemp("paper_stores"), pool, PAPER_ROWS, PAPER_VAL, 32, "none")


@pytest.fixture(scope="module")
def small_stores(tmp_path_factory) -> dict:
    """32-px stores of synthetic renders (48 training rows, 18 val), made without the dataset
    pipeline's AdaIN weights, which the GPU test machine lacks."""
    root = tmp_path_factory.mktemp("small_stores")
    pool, _ = image_pool(48, 32, root / "no-photos")
    return write_stores(root, pool, 48, 18, 4, "none")


def _one_step(name: str, stores: dict):
    run = paper_run_configs([name], None, committee_steps=2)[name]
    device = pick_device(run["training"].get("deterministic", True), tf32=run["training"].get("amp", True))
    cls = get_method(run["method"])
    batches = ZarrBatches(stores["original"], "train", run["training"]["batch_size"], shuffle=True, seed=0,
                          drop_last=True, fields=("images", "labels", "bias_labels", *cls.extra_fields),
                          pin_memory=True, aligned={f: stores[v] for f, v in cls.aligned_variants.items()})
    method = build_method(run, len(batches.classes), device)
    method.total_steps = len(batches)
    method.setup(batches)
    method.train()
    batch = {k: v.to(device, non_blocking=True) for k, v in next(iter(batches.epoch(0))).items()}
    return method, batch


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_step_of_every_method_at_its_paper_shapes_and_precision(name, paper_stores):
    method, batch = _one_step(name, paper_stores)
    first = next(p for p in method.network.parameters() if p.requires_grad)
    before = first.detach().clone()
    stats = [method.update(batch) for _ in range(2)]  # Park et al. at t = T2 train only the guidance's partners
    torch.cuda.synchronize()
    assert all(torch.isfinite(torch.as_tensor(v)).all() for step in stats for v in step.values()), stats
    expected = torch.bfloat16 if torch.cuda.get_device_capability() >= (8, 0) else None
    assert method.autocast_dtype == expected
    assert not torch.equal(before, first)
    conv = next(m for m in method.network.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.parametrize("name", ["erm", "rebias", "moco_v2_patch"])
def test_these_steps_never_wait_for_the_gpu(name, paper_stores):
    """No host-device synchronisation inside a step once it runs (CUDA's sync debug mode raises on
    one): the CPU queues the next step while the GPU works on this one."""
    method, batch = _one_step(name, paper_stores)
    method.update(batch)                                          # the first step reads its counters once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        method.update(batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_a_resumed_cuda_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path, small_stores, default_config):
    cfg = run_config(default_config_resolved(default_config), "base_in9", 0)
    cfg["training"].update(epochs=2, batch_size=6)
    straight = torch.load(train(cfg, small_stores["original"], tmp_path / "a"))["state_dict"]
    train(cfg, small_stores["original"], tmp_path / "b", stop_after_epochs=1)
    resumed = torch.load(train(cfg, small_stores["original"], tmp_path / "b"))["state_dict"]
    assert straight.keys() == resumed.keys() and all(torch.equal(straight[k], resumed[k]) for k in straight)
    assert torch.backends.cudnn.deterministic and torch.are_deterministic_algorithms_enabled()


def default_config_resolved(default_config: dict) -> dict:
    import copy

    from debias_workbench.workflow.config import resolve_config

    return resolve_config(copy.deepcopy(default_config))


def test_saved_models_load_on_a_machine_without_a_gpu(tmp_path, small_stores, default_config):
    cfg = run_config(default_config_resolved(default_config), "base_in9", 0)
    cfg["training"].update(epochs=1, batch_size=6)
    model = train(cfg, small_stores["original"], tmp_path / "run")
    code = ("import sys, torch; s = torch.load(sys.argv[1], weights_only=False)['state_dict']; "
            "print(sorted({str(t.device) for t in s.values()}))")
    out = subprocess.run([sys.executable, "-c", code, str(model)], capture_output=True, text=True, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.stdout.strip() == "['cpu']"


def test_scoring_on_the_gpu_equals_the_cpus(tmp_path, small_stores, default_config):
    """The same trained model scores the same images the same on both devices (float32: the
    logits may differ in the last bits, a prediction only where two classes tie that closely)."""
    cfg = run_config(default_config_resolved(default_config), "base_in9", 0)
    cfg["training"].update(epochs=1, batch_size=6, amp=False)
    state = torch.load(train(cfg, small_stores["original"], tmp_path / "run"))["state_dict"]
    preds = {}
    for device in (torch.device("cpu"), torch.device("cuda")):
        method = build_method(cfg, 9, device, scoring=True)
        method.load_state_dict(state)
        method.eval()
        preds[device.type] = predict_store(lambda x, m=method: m.predict(x).argmax(1), small_stores["original"], "val",
                                           4, method.augmenter, device)["pred"]
    assert (preds["cpu"] != preds["cuda"]).sum() <= 1                # of 18 val images: a near-tie at most


def test_two_processes_share_one_gpu_and_keep_the_same_weights(tmp_path_factory, small_stores, default_config):
    """Two training processes on the one GPU over gloo (NCCL needs a GPU each): every process ends
    with the same weights, resumed or not."""
    import torch.multiprocessing as mp

    folder = tmp_path_factory.mktemp("cuda_ddp")
    lff = _run(default_config, "lff", {"method": "lff"}, batch_size=6, epochs=2, gpus=WORLD)
    jobs = [("local", _run(default_config, "base_in9", **SAME_INPUTS, gpus=WORLD), None),
            ("killed", lff, 1), ("killed", lff, None)]
    mp.spawn(_worker, args=(folder, small_stores, jobs), nprocs=WORLD)
    for name in ("local", "killed"):
        _assert_ranks_equal(folder / name)
    log = (folder / "local" / "rank0.log").read_text()
    assert "epoch 1" in log, log[-2000:]


@pytest.mark.parametrize("channels_last", [False, True])
def test_split_batch_norm_in_one_call_on_cuda_is_the_per_block_one_under_bf16(channels_last):
    """The CUDA path of MoCo's split batch norm (`grouped_batch_norm`) against the per-block one, on the
    GPU, under bf16 autocast: output, gradients, running statistics and the output's memory format."""
    from debias_workbench.training.methods.split_batch_norm import grouped_batch_norm, per_block_batch_norm

    torch.manual_seed(0)
    x = (torch.randn(16, 8, 7, 7, device="cuda") * 2 + 1).to(torch.bfloat16)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    results = []
    for normalise in (per_block_batch_norm, grouped_batch_norm):
        bn = torch.nn.BatchNorm2d(8).cuda()
        xi = x.clone().requires_grad_(True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = normalise(bn, xi, 4, 0.1)
        out.float().square().sum().backward()
        assert out.is_contiguous(memory_format=torch.channels_last) == channels_last
        results.append((out.float(), xi.grad.float(), bn.weight.grad, bn.running_mean.clone(), bn.running_var.clone()))
    for a, b in zip(*results):
        assert torch.allclose(a, b, atol=2e-2, rtol=2e-2)
