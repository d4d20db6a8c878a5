"""Pretrained weights from a verified local file, never downloaded: the file checked (present, its
checksum where known) and read as a state_dict of tensors, or a `WeightsError` that says what to place where."""

from __future__ import annotations

from pathlib import Path

import torch

from debias_workbench.core.provenance import file_digest


class WeightsError(RuntimeError):
    pass


def weights_file(path: str | Path, sha256: str | None) -> Path:
    """The local weights file at `path`, checked against `sha256` when given. Never downloads."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WeightsError(
            f"pretrained weights not found at {path}. Place the weights file there (a torchvision state_dict "
            "such as resnet50-0676ba61.pth for IMAGENET1K_V1; for `arch: timm/<name>`, that model's "
            "model.safetensors or state_dict) or set the path to null for random init; nothing is downloaded "
            "at run time."
        )
    if sha256 and (actual := file_digest(path, "sha256")) != sha256:
        raise WeightsError(f"{path} has sha256 {actual}, expected {sha256}; replace the file with an intact copy")
    return path


def load_state_dict(path: str | Path, sha256: str | None) -> dict[str, torch.Tensor]:
    """A state_dict from a local file (`weights_file`: present, and its checksum when given)."""
    path = weights_file(path, sha256)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ... for a damaged file
        raise WeightsError(
            f"{path} is not a readable torch state_dict ({type(exc).__name__}: {str(exc)[:200]}); "
            "replace it with an intact copy of the weights file (no checksum was given to tell "
            "a damaged copy from another file: set `pretrained_sha256`)"
        ) from exc
    state = state.get("state_dict", state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(
            f"{path} holds a {type(state).__name__}, not a state_dict of tensors; save the weights with "
            "torch.save(model.state_dict(), path)"
        )
    return state
