"""Patch-based non-semantic negatives (Ge et al., NeurIPS 2021, Sec. 2.3), cut from the query view.

"Given an image and a patch size d, we sample patches of size d from ceil(224/d)^2
non-overlapping random locations that lie entirely in the image. The patches are then tiled
and cropped into 224x224." d ~ U(16, 72) at 224 px (Sec. 3.1), drawn anew every time a sample
is used. The image is the augmented query view, as in the authors' loader (`moco/loader.py`
`ImageNetFolder.__getitem__`: `t = nonsem_transform(q)` with `q` the normalised aug-plus view,
its RandomResizedCrop (0.2-1), jitter, grey-scale, blur and flip included; nothing is applied
after the tiling): so the negative's colours are its query's (Sec. 3.3) and the seams stay sharp.

An S x S view holds only floor(S/d)^2 non-overlapping d x d cells, fewer than the ceil(S/d)^2
tiles unless d divides S. Our rule (the paper's "non-overlapping", where the authors'
`NonSemanticAug` draws (224 // d + 1)^2 independent, possibly overlapping positions): lay a
non-overlapping grid of d x d cells at a random offset inside the view, draw cells without
replacement in random order, and once every cell is used start another random pass over the
same cells (no two distinct patches overlap; a cell repeats only after all were used). The
tiling is cropped at its top-left corner, as theirs (`img_reorder[:, :224, :224]`).

The draws of a batch (`draw_tilings`) are a few vectorised CPU calls; the tiling is applied on
the views' device as one gather (`tiling_map`, `tile`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

#: d ~ U(16, 72) at 224 px (paper Sec. 3.1), scaled linearly with the image side
PAPER_PATCH_RANGE = (16, 72)
PAPER_IMAGE_SIZE = 224


def patch_size_range(image_size: int) -> tuple[int, int]:
    """(d_min, d_max) of U(16, 72) scaled from 224 px to `image_size` (at least 2 px, at most the image)."""
    lo, hi = (max(2, round(v * image_size / PAPER_IMAGE_SIZE)) for v in PAPER_PATCH_RANGE)
    return min(lo, image_size), min(hi, image_size)


@dataclass(frozen=True)
class Tilings:
    """The random draws of B patch tilings of S x S views (CPU tensors)."""

    size: int  # S
    d: torch.Tensor  # (B,) patch side
    offset: torch.Tensor  # (B, 2) (y, x) of the cell grid's top-left corner
    cells: torch.Tensor  # (B, T) the grid cell of each tile (row-major tiles and cells); an image
    #                        uses its first ceil(S/d)^2, T is that count at the batch's smallest d

    def sources(self) -> torch.Tensor:
        """(B, T, 2) the top-left pixel (y, x) in the view of each tile's patch."""
        per_side, d = (self.size // self.d).view(-1, 1), self.d.view(-1, 1)
        return torch.stack(
            [self.offset[:, :1] + self.cells // per_side * d, self.offset[:, 1:] + self.cells % per_side * d], dim=2
        )


def draw_tilings(b: int, size: int, generator: torch.Generator, d_range: tuple[int, int] | None = None) -> Tilings:
    """b tilings of S x S views, each with its own d ~ U(d_range) (default: the paper's range
    scaled to S), grid offset and cell order (random passes without replacement over its
    floor(S/d)^2 cells, as argsorts of uniform keys), drawn from `generator` in that order."""
    lo, hi = d_range or patch_size_range(size)
    d = torch.randint(lo, hi + 1, (b,), generator=generator)  # (B,)
    per_side, tiles = size // d, -(-size // d)  # (B,) each
    n_cells, n_tiles = per_side**2, tiles**2
    free = size - per_side * d  # (B,) pixels beside the grid
    offset = (torch.rand(b, 2, generator=generator) * (free + 1).view(b, 1)).long()  # (B, 2) in 0..free
    passes = int((-(-n_tiles // n_cells)).max())
    keys = torch.rand(b, passes, (size // lo) ** 2, generator=generator)  # (B, P, C_max)
    keys = keys.masked_fill(torch.arange(keys.shape[2]) >= n_cells.view(b, 1, 1), 2.0)  # unused cells sort last
    orders = keys.argsort(dim=2)  # (B, P, C_max) one order per pass
    j = torch.arange(math.ceil(size / lo) ** 2).view(1, -1)  # (1, T) tile index
    which_pass = (j // n_cells.view(b, 1)).clamp(max=passes - 1)  # (B, T)
    cells = orders[torch.arange(b).view(b, 1), which_pass, j % n_cells.view(b, 1)]
    return Tilings(size, d, offset, cells)


def tiling_map(tilings: Tilings, device: torch.device | str = "cpu") -> torch.Tensor:
    """(B, S, S) int64 on `device`: the source pixel (y S + x) in its view of every pixel of each
    patch negative. Only the draws (a few hundred numbers per image) cross to the device; the
    per-pixel work is one gather and two additions (no integer division per pixel)."""
    size = tilings.size
    on_device = Tilings(size, *(t.to(device, non_blocking=True) for t in (tilings.d, tilings.offset, tilings.cells)))
    start = on_device.sources()  # (B, T, 2)
    origin = start[..., 0] * size + start[..., 1]  # (B, T) tiles' top-left sources
    d = on_device.d.view(-1, 1)  # (B, 1)
    i = torch.arange(size, device=d.device).view(1, -1)  # (1, S)
    tile_of, within = i // d, i % d  # (B, S) a row's tile, place in it
    tile_index = (tile_of * -(-size // d)).unsqueeze(2) + tile_of.unsqueeze(1)  # (B, S, S) row-major tile
    return (
        origin.gather(1, tile_index.flatten(1)).view(-1, size, size)
        + (within * size).unsqueeze(2)
        + within.unsqueeze(1)
    )


def tile(views: torch.Tensor, tiling: torch.Tensor) -> torch.Tensor:
    """views (B, C, S, S), any dtype, with each pixel replaced by its source pixel in `tiling`
    (B, S, S) (`tiling_map`): one gather over the channels-last pixels; channels-last out."""
    b, c, h, w = views.shape
    pixels = views.permute(0, 2, 3, 1).reshape(b, h * w, c)  # (B, HW, C): a view if channels-last
    index = tiling.to(views.device, non_blocking=True).view(b, h * w, 1).expand(b, h * w, c)
    return pixels.gather(1, index).view(b, h, w, c).permute(0, 3, 1, 2)  # (B, C, S, S)


def patch_negatives(
    views: torch.Tensor, generator: torch.Generator, d_range: tuple[int, int] | None = None
) -> torch.Tensor:
    """The patch negative (B, C, S, S) of each query view (B, C, S, S): a fresh tiling per view
    (`draw_tilings` from `generator`), cut from the view itself."""
    tilings = draw_tilings(len(views), views.shape[-1], generator, d_range)
    return tile(views, tiling_map(tilings, views.device))
