"""What each method declares beside its class, readable without torch: its `method_args`
(JSON-schema types, ranges, defaults, descriptions; `x-within-run: iterations | epochs` on an
argument that switches something on at that point of the run, which the config check and the
trainer keep inside the run; `x-before-run: epochs` on one that counts epochs of training before
the run's own, `training.run_length`; `x-smoke: {at_most: N} | {value: V}` on one that counts
steps, epochs or members, its value in smoke mode, `workflow.smoke`; `x-identity-when-set: true` on one added
after runs existed whose default keeps their behaviour, left out of a run's identity at that default,
`MethodSpec.identity_defaults`), the variants it reads
row-aligned with its training images and the `revision` of its code (raised with a fix that moves
its results), whether it cuts its training views from whole photos (`photo_views`: a split of
`train_views: photo`), how its training step is costed (`cost`, required: the workflow's cost
model, `workflow.cost`, reads it) and the rules its code fixes (`code_rules`, which the paper
configs' protocols name) and what it needs of a dataset family beyond images and labels (`needs`,
with its aligned variants: `requires`, which `training.applicability` holds against what each family
offers); for the methods x benchmarks table (`papers.matrix`), its training `regime` (supervised or
self-supervised), whether its runs are their regime's `reference` (ERM), the arguments that are its
`treatment` (their defaults, on `baseline_method`, give its like-for-like baseline: plain MoCo-v2 for
MoCo-v2 + patch negatives), what its design is `given` about the bias, and `x-given: {value: what}` on an
argument whose value gives it something more (a committee vote on the val split), and `x-needs: {value:
capability}` on an argument whose value needs one more of the family (`requires_for`), and the
`prerequisites` it needs built before its run (BiasEnsemble's committee). The declaration of
`<module>.py`'s classes is `<module>.yaml` next to
it, one entry per class; the config check validates every experiment's `method_args` against it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

#: the model-selection rules a method's paper can declare (`MethodSpec.selection`), applied by
#: `report.model_selection`: the last iterate, the best validation point, the best test point
SELECTION_RULES = ("last", "validation", "oracle")
LAST, VALIDATION, ORACLE = SELECTION_RULES
#: the workbench's annotations of an argument (not JSON schema: left out of `MethodSpec.schema`)
ANNOTATIONS = ("x-within-run", "x-before-run", "x-smoke", "x-given", "x-needs", "x-identity-when-set")
#: the training regimes a method declares (`MethodSpec.regime`)
REGIMES = ("supervised", "self-supervised")


@dataclass(frozen=True)
class MethodSpec:
    #: {arg: JSON-schema of its value, with `default` and `description`}
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {batch field: variant} read row by row alongside the training images (CLAD's ONLY_BG_T)
    aligned_variants: dict[str, str] = field(default_factory=dict)
    #: the revision of the method's code: raised with a change that moves its runs' results (a fix),
    #: so that the runs made before it are made again (`workflow.slices.run_config`); 0 enters no identity
    revision: int = 0
    #: whether it cuts its training views from whole photos (a split of `train_views: photo`,
    #: `training.data.PhotoSplit`): the self-supervised methods; a method that crops the stored square is refused one
    photo_views: bool = False
    #: how a step is costed (`workflow.cost.method_cost`): `row`, the measured row of the device check
    #: (workflow/step_times.yaml) it is costed by; `reason`, why that row stands in (absent: the row measured
    #: this method); `when: {arg: {value: entry}}`, another entry for an argument's value; `trains` /
    #: `pretrains`, the config keys naming the networks a step trains (default: `training.arch`) / that train
    #: before the run's own steps (`x-before-run`), looked up in `method_args`, then `training`; the work beside the
    #: steps, whatever row they take: `probe: {epochs: <arg>, augment: <arg>}`, a linear probe's passes over the
    #: training images (`epochs` of them with `augment`, else one). A prerequisite (`prerequisites`) is a job of its
    #: own (costed by `workflow.cost.prerequisite_seconds`), not part of its runs' cost
    cost: dict[str, Any] = field(default_factory=dict)
    #: {registered name: cost} where the class is registered under another name costed apart (ReBias's Vanilla)
    cost_as: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {rule: value}: rules fixed in the method's code that no setting chooses and that can move a paper's numbers,
    #: which a paper config's protocol names as `code:<rule>` (`workflow.protocol.code_rules`)
    code_rules: dict[str, Any] = field(default_factory=dict)
    #: capabilities it needs of a dataset family besides its `aligned_variants` (each family's `offers` names
    #: those it has): `biased_network`, a network biased by design towards the family's bias (ReBias's G)
    needs: tuple[str, ...] = ()
    #: how it trains its network: "supervised" or "self-supervised" (a linear probe on a label-free backbone)
    regime: str = REGIMES[0]
    #: its runs are their regime's reference, what the other methods of the regime are compared with (ERM)
    reference: bool = False
    #: the arguments whose non-default values are what it adds (Ge et al.'s negatives: `negative`, `alpha`); its
    #: rows with all of them at default, of `baseline_method`, are its baseline; none: the method as a whole is
    #: the treatment, compared with its regime's `reference`
    treatment: tuple[str, ...] = ()
    #: the registered method whose rows with the `treatment` at default are its baseline (None: itself)
    baseline_method: str | None = None
    #: what its design is given about the bias beyond the family's `offers` (HEX's texture extractor); empty: nothing
    given: str = ""
    #: its paper's model-selection rule, {rule: one of `report.model_selection.RULES`, source: where the paper or its
    #: code says so}: the methods x benchmarks table's second table scores each run by it; absent: the last iterate
    selection: dict[str, str] = field(default_factory=dict)
    #: the prerequisite artifacts it needs before its run trains (kinds of `training.methods.PREREQUISITES`:
    #: BiasEnsemble's committee), each built by a job of its own and shared by the runs that need the same one
    #: (`training.prerequisites`)
    prerequisites: tuple[str, ...] = ()

    @property
    def paper_rule(self) -> str:
        """Its paper's model-selection rule (`selection`), "last" where it declares none."""
        rule = self.selection.get("rule", LAST)
        if rule not in SELECTION_RULES:
            raise ValueError(f"selection rule {rule!r} is none of {SELECTION_RULES}")
        return rule

    @property
    def requires(self) -> tuple[str, ...]:
        """Every capability it needs of a family: its `needs`, then each variant it reads row-aligned with its
        training images (named by the variant: CLAD's `only_bg_t`), which the family must build that way."""
        return tuple(dict.fromkeys([*self.needs, *self.aligned_variants.values()]))

    def requires_for(self, method_args: dict[str, Any]) -> tuple[str, ...]:
        """`requires`, and each capability its `method_args` need at their values (their arguments' `x-needs`)."""
        return tuple(dict.fromkeys([*self.requires, *self._annotated("x-needs", method_args)]))

    def given_by(self, method_args: dict[str, Any]) -> list[str]:
        """What its `method_args` give it beyond images and labels (its arguments' `x-given` at their values)."""
        return self._annotated("x-given", method_args)

    def _annotated(self, annotation: str, method_args: dict[str, Any]) -> list[str]:
        """`annotation`'s entry ({value: what}) for each argument that has one at its value in `method_args`
        (else its default)."""
        values = {**self.defaults, **method_args}
        return [
            arg[annotation][values[name]]
            for name, arg in self.args.items()
            if annotation in arg and values.get(name) in arg[annotation]
        ]

    def registered_as(self, name: str) -> MethodSpec:
        """The spec of the class as registered under `name` (its `cost_as` entry, if any, as its cost)."""
        return replace(self, cost=self.cost_as[name]) if name in self.cost_as else self

    @property
    def defaults(self) -> dict[str, Any]:
        return {name: arg["default"] for name, arg in self.args.items()}

    @property
    def identity_defaults(self) -> dict[str, Any]:
        """`defaults` as a run's identity holds them (`workflow.slices.run_config`): without the arguments declared
        `x-identity-when-set`, whose default does what the code did before they existed, so that the runs that
        leave them unset keep their identity."""
        return {name: arg["default"] for name, arg in self.args.items() if not arg.get("x-identity-when-set")}

    @property
    def within_run(self) -> dict[str, str]:
        """{arg: "iterations" | "epochs"}: the args that name a point of the run (Park et al.'s T1, T2)."""
        return {name: arg["x-within-run"] for name, arg in self.args.items() if "x-within-run" in arg}

    def smoke_value(self, name: str, configured: Any) -> Any:
        """Argument `name`'s value in smoke mode (`x-smoke`: `at_most` N caps the configured value, `value` replaces
        it); the configured value for an argument without one."""
        rule = self.args[name].get("x-smoke")
        if rule is None:
            return configured
        return min(configured, rule["at_most"]) if "at_most" in rule else rule["value"]

    @property
    def smoke_counts(self) -> list[str]:
        """The arguments smoke mode sets (those declared `x-smoke`)."""
        return [name for name, arg in self.args.items() if "x-smoke" in arg]

    def probe_passes(self, method_args: dict[str, Any]) -> int:
        """Passes of the training images through the backbone of the linear probe the method fits
        after its run (`cost.probe`), with `method_args`; 0 without a probe."""
        return probe_passes(self.cost.get("probe", {}), method_args)

    def epochs_before_run(self, method_args: dict[str, Any]) -> float:
        """Epochs trained before the run's own by `method_args` (those declared `x-before-run: epochs`:
        LearnedMixin+H's G pre-training), 0 for most methods."""
        return float(
            sum(
                method_args.get(name, arg["default"])
                for name, arg in self.args.items()
                if arg.get("x-before-run") == "epochs"
            )
        )

    def schema(self) -> dict[str, Any]:
        """JSON schema of a `method_args` mapping: only the declared args, each of its type."""
        props = {
            name: {k: v for k, v in arg.items() if k not in ("default", "description", *ANNOTATIONS)}
            for name, arg in self.args.items()
        }
        return {"type": "object", "additionalProperties": False, "properties": props}


