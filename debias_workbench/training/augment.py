"""Batched augmentation on the images' device: RandomCrop with padding, RandomResizedCrop (of square
images, or of photos stored squashed in their own proportions), horizontal flip and normalisation,
each a few tensor operations and one `grid_sample` call for the whole batch (`Augmenter`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

#: torchvision's RandomResizedCrop.get_params: draws of a window before its central fallback
CROP_TRIES = 10


@dataclass(frozen=True)
class Crop:
    """One RandomResizedCrop draw per image (on the CPU; of photos, on their aspects' device): the
    window's share of the image's area and its ratio width / height in the image's own pixels (the
    photo's, for a photo stored squashed), its place (B, 2) in [0, 1] (x, y; 0 at the left / top
    edge) and the flip (-1: mirrored). A draw of photos also keeps, as `square`, the (area, ratio,
    place) the same random numbers give a square image (`Augmenter.photo_draw`)."""

    area: torch.Tensor
    ratio: torch.Tensor
    place: torch.Tensor
    flip: torch.Tensor
    square: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def of_square(self) -> Crop:
        """The crop that the same random numbers cut from a square image: torchvision's get_params
        replayed on it (the first of the same tries that fits the square, placed uniformly even where
        the photo fell back to its central window, `photo_draw`), with the same flip; the crop itself
        where it was drawn for squares."""
        if self.square is None:
            return self
        return Crop(*self.square, self.flip)


def _first_fitting(
    area: torch.Tensor, r: torch.Tensor, a: torch.Tensor, ratio: tuple[float, float]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """get_params' choice among the tries (area shares and ratios, (B, CROP_TRIES)) in images of
    aspects a (B, 1): (area, ratio, found), each (B,), of the first try whose window fits (width share
    sqrt(s r / a) <= 1, height share sqrt(s a / r) <= 1); where none does, the central window of the
    image's own ratio clamped to `ratio`."""
    fits = (area * r <= a) & (area * a <= r)
    first = fits.int().argmax(1, keepdim=True)  # the first fitting try (0: none fits)
    found = fits.any(1)
    a = a.squeeze(1)
    clamped = a.clamp(*ratio)  # the fallback: the image's ratio, clamped
    return (
        torch.where(found, area.gather(1, first).squeeze(1), torch.minimum(a / clamped, clamped / a)),
        torch.where(found, r.gather(1, first).squeeze(1), clamped),
        found,
    )


