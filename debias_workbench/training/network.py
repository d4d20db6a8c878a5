"""The type of what `models.build_network` returns, for the methods and the type checker: every
network is an `nn.Module` with `features(x)` (B, D), `feature_dim` D and a linear `head`
(D -> classes). Declarations only: nothing here runs or changes a network."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn


class Network(nn.Module):
    """The common base of the classifiers `build_network` makes (ResNet, timm, the small CNNs)."""

    feature_dim: int
    head: nn.Linear
    features: Callable[[torch.Tensor], torch.Tensor]  # (B, 3, H, W) -> (B, D), a method of each network
    #: (B, 3, H, W) -> (B, D, h, w) before the global average pooling: a method of all but `SmallCNN`
    feature_map: Callable[[torch.Tensor], torch.Tensor]