def declaration_path(module: str) -> Path:
    """The declaration of `module`'s classes (its dotted name): `<module>.yaml` beside it, located without importing
    it (a method of this package, or one registered from outside it: a toy method a test adds)."""
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        raise KeyError(f"no module {module!r}: a method registered as '<package.module>:<Class>' must exist")
    return Path(found.origin).with_suffix(".yaml")


@cache
def module_specs(module: str) -> dict[str, MethodSpec]:
    """{class name: spec} declared in `<module>.yaml` (`declaration_path`; module: its dotted name)."""
    path = declaration_path(module)
    raw = yaml.safe_load(path.read_text()) or {}
    if missing := [
        cls for cls, entry in raw.items() if not cls.startswith("_") and "row" not in (entry.get("cost") or {})
    ]:
        raise ValueError(
            f"{path} declares no cost for {missing}: give each class `cost: {{row: <a row of "
            "workflow/step_times.yaml>}` (with `reason:` where that row measured another method; spec.py)"
        )
    return {
        cls: MethodSpec(
            dict(entry.get("args") or {}),
            dict(entry.get("aligned_variants") or {}),
            int(entry.get("revision", 0)),
            bool(entry.get("photo_views", False)),
            dict(entry["cost"]),
            dict(entry.get("cost_as") or {}),
            dict(entry.get("code_rules") or {}),
            tuple(entry.get("needs") or ()),
            _regime(path, cls, entry.get("regime", REGIMES[0])),
            bool(entry.get("reference", False)),
            tuple(entry.get("treatment") or ()),
            entry.get("baseline_method"),
            str(entry.get("given", "")),
            dict(entry.get("selection") or {}),
            tuple(entry.get("prerequisites") or ()),
        )
        for cls, entry in raw.items()
        if not cls.startswith("_")
    }


def _regime(path: Path, cls: str, regime: str) -> str:
    if regime not in REGIMES:
        raise ValueError(f"{path}: {cls}'s regime {regime!r} is none of {REGIMES}")
    return regime


def class_spec(module: str, cls: str) -> MethodSpec:
    specs = module_specs(module)
    if cls not in specs:
        raise KeyError(
            f"{declaration_path(module)} declares no entry for class {cls!r}; add one "
            f"(`{cls}: {{args: {{}}}}` for a method without arguments)"
        )
    return specs[cls]


def probe_passes(probe: dict[str, str], method_args: dict[str, Any]) -> int:
    """Passes of a linear probe (`probe`, a `cost.probe` entry: {epochs, augment}, the method
    arguments naming them) over the training images: `epochs` of them with `augment`, else one
    (features of the unaugmented images computed once); 0 for no probe (`probe` empty)."""
    if not probe:
        return 0
    return int(method_args[probe["epochs"]]) if method_args.get(probe["augment"]) else 1
