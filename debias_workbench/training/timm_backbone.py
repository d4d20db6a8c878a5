"""`arch: timm/<name>`: any timm model by name as a method's network, with the user's weights.

The network is `timm.create_model(name, pretrained=False, num_classes=0)` (its pooled features) plus
a linear head of the workbench's own; `pretrained` is a local weights file (a torch state_dict or a
`.safetensors` file, e.g. the `model.safetensors` of a timm model's release), checked against
`pretrained_sha256` when given, the model's own classifier left out. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from .network import Network
from .weights import WeightsError, load_state_dict, weights_file


def timm_weights(path: str | Path, sha256: str | None) -> dict[str, torch.Tensor]:
    """A timm model's weights from a local `.safetensors` file or torch state_dict, the file checked
    (`weights.weights_file`) either way."""
    if Path(path).suffix != ".safetensors":
        return load_state_dict(path, sha256)
    from safetensors.torch import load_file

    return load_file(str(weights_file(path, sha256)))


def _pools_its_map(net: Any, width: int) -> bool:  # a timm model (forward_features)
    """Whether the model's pooled features are the spatial mean of `forward_features` (one check on a
    small batch in eval mode, the model's mode restored)."""
    mode = net.training
    net.eval()
    try:
        with torch.no_grad():
            x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
            fmap = net.forward_features(x)
            return (
                fmap.ndim == 4
                and fmap.shape[1] == width
                and torch.allclose(fmap.mean((2, 3)), net(x), rtol=1e-4, atol=1e-5)
            )
    except RuntimeError:  # an input size the model does not take (a ViT's fixed patch grid)
        return False
    finally:
        net.train(mode)


class TimmClassifier(Network):
    """A timm model split into `features(x)` (B, D) pooled features, `feature_map(x)` (B, D, h, w)
    (timm's `forward_features`: a CNN's last stage before pooling) and `head` (D -> classes)."""

    def __init__(
        self, name: str, num_classes: int, pretrained: str | None = None, pretrained_sha256: str | None = None
    ):
        super().__init__()
        import timm

        if not timm.is_model(name):
            raise WeightsError(f"training.arch: timm has no model {name!r} (see timm.list_models())")
        # Any: timm's models carry forward_features, pretrained_cfg and num_features, which nn.Module lacks
        net: Any = timm.create_model(name, pretrained=False, num_classes=0)
        if pretrained:
            classifier = net.pretrained_cfg.get("classifier") or ()
            heads = tuple(f"{c}." for c in ((classifier,) if isinstance(classifier, str) else classifier))
            state = {
                k: v
                for k, v in timm_weights(pretrained, pretrained_sha256).items()
                if not (heads and k.startswith(heads))
            }
            try:
                net.load_state_dict(state, strict=True)
            except RuntimeError as exc:  # other names or shapes: the weights of another model
                raise WeightsError(
                    f"{pretrained} does not fit timm/{name} ({str(exc)[:300]}); give that model's "
                    f"weights, or set `arch` to the model they belong to"
                ) from exc
        self.name, self.backbone = name, net
        # the width of what the pooled forward returns: after a head convolution (MobileNetV3) it is not num_features
        self.feature_dim = getattr(net, "head_hidden_size", None) or net.num_features
        self.head = nn.Linear(self.feature_dim, num_classes)
        self.pools_its_map = _pools_its_map(net, self.feature_dim)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """(B, D, h, w) whose spatial mean is `features(x)`: a CNN's last stage (ResNets); other
        models (ViT tokens, ConvNeXt's head norm, MobileNetV3's head convolution) have none."""
        if not self.pools_its_map:
            raise WeightsError(
                f"timm/{self.name} has no feature map whose average is its features (a ViT's tokens, "
                "a head norm or convolution after the last stage); methods and analyses that read "
                "feature maps (Park et al., the saliency maps) need a CNN such as timm/resnet50"
            )
        return self.backbone.forward_features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
