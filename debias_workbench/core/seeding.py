"""Seeds derived from names, never from run order, so results do not depend on scheduling."""

from __future__ import annotations

import hashlib

import numpy as np


def name_seed(*parts: object) -> int:
    """A 63-bit seed from the joined string form of `parts` (stable across runs and machines)."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF


def name_rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(name_seed(*parts))