class Augmenter:
    """Batched padded RandomCrop + RandomResizedCrop + horizontal flip + normalisation, on
    whatever device the images are on (one indexing and one `grid_sample` call for the whole
    batch). Parameters drawn on the CPU go to the device with `non_blocking`: a copy from
    pageable host memory is staged at once, and a blocking one would make the CPU wait for the
    GPU's queue every step. Given each image's aspect (`aspects`, width / height: a photo stored
    squashed, `train_views: photo`) the crops are drawn in the photo's proportions (`draw`) and
    resampled to `size`."""

    def __init__(
        self,
        mean: list[float],
        std: list[float],
        crop_scale: tuple[float, float] = (1.0, 1.0),
        hflip: bool = False,
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        padding: int = 0,
    ):
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)
        self.crop_scale, self.hflip, self.ratio, self.padding = crop_scale, hflip, ratio, padding

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) -> normalised float (B, 3, H, W)."""
        x = images.permute(0, 3, 1, 2).float().div_(255.0)
        return (x - self.mean.to(x.device, non_blocking=True)) / self.std.to(x.device, non_blocking=True)

    def __call__(
        self,
        images: torch.Tensor,
        generator: torch.Generator,
        aspects: torch.Tensor | None = None,
        size: int | None = None,
    ) -> torch.Tensor:
        """One random view of each image, `size` px (default: the images' side)."""
        shifted = self.shift(images, self.sample_shift(images.shape[0], generator))
        return self.apply(self.normalize(shifted), self.sample(images.shape[0], generator, aspects), size)

    def sample_shift(self, b: int, generator: torch.Generator) -> torch.Tensor:
        """(b, 2) offsets (row, column) of torchvision's RandomCrop(size, padding=p): the window's
        corner in the padded image, uniform over 0 .. 2p each (`torch.randint(0, h - th + 1)`); all
        zero, and nothing drawn, without padding."""
        if self.padding == 0:
            return torch.zeros(b, 2, dtype=torch.long)
        return torch.randint(0, 2 * self.padding + 1, (b, 2), generator=generator)

    def shift(self, images: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        """uint8 (B, H, W, 3) images padded with `padding` black pixels on every side and cut to
        H x W at `offsets` (B, 2): RandomCrop(size, padding) before ToTensor, as BiasEnsemble's
        training transform (data/util.py:205-209, 227-231), black being 0 before normalisation.
        Unchanged without padding."""
        p = self.padding
        if p == 0:
            return images
        b, h, w = images.shape[:3]
        offsets = offsets.to(images.device, non_blocking=True)
        padded = F.pad(images, (0, 0, p, p, p, p))  # (B, H + 2p, W + 2p, 3)
        rows = offsets[:, :1] + torch.arange(h, device=images.device)  # (B, H)
        cols = offsets[:, 1:] + torch.arange(w, device=images.device)  # (B, W)
        return padded[torch.arange(b, device=images.device)[:, None, None], rows[:, :, None], cols[:, None, :]]

    def sample(self, b: int, generator: torch.Generator, aspects: torch.Tensor | None = None) -> torch.Tensor:
        """(b, 2, 3) affine crop-and-flip parameters, one random view per image (`draw`, `theta`)."""
        return self.theta(self.draw(b, generator, aspects), aspects)

    def draw(self, b: int, generator: torch.Generator, aspects: torch.Tensor | None = None) -> Crop:
        """A crop of each of b images. Of square images (`aspects` None): one draw of the area share s
        ~ U(crop_scale) and the ratio r (log-uniform), the window clamped to the image in `theta` (no
        crop requested means no ratio jitter either). Of photos of aspects a (B,): `photo_draw`."""
        if aspects is not None:
            return self.photo_draw(b, generator, aspects.float())
        area = torch.empty(b).uniform_(*self.crop_scale, generator=generator)
        log_r = torch.empty(b).uniform_(math.log(self.ratio[0]), math.log(self.ratio[1]), generator=generator)
        r = torch.exp(log_r) if tuple(self.crop_scale) != (1.0, 1.0) else torch.ones(b)
        place = torch.stack([torch.rand(b, generator=generator), torch.rand(b, generator=generator)], dim=1)
        return Crop(area, r, place, self._flip(b, generator))

    def photo_draw(self, b: int, generator: torch.Generator, a: torch.Tensor) -> Crop:
        """torchvision's RandomResizedCrop.get_params on photos of aspects a = W / H (B,), batched: for
        each image `CROP_TRIES` draws of s ~ U(crop_scale) and r ~ log-U(ratio), in photo pixels; the
        first whose window fits the photo (width share sqrt(s r / a) <= 1, height share sqrt(s a / r)
        <= 1) is kept, placed uniformly; with none, the central window of the photo's ratio clamped
        to `ratio`. Where it differs: the window and its place are continuous (get_params rounds to
        whole pixels), every image draws all its tries at once (the same distribution: the first
        fitting of 10 independent draws), and the view is resampled bilinearly from the photo
        squashed to the stored square (`apply`) where the authors' PIL resizes the decoded photo.
        The numbers are drawn on the CPU and sent to a's device (non_blocking), where the window is
        chosen: nothing is read back."""

        def sent(drawn: torch.Tensor) -> torch.Tensor:
            return drawn.to(a.device, non_blocking=True)

        area = sent(torch.empty(b, CROP_TRIES).uniform_(*self.crop_scale, generator=generator))
        log_r = torch.empty(b, CROP_TRIES).uniform_(
            math.log(self.ratio[0]), math.log(self.ratio[1]), generator=generator
        )
        r, col = torch.exp(sent(log_r)), a.view(b, 1)
        photo_area, photo_r, found = _first_fitting(area, r, col, self.ratio)
        square_area, square_r, _ = _first_fitting(area, r, torch.ones_like(col), self.ratio)
        uniform = sent(torch.rand(b, 2, generator=generator))
        place = torch.where(found.view(b, 1), uniform, 0.5)  # a fallback window is central
        return Crop(photo_area, photo_r, place, sent(self._flip(b, generator)), (square_area, square_r, uniform))

    def _flip(self, b: int, generator: torch.Generator) -> torch.Tensor:
        """-1 (mirrored) with p = 0.5 where `hflip`; nothing drawn without it."""
        return torch.where(torch.rand(b, generator=generator) < 0.5, -1.0, 1.0) if self.hflip else torch.ones(b)

    @staticmethod
    def theta(crop: Crop, aspects: torch.Tensor | None = None) -> torch.Tensor:
        """(B, 2, 3) affines of `crop` in images of `aspects` (None: squares; a photo stored squashed:
        its W / H): the window's width share sqrt(s r / a) and height share sqrt(s a / r), each at
        most 1, placed at `crop.place` and flipped; on the crop's device."""
        a = torch.ones_like(crop.area) if aspects is None else aspects.float()
        sx = torch.sqrt(crop.area * crop.ratio / a).clamp(max=1.0)
        sy = torch.sqrt(crop.area * a / crop.ratio).clamp(max=1.0)
        return Augmenter._affine(
            sx * crop.flip, sy, (crop.place[:, 0] * 2 - 1) * (1 - sx), (crop.place[:, 1] * 2 - 1) * (1 - sy)
        )

    @staticmethod
    def centre(aspects: torch.Tensor, fraction: float) -> torch.Tensor:
        """(B, 2, 3) affines of the test view of photos stored squashed (aspects W / H): the centred
        square of `fraction` of the shorter side (Resize + CenterCrop, the stored test images' geometry)."""
        a = aspects.float()
        zero = torch.zeros_like(a)
        return Augmenter._affine(fraction * (1 / a).clamp(max=1.0), fraction * a.clamp(max=1.0), zero, zero)

    @staticmethod
    def _affine(sx: torch.Tensor, sy: torch.Tensor, cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
        theta = torch.zeros(len(sx), 2, 3, device=sx.device)
        theta[:, 0, 0], theta[:, 0, 2] = sx, cx
        theta[:, 1, 1], theta[:, 1, 2] = sy, cy
        return theta

    @staticmethod
    def apply(x: torch.Tensor, theta: torch.Tensor, size: int | None = None) -> torch.Tensor:
        """The views `theta` (B, 2, 3) of normalised images x (B, 3, H, W), `size` px (default H)."""
        out = list(x.shape) if size is None else [*x.shape[:2], size, size]
        grid = F.affine_grid(theta.to(x.device, non_blocking=True), out, align_corners=False)
        views = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
        # channels-last input makes the networks' convolutions, pooling and batch norm run in NHWC:
        # faster training steps for small_cnn on one CPU thread (docs/measurements.md#pilots-on-a-2-core-avx2-machine),
        # and the layout tensor cores want; `normalize`'s output already has it (a permuted NHWC batch)
        return views.contiguous(memory_format=torch.channels_last)
