"""Colored MNIST in the LfF protocol (Nam et al., NeurIPS 2020): the colour is on the digit's
strokes (Biased MNIST colours the background instead). Each image's colour is one of ten mean
colours plus N(0, sigma) noise per channel, multiplied into the grey digit; in training, a
fraction p of each class takes another class's colour (the bias-conflicting samples) and the
rest their own class's; in the test set colours are independent of the digit.

Counts are exact: per class with n samples, round(p * n) conflicting ones, spread evenly over the
other nine colours; which samples and which colours come from generators seeded by names.
"""

from __future__ import annotations

import numpy as np

from debias_workbench.core.seeding import name_rng

from .mnist import COLOURS

#: the ten mean colours in [0, 1]: Biased MNIST's palette (colour k is the bias of digit k)
MEAN_COLOURS = COLOURS.astype(np.float64) / 255.0


def conflicting_colours(labels: np.ndarray, ratio: float, name: str, num_colours: int = 10) -> np.ndarray:
    """Colour index per sample: per class y, round(ratio * n_y) samples (seeded choice) take the
    other colours in turn (counts over the other colours differ by at most one), the rest colour y."""
    colours = labels.astype(np.int64).copy()
    for y in np.unique(labels):
        rng = name_rng("colored_mnist_conflicts", name, int(y))
        members = rng.permutation(np.flatnonzero(labels == y))
        n_conflict = int(round(ratio * len(members)))
        others = rng.permutation([c for c in range(num_colours) if c != y])
        colours[members[:n_conflict]] = others[np.arange(n_conflict) % len(others)]
    return colours


def independent_colours(n: int, name: str, num_colours: int = 10) -> np.ndarray:
    """The test set's colours: each colour n / 10 times (to within one), in a seeded order."""
    return name_rng("colored_mnist_test", name).permutation(np.arange(n) % num_colours)


def colour_strokes(images: np.ndarray, colour_index: np.ndarray, sigma: float, name: str) -> np.ndarray:
    """(N, H, W) grey digits -> (N, H, W, 3) uint8: clip(mean colour + N(0, sigma), 0, 1) x the
    grey level, one noise draw per image and channel (seeded by `name`); the background stays black."""
    rng = name_rng("colored_mnist_noise", name)
    colour = np.clip(MEAN_COLOURS[colour_index] + rng.normal(0.0, sigma, (len(colour_index), 3)), 0.0, 1.0)
    rgb = images.astype(np.float64)[..., None] * colour[:, None, None, :]
    return np.rint(rgb).astype(np.uint8)
