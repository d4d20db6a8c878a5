"""Registry of training methods and of the prerequisite artifacts they can need. A new method is one
module here (its class, and its `method_args` and cost declared in `<module>.yaml` beside it) plus one
line below; a new kind of prerequisite (`training.prerequisite_kind`) likewise.

The registry is read without importing torch: the config check and the Snakefile only need
names and declarations (`spec()`); `METHODS[name]` imports the class when it is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debias_workbench.core.registry import LazyRegistry

from ..prerequisite_kind import PrerequisiteKind
from .committee_artifact import COMMITTEE
from .spec import MethodSpec, class_spec

if TYPE_CHECKING:
    from .base import Method

#: name -> "module.Class" under training/methods
REGISTRY: dict[str, str] = {
    "erm": "erm.ERM",
    "clad": "clad.CLAD",
    "clad_plus": "clad.CLADPlus",
    "clad_trivial": "clad.CLADTrivial",
    "clad_plus_trivial": "clad.CLADPlusTrivial",
    "s_clad": "clad.SCLAD",
    "s_clad_plus": "clad.SCLADPlus",
    "vanilla": "erm.ERM",  # ReBias's Vanilla row: F alone
    "biased": "erm.Biased",
    "hex": "hex.HEX",
    "rebias": "rebias.ReBias",
    "rubi": "rebias.RUBi",
    "learned_mixin_h": "rebias.LearnedMixinH",
    "moco_v2": "ssl.MoCoV2",
    "moco_v2_texture": "ssl.MoCoV2Texture",
    "byol": "ssl.BYOL",
    "lff": "bias_amplification.LfF",
    "lff_be": "bias_amplification.LfFBiasEnsemble",
    "intrinsic_feature_enhancement": "bias_amplification.IntrinsicFeatureEnhancement",
}

#: name -> the prerequisite artifacts a method's declaration can name (`MethodSpec.prerequisites`)
PREREQUISITES: dict[str, PrerequisiteKind] = {kind.name: kind for kind in (COMMITTEE,)}

METHODS: LazyRegistry[type[Method]] = LazyRegistry(__name__, REGISTRY)


def spec(name: str) -> MethodSpec:
    """The declaration of method `name` (its args, aligned variants and cost), without torch."""
    return class_spec(*METHODS.locate(name)).registered_as(name)


def get_method(name: str) -> type[Method]:
    if name not in REGISTRY:
        raise KeyError(f"unknown method {name!r}; registered: {sorted(REGISTRY)}")
    return METHODS[name]
