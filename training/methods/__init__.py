"""Registry of training methods. A new method is one module here plus one line below."""

from __future__ import annotations

from .base import Method
from .clad import CLAD, CLADPlus, CLADPlusTrivial, CLADTrivial
from .erm import ERM, Biased
from .hex import HEX
from .rebias import RUBi, LearnedMixinH, ReBias

METHODS: dict[str, type[Method]] = {
    "erm": ERM,
    "clad": CLAD,
    "clad_plus": CLADPlus,
    "clad_trivial": CLADTrivial,
    "clad_plus_trivial": CLADPlusTrivial,
    "vanilla": ERM,  # ReBias's Vanilla row: F alone
    "biased": Biased,
    "hex": HEX,
    "rebias": ReBias,
    "rubi": RUBi,
    "learned_mixin_h": LearnedMixinH,
}


def get_method(name: str) -> type[Method]:
    if name not in METHODS:
        raise KeyError(f"unknown method {name!r}; registered: {sorted(METHODS)}")
    return METHODS[name]
