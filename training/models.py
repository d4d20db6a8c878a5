"""Backbones: torchvision ResNets, random init or weights from a verified local file."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torchvision

from pipeline.store import file_digest

from .rebias_nets import BagNet18, SimpleConvNet


class WeightsError(RuntimeError):
    pass


def load_state_dict(path: str | Path, sha256: str | None) -> dict[str, torch.Tensor]:
    """A state_dict from a local file, checked against `sha256` when given. Never downloads."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise WeightsError(
            f"pretrained weights not found at {path}. Place the torchvision state_dict file there "
            "(e.g. resnet50-11ad3fa6.pth for IMAGENET1K_V2) or set the path to null for random init; "
            "nothing is downloaded at run time."
        )
    if sha256 and (actual := file_digest(path, "sha256")) != sha256:
        raise WeightsError(f"{path} has sha256 {actual}, expected {sha256}; replace the file with an intact copy")
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state.get("state_dict", state) if isinstance(state, dict) else state


class Classifier(nn.Module):
    """A ResNet split into `features(x)` (B, D) pooled features and `head` (D -> classes)."""

    def __init__(self, arch: str, num_classes: int, pretrained: str | None = None, pretrained_sha256: str | None = None):
        super().__init__()
        net = getattr(torchvision.models, arch)(weights=None)
        if pretrained:
            state = load_state_dict(pretrained, pretrained_sha256)
            state = {k: v for k, v in state.items() if not k.startswith("fc.")}
            missing, unexpected = net.load_state_dict(state, strict=False)
            if unexpected or set(missing) - {"fc.weight", "fc.bias"}:
                raise WeightsError(f"{pretrained} does not fit {arch}: missing {missing[:5]}, unexpected {unexpected[:5]}")
        self.feature_dim = net.fc.in_features
        net.fc = nn.Identity()
        self.backbone = net
        self.head = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


#: small networks selectable by `arch` besides torchvision's ResNets
SMALL_NETWORKS = {"simple_cnn7": lambda n, ch: SimpleConvNet(n, 7, ch), "simple_cnn1": lambda n, ch: SimpleConvNet(n, 1, ch),
                  "bagnet18": lambda n, ch: BagNet18(n)}


def build_network(arch: str, num_classes: int, pretrained: str | None = None,
                  pretrained_sha256: str | None = None, channels: tuple[int, ...] | None = None) -> nn.Module:
    """A network with `features(x)` (B, D), `head` and `feature_dim`: a torchvision ResNet
    (`Classifier`) or one of ReBias's small networks (random init; `channels` sets the widths
    of the SimpleConvNets, default the paper's 16/32/64/128)."""
    if arch in SMALL_NETWORKS:
        if pretrained:
            raise WeightsError(f"arch {arch!r} has no pretrained weights; set `pretrained: null`")
        return SMALL_NETWORKS[arch](num_classes, tuple(channels or SimpleConvNet.CHANNELS))
    return Classifier(arch, num_classes, pretrained, pretrained_sha256)


def imagenet_classifier(arch: str, weights: str, sha256: str | None) -> nn.Module:
    """A 1000-class torchvision model with the given weights (for scoring Base (IN))."""
    net = getattr(torchvision.models, arch)(weights=None)
    net.load_state_dict(load_state_dict(weights, sha256))
    return net
