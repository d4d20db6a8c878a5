"""MoCo-v2's "aug-plus" views (Chen et al. 2020, as Ge et al. train MoCo-v2 and BYOL), batched on
the images' device: RandomResizedCrop(scale 0.2-1) + horizontal flip (the `Augmenter`'s affine
views), ColorJitter(0.4, 0.4, 0.4, 0.1) with p = 0.8, grayscale with p = 0.2, Gaussian blur
sigma ~ U(0.1, 2.0) with p = 0.5 (sigma and kernel scaled from 224 px to the image size), then
normalisation. Two simplifications of torchvision's ColorJitter, both to keep one batched call:
the four jitters run in a fixed order (brightness, contrast, saturation, hue) instead of a random
one, and the hue shift is a rotation of the chroma plane in YIQ space instead of a shift in HSV.

A view is sampled (`AugPlus.sample`: a `ViewParams` record per image) and then applied
(`AugPlus.apply`), so that it can also be applied to a second batch: the texture negatives get
their query's whole view (Ge et al. Sec. 3.3; the patch negatives are tiled from the query view
itself, `training.negatives`). The random numbers are drawn from the caller's generator in a fixed
order. From a training split of whole photos (`train_views: photo`) the crop is drawn in each photo's
proportions (`Augmenter.photo_draw`: RandomResizedCrop of the decoded photo, moco-non-sem-neg.py:247)
and resampled to the views' side; the texture image, a square as the authors' 224-px textures, gets
the same tries replayed on a square (`ViewParams.in_square`), as their re-seeded transform does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ..augment import Augmenter, Crop

GRAY = (0.299, 0.587, 0.114)  # ITU-R 601 luma, as torchvision's rgb_to_grayscale
RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
NO_JITTER = (1.0, 1.0, 1.0, 0.0)  # brightness, contrast, saturation factors and hue turns of "unchanged"


@dataclass(frozen=True)
class ViewParams:
    """The random parameters of one aug-plus view of each of B images (CPU tensors; of photos, the crop
    and its affine on their aspects' device), and its side."""

    crop: Crop  # the crop-and-flip draw (`Augmenter.draw`)
    theta: torch.Tensor  # (B, 2, 3) its affine in the sampled images' proportions (`Augmenter.theta`)
    jitter: torch.Tensor  # (B, 4) brightness, contrast, saturation factors, hue rotation in turns
    to_gray: torch.Tensor  # (B,) bool
    sigma: torch.Tensor  # (B,) blur sigma in pixels of the view, 0 = no blur
    size: int  # the views' side in pixels

    def in_square(self) -> ViewParams:
        """The same view of square images (the texture negatives'): the window the authors' re-seeded
        transform cuts from their 224-px texture (moco/loader.py `DuoImageNetFolder`: the same seed
        before q's and t's transforms), i.e. get_params' tries replayed on a square
        (`Crop.of_square`), at the query's place and flip."""
        return replace(self, theta=Augmenter.theta(self.crop.of_square()))


def _uniform(b: int, lo: float, hi: float, g: torch.Generator) -> torch.Tensor:
    return torch.empty(b).uniform_(lo, hi, generator=g)


def gray(x: torch.Tensor) -> torch.Tensor:
    """Luma (B, 1, H, W) of RGB images x (B, 3, H, W) in [0, 1]. The weights are Python numbers:
    a weight tensor made on the device each call is a host-to-device copy (a sync in CUDA's sync
    debug mode)."""
    return GRAY[0] * x[:, 0:1] + GRAY[1] * x[:, 1:2] + GRAY[2] * x[:, 2:3]


def sample_jitter(strength: tuple[float, float, float, float], apply: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """ColorJitter parameters (B, 4) where `apply` (B,) is True: brightness, contrast and saturation
    factors U(1-s, 1+s) and a hue rotation U(-h, h) in turns; `NO_JITTER` elsewhere."""
    b, (sb, sc, ss, sh) = len(apply), strength
    drawn = torch.stack(
        [
            _uniform(b, 1 - sb, 1 + sb, g),
            _uniform(b, 1 - sc, 1 + sc, g),
            _uniform(b, 1 - ss, 1 + ss, g),
            _uniform(b, -sh, sh, g),
        ],
        dim=1,
    )
    return torch.where(apply.view(b, 1), drawn, torch.tensor(NO_JITTER))


def color_jitter(x: torch.Tensor, jitter: torch.Tensor) -> torch.Tensor:
    """Brightness, contrast, saturation and hue (YIQ rotation) of images x (B, 3, H, W) in [0, 1]
    by the parameters `jitter` (B, 4) of `sample_jitter`."""
    b = len(x)
    f = jitter.to(x.device, non_blocking=True)
    brightness, contrast, saturation = (f[:, i].view(b, 1, 1, 1) for i in range(3))
    x = (x * brightness).clamp(0, 1)
    x = (contrast * x + (1 - contrast) * gray(x).mean((2, 3), keepdim=True)).clamp(0, 1)
    x = (saturation * x + (1 - saturation) * gray(x)).clamp(0, 1)
    angle = f[:, 3] * 2 * math.pi
    yiq = torch.einsum("ij,bjhw->bihw", RGB_TO_YIQ.to(x.device, non_blocking=True), x)
    cos, sin = torch.cos(angle).view(b, 1, 1), torch.sin(angle).view(b, 1, 1)
    i, q = yiq[:, 1], yiq[:, 2]
    yiq = torch.stack([yiq[:, 0], cos * i - sin * q, sin * i + cos * q], dim=1)
    return torch.einsum("ij,bjhw->bihw", torch.linalg.inv(RGB_TO_YIQ).to(x.device, non_blocking=True), yiq).clamp(0, 1)


def gaussian_blur(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Separable Gaussian blur of each image with its own sigma (B,) in pixels (0 = unchanged)."""
    b, c, h, w = x.shape
    radius = max(1, int(math.ceil(3 * float(sigma.max()))))
    t = torch.arange(-radius, radius + 1, device=x.device, dtype=x.dtype)
    s = sigma.to(x.device, x.dtype, non_blocking=True).clamp_min(1e-6).view(b, 1)
    k = torch.exp(-(t**2) / (2 * s**2))
    k = (k / k.sum(1, keepdim=True)).repeat_interleave(c, 0)  # (B*C, 2r+1)
    y = F.pad(x.reshape(1, b * c, h, w), (radius, radius, radius, radius), mode="reflect")
    y = F.conv2d(y, k.view(b * c, 1, 1, -1), groups=b * c)
    y = F.conv2d(y, k.view(b * c, 1, -1, 1), groups=b * c).view(b, c, h, w)
    return torch.where((sigma > 0).to(x.device, non_blocking=True).view(b, 1, 1, 1), y, x)


def unit(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) -> float (B, 3, H, W) in [0, 1]."""
    return images.permute(0, 3, 1, 2).float().div(255.0)


class AugPlus:
    """Two-view augmentation of MoCo-v2 / BYOL for uint8 batches (B, H, W, 3)."""

    def __init__(
        self,
        mean: list[float],
        std: list[float],
        crop_scale: tuple[float, float] = (0.2, 1.0),
        jitter: tuple[float, float, float, float] = (0.4, 0.4, 0.4, 0.1),
        p_jitter: float = 0.8,
        p_gray: float = 0.2,
        p_blur: float = 0.5,
        blur_sigma: tuple[float, float] = (0.1, 2.0),
    ):
        self.geometry = Augmenter(mean, std, crop_scale, hflip=True)
        self.mean, self.std = self.geometry.mean, self.geometry.std
        self.jitter, self.p_jitter, self.p_gray, self.p_blur, self.blur_sigma = (
            jitter,
            p_jitter,
            p_gray,
            p_blur,
            blur_sigma,
        )

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """[0, 1] images (B, 3, H, W) -> the network's normalised input, channels-last."""
        x = (x - self.mean.to(x.device, non_blocking=True)) / self.std.to(x.device, non_blocking=True)
        return x.contiguous(memory_format=torch.channels_last)

    def sample(self, b: int, size: int, g: torch.Generator, aspects: torch.Tensor | None = None) -> ViewParams:
        """One random view of side `size` of each of b images (photos of `aspects`, or squares): crop and
        flip, then jitter (p_jitter), grey-scale (p_gray), blur (p_blur), drawn in this order from g."""
        crop = self.geometry.draw(b, g, aspects)
        jitter = sample_jitter(self.jitter, torch.rand(b, generator=g) < self.p_jitter, g)
        to_gray = torch.rand(b, generator=g) < self.p_gray
        sigma = _uniform(b, *self.blur_sigma, g) * (size / 224)  # sigma U(0.1, 2.0) is in 224-px pixels
        sigma = torch.where(torch.rand(b, generator=g) < self.p_blur, sigma, torch.zeros(b))
        return ViewParams(crop, Augmenter.theta(crop, aspects), jitter, to_gray, sigma, size)

    def __call__(self, images: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        """One random aug-plus view per image: uint8 (B, H, W, 3) -> normalised (B, 3, H, W)."""
        return self.apply(images, self.sample(images.shape[0], images.shape[1], g))

    def apply(self, images: torch.Tensor, view: ViewParams) -> torch.Tensor:
        """The views `view` of uint8 images (B, H, W, 3): crop and flip to `view.size`, then `_colour`'s steps."""
        return self._colour(Augmenter.apply(unit(images), view.theta, view.size), view)

    def plain(self, images: torch.Tensor) -> torch.Tensor:
        """Normalised images without augmentation (the linear probe's features)."""
        return self.normalize(unit(images))

    def test_view(self, images: torch.Tensor, aspects: torch.Tensor, fraction: float, size: int) -> torch.Tensor:
        """Photos stored squashed (uint8 (B, S, S, 3), aspects W / H) in the test geometry: the centred
        square of `fraction` of each shorter side at `size` px (`Augmenter.centre`), normalised."""
        return self.normalize(Augmenter.apply(unit(images), Augmenter.centre(aspects, fraction), size))

    def _colour(self, x: torch.Tensor, view: ViewParams) -> torch.Tensor:
        """Jitter, grey-scale, blur and normalise [0, 1] images x (B, 3, H, W) by `view`."""
        x = color_jitter(x, view.jitter)
        x = torch.where(view.to_gray.to(x.device, non_blocking=True).view(-1, 1, 1, 1), gray(x).expand_as(x), x)
        return self.normalize(gaussian_blur(x, view.sigma))
