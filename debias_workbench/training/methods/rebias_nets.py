"""The networks of ReBias (Bahng et al., ICML 2020): SimpleConvNet F / G for Biased MNIST and
BagNet18 (receptive field 43) as the biased-by-design G for images.

Both follow the `Classifier` interface: `features(x)` gives pooled (B, D) features (HSIC is
computed on them, after global average pooling as in the paper), `feature_map(x)` the map
before the pooling, and `head` maps them to logits.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from ..network import Network


class SimpleConvNet(Network):
    """Four conv layers (16/32/64/128 channels, BN, ReLU, stride 1) with `kernel` x `kernel`
    kernels, global average pooling, a linear head. ReBias: F uses 7x7, G uses 1x1 (colour only).
    As the authors' `models/mnist_models.py`: convolutions with a bias, initialised
    kaiming-normal (fan_out, ReLU), batch norm at weight 1 and bias 0 (the paper states no
    initialisation); the head keeps PyTorch's default."""

    CHANNELS = (16, 32, 64, 128)

    def __init__(self, num_classes: int, kernel: int = 7, channels: tuple[int, ...] = CHANNELS):
        super().__init__()
        layers, c_in = [], 3
        for c_out in channels:
            conv = nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2)
            nn.init.kaiming_normal_(conv.weight, mode="fan_out", nonlinearity="relu")
            layers += [conv, nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]
            c_in = c_out
        self.body = nn.Sequential(*layers)
        self.feature_dim = c_in
        self.head = nn.Linear(c_in, num_classes)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, C, H, W)
        return self.body(x)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).mean((2, 3))  # (B, C)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class _BagBlock(nn.Module):
    """Residual block with one k x k conv (carrying the stride) and one 1x1 conv; the shortcut
    is a strided 1x1 projection, so only the k x k conv widens the receptive field."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__()
        self.conv_a = nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, bias=False)
        self.bn_a = nn.BatchNorm2d(c_out)
        self.conv_b = nn.Conv2d(c_out, c_out, 1, bias=False)
        self.bn_b = nn.BatchNorm2d(c_out)
        self.shortcut = (
            nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
            if stride != 1 or c_in != c_out
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn_a(self.conv_a(x)))
        return torch.relu(self.bn_b(self.conv_b(out)) + self.shortcut(x))


class BagNet18(Network):
    """BagNet18 with receptive field 43 (REFERENCE.md): a 1x1 conv and a 3x3 valid conv as the
    stem, then 4 stages of 2 blocks (64/128/256/512 channels, strides 2, 2, 2, 1) whose k x k
    kernels are 3 only in both blocks of stage 3 and the first block of stage 4. Each 3x3 conv
    adds 2 x (its input stride) to the receptive field: 3 + 2 x (4 + 8 + 8) = 43."""

    KERNELS = ((1, 1), (1, 1), (3, 3), (3, 1))
    STRIDES = (2, 2, 2, 1)
    CHANNELS = (64, 128, 256, 512)

    def __init__(self, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 1, bias=False), nn.Conv2d(64, 64, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)
        )
        blocks, c_in = [], 64
        for kernels, stride, c_out in zip(self.KERNELS, self.STRIDES, self.CHANNELS):
            for i, k in enumerate(kernels):
                blocks.append(_BagBlock(c_in, c_out, k, stride if i == 0 else 1))
                c_in = c_out
        self.blocks = nn.Sequential(*blocks)
        self.feature_dim = c_in
        self.head = nn.Linear(c_in, num_classes)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem(x))

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.feature_map(x).mean((2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
