"""Device choice and method construction from a run's resolved config, shared by training,
evaluation and the analyses."""

from __future__ import annotations

from typing import Any

import torch

from core.seeding import name_seed

from . import distributed
from .methods import get_method
from .methods.base import Method


def pick_device() -> torch.device:
    """The GPU if there is one (this process's own, cuda:LOCAL_RANK, under several processes), else the CPU."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device()) if distributed.world() > 1 else torch.device("cuda")


def build_method(run_cfg: dict[str, Any], num_classes: int, device: torch.device) -> Method:
    """The method of a run (`workbench.slices.run_config`), freshly initialised on `device`."""
    torch.manual_seed(name_seed("init", run_cfg["experiment"], run_cfg["seed"]))  # weight init depends on names only
    method = get_method(run_cfg["method"])(num_classes, run_cfg["training"], run_cfg["method_args"])
    if device.type == "cuda" and method.cfg.get("amp", True):
        method.autocast_dtype = torch.bfloat16
    if distributed.world() > 1 and method.cfg.get("sync_bn", False):  # statistics of the global batch
        method = distributed.synchronise_batch_norm(method, device)
    return method.to(device)
