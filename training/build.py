"""Device choice and method construction from a run's resolved config, shared by training,
evaluation and the analyses."""

from __future__ import annotations

from typing import Any

import torch

from pipeline.seeding import name_seed

from .methods import get_method
from .methods.base import Method


def pick_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_method(run_cfg: dict[str, Any], num_classes: int, device: torch.device) -> Method:
    """The method of a run (`workbench.slices.run_config`), freshly initialised on `device`."""
    torch.manual_seed(name_seed("init", run_cfg["experiment"], run_cfg["seed"]))  # weight init depends on names only
    method = get_method(run_cfg["method"])(num_classes, run_cfg["training"], run_cfg["method_args"])
    if device.type == "cuda" and method.cfg.get("amp", True):
        method.autocast_dtype = torch.bfloat16
    return method.to(device)
