"""The matrix's two model-selection rules (`report.model_selection`), each named: the last iterate for every run
(the first table), and each method's own paper's rule (the second: `MethodSpec.selection`, declared in the
method's YAML with where its paper or code says so: LfF+BE and Park et al. report the best test accuracy, an
oracle that selects on the test set, which the table replaces by the nearest rule without test labels, the best
validation point; LfF's code, ReBias and its baselines, CLAD and the self-supervised probes score the last).
A validation-selected point's values are the curve rows', which keep no per-image hits, so its interval pairs
over seeds only (the first table's pair over the test images too: the second's are wider).

A cell of the second table compares the method under its rule with ERM under the same rule (ERM's scoring
points are written beside those of the methods that need them: `reference.with_paper_rule_points`), so that
the selection is like for like. The validation rule reads the benchmark's validation set
(`DatasetFamily.validation_set`: the train variant's own val split); where the family has none (Biased MNIST's
val split is the biased test set; IN-9's holds the test photos), the rule cannot apply and the last iterate
stands in, said in the cell.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.datasets.base import BenchmarkMetric
from debias_workbench.report import model_selection
from debias_workbench.training.methods import spec as method_spec
from debias_workbench.training.methods.spec import LAST, VALIDATION

from .reference import is_reference, scored

#: the name of the matrix's second table's selection (its first: `LAST`, the last iterate)
PAPER = "paper"


@dataclass(frozen=True)
class Selection:
    """How a row's runs are scored: `rule` (one of `model_selection.RULES`) on validation set `valid_set`
    (for rule "validation"); `note`: what the cell says of it (the rule, or why another stands in)."""

    rule: str
    valid_set: str | None = None
    note: str = ""


def paper_selections(
    methods: dict[str, tuple[str, str]], family: str, ds_cfg: dict[str, Any], train_variant: str
) -> dict[str, Selection]:
    """{row: its method's paper rule} on one benchmark (`methods`: {row: (registered method, label)}); the
    validation rule where the family has no validation set: the last iterate, said in the note."""
    owner = get_family(family)
    valid = owner.validation_set(ds_cfg, train_variant)
    out = {}
    for row, (method, _) in methods.items():
        rule = method_spec(method).paper_rule
        if rule == VALIDATION and valid is None:
            out[row] = Selection(LAST, None, "paper rule best validation: no validation split, last")
        else:
            # what the split holds: a bias-balanced one (Colored MNIST's) tells the selection more than the papers'
            # splits of the training's bias degree did, for the row and for ERM beside it alike
            on = f" on {valid} ({owner.val_split})" if rule == VALIDATION else ""
            out[row] = Selection(rule, valid, f"paper rule {rule}{on}")
    return out


def for_metric(selection: Selection | None, metric: BenchmarkMetric) -> Selection | None:
    """`selection` for a benchmark number: the validation rule where the scoring points record the number, else
    the last iterate, said in the note (the shape bias is counted at the final evaluation only)."""
    if selection is None or selection.rule != VALIDATION or scored(metric):
        return selection
    return Selection(LAST, None, f"paper rule validation: no scoring point holds the {metric.title}, last")


def selected_rows(
    rows: list[dict[str, Any]], grid: str, train_variant: str, selection: Selection | None
) -> list[dict[str, Any]]:
    """The final eval rows of `grid`'s runs on `train_variant` as `selection` chooses them: as they are for the
    last iterate; for the validation rule, each run's rows at its scoring point with the best `valid_set`
    accuracy (the earliest on ties; the final evaluation is one of the points), a curve point's rows written
    as eval rows of its test sets."""
    own = [
        r for r in rows if r.get("kind") == "eval" and r.get("grid") == grid and r.get("train_variant") == train_variant
    ]
    if selection is None or selection.rule == LAST:
        return own
    if selection.rule != VALIDATION or selection.valid_set is None:
        raise ValueError(f"the matrix applies the rules last and validation (on a validation set), not {selection}")
    finals: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in own:
        finals[(r["experiment"], r["seed"])].append(r)
    runs = {experiment for experiment, _ in finals}
    sets = tuple(sorted({r["variant"] for r in own}, key=len, reverse=True))  # longest first: a prefix is unique
    curves: dict[tuple[str, int, float], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("kind") == "curve" and r.get("experiment") in runs:
            curves[(r["experiment"], r["seed"], float(r["step"]))].append(r)
    out = []
    for (experiment, seed), by_step in model_selection.scoring_points(rows, runs, sets).items():
        step = model_selection.validation_step(by_step, f"{selection.valid_set}_accuracy")
        if step is None or (experiment, seed) not in finals:
            continue
        if step == model_selection.FINAL:
            out += finals[(experiment, seed)]
        else:
            out += as_eval_rows(curves[(experiment, seed, step)], finals[(experiment, seed)][0], sets)
    return out


def as_eval_rows(curve: list[dict[str, Any]], template: dict[str, Any], sets: tuple[str, ...]) -> list[dict[str, Any]]:
    """A scoring point's curve rows ("<test set>_<metric>") as the eval rows of its test sets, tagged as the run's
    final eval row `template` is (no per-image hits: the interval takes each value's test-image error)."""
    out = []
    for r in curve:
        test_set = next((s for s in sets if r["metric"].startswith(f"{s}_")), None)
        if test_set is None:
            continue  # a training statistic of the point
        kept: dict[str, Any] = {
            k: v for k, v in template.items() if k not in ("hits", "value", "se", "n", "metric", "variant")
        }
        value: dict[str, Any] = {k: r[k] for k in ("value", "se", "n") if k in r}
        out.append(
            {
                **kept,
                **value,
                "variant": test_set,
                "metric": r["metric"].removeprefix(f"{test_set}_"),
                "step": r["step"],
            }
        )
    return out


def rules_paragraph(methods: dict[str, tuple[str, str]]) -> str:
    """The second table's rules, one per row: its paper's rule and where the paper or its code says so."""
    parts = ["ERM: the rule of the method it is compared with"]
    for _, (method, label) in methods.items():
        if is_reference(method):
            continue
        declared = method_spec(method).selection
        source = declared.get("source", "no rule of its own: the last iterate, as every row of the first table")
        parts.append(f"{label}: {method_spec(method).paper_rule} ({source})")
    return "Each row's paper rule: " + "; ".join(parts) + "."
