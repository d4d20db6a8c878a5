"""`arch: timm/<name>`: any timm model by name as a method's network, with the user's weights.

The network is `timm.create_model(name, pretrained=False, num_classes=0)` (its pooled features) plus
a linear head of the workbench's own; `pretrained` is a local weights file (a torch state_dict or a
`.safetensors` file, e.g. the `model.safetensors` of a timm model's release), checked against
`pretrained_sha256` when given, the model's own classifier left out. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from .models import WeightsError, load_state_dict, weights_file

def timm_weights(path: str | Path, sha256: str | None) -> dict[str, torch.Tensor]:
    """A timm model's weights from a local `.safetensors` file or torch state_dict, the file checked
    (`models.weights_file`) either way."""
    if Path(path).suffix != ".safetensors":
        return load_state_dict(path, sha256)
    from safetensors.torch import load_file

    return load_file(str(weights_file(path, sha256)))


class TimmClassifier(nn.Module):
    """A timm model split into `features(x)` (B, D) pooled features, `feature_map(x)` (B, D, h, w)
    (timm's `forward_features`: a CNN's last stage before pooling) and `head` (D -> classes)."""

    def __init__(self, name: str, num_classes: int, pretrained: str | None = None, pretrained_sha256: str | None = None):
        super().__init__()
        import timm

        if not timm.is_model(name):
            raise WeightsError(f"training.arch: timm has no model {name!r} (see timm.list_models())")
        net = timm.create_model(name, pretrained=False, num_classes=0)
        if pretrained:
            classifier = net.pretrained_cfg.get("classifier", "")
            state = {k: v for k, v in timm_weights(pretrained, pretrained_sha256).items()
                     if not (classifier and k.startswith(f"{classifier}."))}
            try:
                net.load_state_dict(state, strict=True)
            except RuntimeError as exc:  # other names or shapes: the weights of another model
                raise WeightsError(f"{pretrained} does not fit timm/{name} ({str(exc)[:300]}); give that model's "
                                   f"weights, or set `arch` to the model they belong to") from exc
        self.backbone, self.feature_dim = net, net.num_features
        self.head = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone.forward_features(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))
