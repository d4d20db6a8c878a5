"""Device choice and method construction from a run's resolved config, shared by training,
evaluation and the analyses."""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

import torch

from debias_workbench.core.seeding import name_seed
from debias_workbench.training.run_config import RunConfig

from . import distributed
from .methods import get_method
from .methods.base import Method, for_scoring
from .settings import TrainingSettings


def pick_device(deterministic: bool = True, tf32: bool = False) -> torch.device:
    """The GPU if there is one (this process's own, cuda:LOCAL_RANK, under several processes), else
    the CPU; configured for the process (`configure_device`)."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    device = torch.device("cuda", torch.cuda.current_device()) if distributed.world() > 1 else torch.device("cuda")
    configure_device(device, deterministic, tf32)
    return device


#: cuBLAS's workspace setting that makes its matrix products deterministic (CUDA's reproducibility notes)
CUBLAS_DETERMINISTIC = ":4096:8"
#: the first GPU generation with native bfloat16 (Ampere, compute capability 8.0): older cards emulate it slowly
MIN_BF16_CAPABILITY = (8, 0)


def configure_device(device: torch.device, deterministic: bool, tf32: bool = False) -> None:
    """Process-wide CUDA settings of a training or scoring process on `device` (nothing on the CPU,
    which is deterministic anyway). `tf32`: TF32 for the float32 matrix products and convolutions
    left outside bf16 autocast (tensor cores, a 10-bit mantissa; the trainer sets it with
    `training.amp`, so a run with amp off computes in full float32, as that key promises: on an
    H200, TF32 convolutions moved two processes' SyncBatchNorm run 1.6e-3 from one process's);
    `deterministic`: deterministic cuDNN / cuBLAS kernels and `torch.use_deterministic_algorithms`
    (warning, not failing, on an op without a deterministic kernel), so a resumed or repeated run
    ends with the same weights; otherwise `cudnn.benchmark`, whose pick of the fastest kernel per
    shape pays off as every batch has the same shape (drop_last). Deterministic mode's default fill
    of every uninitialised allocation (`torch.utils.deterministic.fill_uninitialized_memory`) is
    turned off: it is one more kernel per `torch.empty` (13,296 fills in one MoCo-v2 step with split
    batch norm), which on an H200 made MoCo-v2 and LfF + BiasEnsemble launch-bound at half the
    images/s of non-deterministic kernels (docs/measurements.md); no workbench kernel reads memory
    it has not written, so the fill changes no result. Call before the first CUDA computation:
    cuBLAS reads its workspace setting when it starts."""
    if device.type != "cuda":
        return
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    # a module attribute torch's stubs omit
    torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]


def native_bf16(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 natively: a GPU of compute capability 8.0 or later, or
    a CPU with AVX512-BF16 / AMX (`cpu_has_native_bf16`)."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= MIN_BF16_CAPABILITY
    return cpu_has_native_bf16()


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16: oneDNN's bf16
    convolutions and matrix products then run faster than float32 on the demo's small networks:
    docs/measurements.md#the-demos-cost-per-rule); on others bf16 is emulated and slower, so training stays
    float32. Read from /proc/cpuinfo (Linux); False elsewhere."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def precision(method: Method) -> str:
    """ "bf16" where the method computes under bfloat16 autocast, else "fp32" (logged with the run)."""
    return "bf16" if method.autocast_dtype == torch.bfloat16 else "fp32"


def build_method(run_cfg: RunConfig, num_classes: int, device: torch.device, scoring: bool = False) -> Method:
    """The method of a run (`workflow.slices.run_config`), freshly initialised on `device`;
    with `scoring`, without optimisers or pretrained weights, for a checkpoint to fill."""
    torch.manual_seed(name_seed("init", run_cfg["experiment"], run_cfg["seed"]))  # weight init depends on names only
    with for_scoring() if scoring else contextlib.nullcontext():
        method = get_method(run_cfg["method"])(num_classes, run_cfg["training"], run_cfg["method_args"])
    settings = TrainingSettings.of(method.cfg)
    if settings.amp and native_bf16(device):
        method.autocast_dtype = torch.bfloat16
    if distributed.world() > 1 and settings.sync_bn:  # statistics of the global batch
        method = distributed.synchronise_batch_norm(method, device)
    if device.type == "cuda":  # the inputs are channels-last (`Augmenter.apply`): so are the convolutions' weights,
        # else each call converts them; Module.to takes memory_format, which its typed overloads omit
        return method.to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]
    return method.to(device)
