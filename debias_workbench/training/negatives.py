"""Patch-based non-semantic negatives (Ge et al., NeurIPS 2021, Sec. 2.3).

"Given an image and a patch size d, we sample patches of size d from ceil(224/d)^2
non-overlapping random locations that lie entirely in the image. The patches are then tiled
and cropped into 224x224." d ~ U(16, 72) at 224 px, drawn anew every time a sample is used.

Here the source is the stored image (S x S), the same size as the training crop, so it holds
only floor(S/d)^2 non-overlapping d x d cells, fewer than the ceil(S/d)^2 the tiling needs
unless d divides S. Our rule: lay a non-overlapping grid of d x d cells at a random offset
inside the image, draw cells without replacement in random order, and once every cell is used
start another random pass over the same cells (so no two distinct patches ever overlap, and a
cell repeats only after all cells were used). The tiling is cropped at its top-left corner.
The authors' code instead takes overlapping patches from the augmented, normalised query view:
theirs come from the query's crop (scale 0.2-1), so at one d they hold less of the image than
ours (about 1.2x less per side against the photo); ours get the query view's flip and colours
(`AugPlus.patch_view`) but not its crop.
"""

from __future__ import annotations

import math

import torch

#: d ~ U(16, 72) at 224 px (paper Sec. 3.1), scaled linearly with the image side
PAPER_PATCH_RANGE = (16, 72)
PAPER_IMAGE_SIZE = 224


def patch_size_range(image_size: int) -> tuple[int, int]:
    """(d_min, d_max) of U(16, 72) scaled from 224 px to `image_size` (at least 2 px, at most the image)."""
    lo, hi = (max(2, round(v * image_size / PAPER_IMAGE_SIZE)) for v in PAPER_PATCH_RANGE)
    return min(lo, image_size), min(hi, image_size)


def cell_order(n_cells: int, n_needed: int, generator: torch.Generator) -> torch.Tensor:
    """`n_needed` cell indices: random passes without replacement over range(n_cells)."""
    passes = math.ceil(n_needed / n_cells)
    return torch.cat([torch.randperm(n_cells, generator=generator) for _ in range(passes)])[:n_needed]


def draw_tiling(s: int, d: int, generator: torch.Generator) -> tuple[tuple[int, int], torch.Tensor]:
    """The random numbers of one patch tiling of an S x S image with patch side d: the grid's offset
    (y, x) and the cell of each of the ceil(S/d)^2 tiles (`cell_order`), in that order from `generator`."""
    per_side, tiles = s // d, math.ceil(s / d)
    oy, ox = (int(torch.randint(0, s - per_side * d + 1, (1,), generator=generator)) for _ in range(2))
    return (oy, ox), cell_order(per_side ** 2, tiles ** 2, generator)


def patch_negative(image: torch.Tensor, d: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """One patch negative of image (S, S, C) with patch side d.

    Returns (negative (S, S, C), sources (ceil(S/d)^2, 2)): the top-left pixel (y, x) in `image`
    of each tile's patch, in row-major tile order (for tests and figures).
    """
    s = image.shape[0]
    per_side, tiles = s // d, math.ceil(s / d)                     # cells per grid side, tiles per side
    (oy, ox), chosen = draw_tiling(s, d, generator)
    grid = image[oy:oy + per_side * d, ox:ox + per_side * d]       # (n d, n d, C)
    cells = grid.reshape(per_side, d, per_side, d, -1).permute(0, 2, 1, 3, 4).reshape(per_side ** 2, d, d, -1)
    chosen = chosen.to(image.device)
    tiled = cells[chosen].reshape(tiles, tiles, d, d, -1).permute(0, 2, 1, 3, 4).reshape(tiles * d, tiles * d, -1)
    sources = torch.stack([oy + chosen.cpu() // per_side * d, ox + chosen.cpu() % per_side * d], dim=1)
    return tiled[:s, :s], sources


def patch_negatives(images: torch.Tensor, generator: torch.Generator,
                    d_range: tuple[int, int] | None = None) -> torch.Tensor:
    """Patch negatives of a batch of images (B, S, S, C) of any dtype, each with its own
    d ~ U(d_range) (default: the paper's range scaled to S); same shape and dtype out."""
    lo, hi = d_range or patch_size_range(images.shape[1])
    sizes = torch.randint(lo, hi + 1, (len(images),), generator=generator).tolist()
    return torch.stack([patch_negative(img, d, generator)[0] for img, d in zip(images, sizes)])


def patch_tilings(b: int, size: int, generator: torch.Generator, d_range: tuple[int, int] | None = None,
                  device: torch.device | str = "cpu") -> torch.Tensor:
    """(B, S, S) int64 on `device`: for each of b images of side S, the source pixel (y S + x) of
    every pixel of its patch negative, drawn as `patch_negatives` draws it (the same random numbers):
    the tiling as a gather map, so one draw can be applied to several views of an image. The draws
    (each image's d, grid offset and cell order: a few hundred numbers) are made on the CPU and
    the map is computed on `device`, so no (B, S, S) map crosses to a GPU each step."""
    lo, hi = d_range or patch_size_range(size)
    sizes = torch.randint(lo, hi + 1, (b,), generator=generator).tolist()
    max_tiles = math.ceil(size / lo) ** 2
    d, offset = torch.tensor(sizes), torch.zeros(b, 2, dtype=torch.long)
    chosen = torch.zeros(b, max_tiles, dtype=torch.long)
    for k, dk in enumerate(sizes):                                            # the draws of `patch_negative`
        (oy, ox), cells = draw_tiling(size, dk, generator)
        offset[k] = torch.tensor([oy, ox])
        chosen[k, :len(cells)] = cells
    return _tiling_map(*(t.to(device, non_blocking=True) for t in (d, offset, chosen)), size)


def _tiling_map(d: torch.Tensor, offset: torch.Tensor, chosen: torch.Tensor, size: int) -> torch.Tensor:
    """(B, S, S) source pixels of the tilings with patch sides d (B,), grid offsets (B, 2) (y, x)
    and cell orders chosen (B, T) (row-major tiles, cells row-major in the grid)."""
    d = d.view(-1, 1, 1)
    per_side, tiles = size // d, -(-size // d)                                 # (B, 1, 1) each
    i = torch.arange(size, device=d.device)
    ty, tx = i.view(1, -1, 1) // d, i.view(1, 1, -1) // d                      # the pixel's tile
    cell = chosen.gather(1, (ty * tiles + tx).flatten(1)).view(-1, size, size)  # (B, S, S) its cell
    y = offset[:, 0].view(-1, 1, 1) + cell // per_side * d + i.view(1, -1, 1) % d
    x = offset[:, 1].view(-1, 1, 1) + cell % per_side * d + i.view(1, 1, -1) % d
    return y * size + x
