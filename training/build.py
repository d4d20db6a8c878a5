"""Device choice and method construction from a run's resolved config, shared by training,
evaluation and the analyses."""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import Any

import torch

from core.seeding import name_seed

from . import distributed
from .methods import get_method
from .methods.base import Method, for_scoring


def pick_device() -> torch.device:
    """The GPU if there is one (this process's own, cuda:LOCAL_RANK, under several processes), else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device()) if distributed.world() > 1 else torch.device("cuda")


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16: oneDNN's bf16
    convolutions and matrix products then run about 1.2-1.8x faster than float32 on the demo's small
    networks, `benchmarks/demo_epochs.py`); on others bf16 is emulated and slower, so training stays
    float32. Read from /proc/cpuinfo (Linux); False elsewhere."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def precision(method: Method) -> str:
    """"bf16" where the method computes under bfloat16 autocast, else "fp32" (logged with the run)."""
    return "bf16" if method.autocast_dtype == torch.bfloat16 else "fp32"


def build_method(run_cfg: dict[str, Any], num_classes: int, device: torch.device, scoring: bool = False) -> Method:
    """The method of a run (`workbench.slices.run_config`), freshly initialised on `device`;
    with `scoring`, without optimisers or pretrained weights, for a checkpoint to fill."""
    torch.manual_seed(name_seed("init", run_cfg["experiment"], run_cfg["seed"]))  # weight init depends on names only
    with for_scoring() if scoring else contextlib.nullcontext():
        method = get_method(run_cfg["method"])(num_classes, run_cfg["training"], run_cfg["method_args"])
    if method.cfg.get("amp", True) and (device.type == "cuda" or cpu_has_native_bf16()):
        method.autocast_dtype = torch.bfloat16
    if distributed.world() > 1 and method.cfg.get("sync_bn", False):  # statistics of the global batch
        method = distributed.synchronise_batch_norm(method, device)
    return method.to(device)
