"""What a GPU node needs, checked on the CPU: the local GPU cap, the process-to-GPU check, the
CUDA settings of a process, bf16 only where the card has it, files that load without the GPU."""

from __future__ import annotations

import os
import stat
from collections import OrderedDict

import pytest
import torch

from debias_workbench.training import build, distributed
from debias_workbench.training.trainer import on_cpu
from debias_workbench.workflow.resources import local_gpu_cap, visible_gpus


@pytest.mark.parametrize("shown, count", [("0,1", 2), ("", 0), ("-1", 0), ("2,-1,3", 1), ("GPU-5f1c,GPU-77aa", 2)])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, shown, count):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", shown)
    assert visible_gpus() == count


def test_visible_gpus_ask_nvidia_smi_and_are_none_without_it(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert visible_gpus() == 0 and local_gpu_cap(None) is None      # a CPU node: no cap, --cores limits
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf 'GPU 0: NVIDIA H100 (UUID: a)\\nGPU 1: NVIDIA H100 (UUID: b)\\n'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    assert visible_gpus() == 2 and local_gpu_cap(None) == 2
    assert local_gpu_cap(1) == 1                                      # --resources gpu=1 wins


def test_more_processes_than_gpus_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(RuntimeError, match=r"needs GPU 1, but the node shows 1 GPU.*training.gpus to at most 1"):
        distributed.local_gpu()
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed.local_gpu() == 0


@pytest.fixture
def restore_backends(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
             torch.backends.cuda.matmul.allow_tf32, torch.are_deterministic_algorithms_enabled(),
             torch.is_deterministic_algorithms_warn_only_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    yield
    (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
     torch.backends.cuda.matmul.allow_tf32) = saved[:4]
    torch.use_deterministic_algorithms(saved[4], warn_only=saved[5])
    torch.utils.deterministic.fill_uninitialized_memory = saved[6]


def test_a_cuda_process_is_deterministic_by_default_and_benchmarks_kernels_otherwise(restore_backends):
    build.configure_device(torch.device("cuda"), deterministic=True, tf32=True)
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == build.CUBLAS_DETERMINISTIC
    # no fill kernel per allocation (it halved MoCo-v2's and LfF + BE's images/s on an H200)
    assert not torch.utils.deterministic.fill_uninitialized_memory
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32    # with bf16 autocast
    build.configure_device(torch.device("cuda"), deterministic=True)
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32  # amp off: float32
    build.configure_device(torch.device("cuda"), deterministic=False)
    assert torch.backends.cudnn.benchmark and not torch.backends.cudnn.deterministic
    assert not torch.are_deterministic_algorithms_enabled()


def test_the_cpu_process_keeps_torchs_settings(restore_backends):
    torch.backends.cudnn.benchmark = False
    build.configure_device(torch.device("cpu"), deterministic=False)
    assert not torch.backends.cudnn.benchmark and "CUBLAS_WORKSPACE_CONFIG" not in os.environ


@pytest.mark.parametrize("capability, native", [((7, 0), False), ((7, 5), False), ((8, 0), True), ((9, 0), True)])
def test_bf16_autocast_only_on_cards_that_compute_it(monkeypatch, capability, native):
    """V100 (7.0) and T4 (7.5) emulate bfloat16 slowly: they train in float32."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert build.native_bf16(torch.device("cuda")) is native


def test_saved_states_hold_cpu_tensors_in_their_own_containers():
    weight = torch.ones(2, requires_grad=True)
    state = {"model": OrderedDict(w=weight * 2), "optim": [{"step": torch.tensor(3.0)}], "epoch": 4}
    out = on_cpu(state)
    assert type(out["model"]) is OrderedDict and out["epoch"] == 4
    assert out["model"]["w"].device.type == "cpu" and not out["model"]["w"].requires_grad
    assert torch.equal(out["optim"][0]["step"], torch.tensor(3.0))


def test_batch_norm_statistics_are_broadcast_only_where_they_can_differ(monkeypatch):
    """After each step rank 0's running statistics go to every process (DDP's broadcast_buffers),
    except those of batch norms over the global batch, the same everywhere already."""
    sent = []
    monkeypatch.setattr(distributed, "world", lambda: 2)
    monkeypatch.setattr(distributed.dist, "broadcast", lambda tensor, src: sent.append(tensor.numel()))
    plain = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4))
    distributed.broadcast_batch_norm_(plain)
    assert sent == [8]                                                  # running mean and variance of 4 channels
    sent.clear()
    distributed.broadcast_batch_norm_(distributed.synchronise_batch_norm(plain, torch.device("cpu")))
    assert sent == []
