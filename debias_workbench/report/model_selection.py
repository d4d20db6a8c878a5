"""Model selection, shared by every table (as DomainBed's `model_selection.py`): which scoring
point of a run a table shows.

A run's scoring points are its model-selection curve rows (`kind: curve`, every few steps, on
each test set of its dataset family) plus its final evaluation (`kind: eval`, step = inf). Three
rules, each named in the caption of the tables that use it:

- ``last``: the final evaluation, the model the run ends with (every table without curve rows);
- ``validation``: the point with the best accuracy on the family's validation set (the earliest
  such point on ties), its test value shown: what a practitioner without test labels can do;
- ``oracle``: the best test value over all points, as LfF, BiasEnsemble and Park et al. report:
  it selects on the test set and flatters every method.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from debias_workbench.core.statistics import run_value
from debias_workbench.training.methods.spec import SELECTION_RULES

#: the rules, as the methods declare their papers' (`training.methods.spec`)
RULES = SELECTION_RULES

#: one sentence per rule, for the caption of a table that shows it
DESCRIPTIONS = {
    "last": "the model at the end of training (no selection)",
    "validation": "the scoring point with the best validation accuracy (no test labels used)",
    "oracle": "the best test value over the scoring points (selects on the test set: an upper bound)",
}

FINAL = float("inf")


def scoring_points(
    rows: list[dict[str, Any]], runs: set[str], sets: tuple[str, ...]
) -> dict[tuple[str, int], dict[float, dict[str, float]]]:
    """{(experiment, seed): {step: {"<test set>_<metric>": value}}} of the runs in `runs`, from
    their curve rows and their final eval rows on the test sets `sets` (step FINAL)."""
    points: dict[tuple[str, int], dict[float, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r.get("experiment") not in runs:
            continue
        if r.get("kind") == "curve":
            points[(r["experiment"], r["seed"])][float(r["step"])][r["metric"]] = run_value(r)
        elif r.get("kind") == "eval" and r.get("variant") in sets:
            points[(r["experiment"], r["seed"])][FINAL][f"{r['variant']}_{r['metric']}"] = run_value(r)
    return points


def select(by_step: dict[float, dict[str, float]], rule: str, test: str, valid: str | None = None) -> float | None:
    """The value `test` ("<test set>_<metric>") of one run under `rule`; None where the run has
    no point with the keys the rule needs."""
    if rule not in RULES:
        raise ValueError(f"unknown model-selection rule {rule!r}; known: {RULES}")
    if rule == "last":
        return by_step.get(FINAL, {}).get(test)
    if rule == "validation" and valid is None:
        raise ValueError("rule 'validation' needs the validation key")
    if rule == "oracle":
        # with a validation key, both rules look at the same points: those scored on both sets
        usable = [p for _, p in sorted(by_step.items()) if test in p and (valid is None or valid in p)]
        return max(p[test] for p in usable) if usable else None
    assert valid is not None  # rule "validation" (checked above)
    step = validation_step(by_step, valid, test)
    return None if step is None else by_step[step][test]


def validation_step(by_step: dict[float, dict[str, float]], valid: str, *needed: str) -> float | None:
    """The scoring point rule "validation" picks: the best `valid` value (the earliest point on ties) among the
    points scored on `valid` and on every key `needed`; None where none is."""
    usable = [(step, p) for step, p in sorted(by_step.items()) if valid in p and all(k in p for k in needed)]
    if not usable:
        return None
    best = max(p[valid] for _, p in usable)
    return next(step for step, p in usable if p[valid] == best)


def selected(
    rows: list[dict[str, Any]], runs: set[str], test_set: str, metric: str, rule: str, valid_set: str | None = None
) -> dict[str, list[float]]:
    """{experiment: [value per seed, in seed order]} of `metric` on `test_set` under `rule`
    (`valid_set`: the validation test set, for rule "validation")."""
    sets = tuple(s for s in (test_set, valid_set) if s)
    out: dict[str, list[float]] = defaultdict(list)
    for (experiment, _seed), by_step in sorted(scoring_points(rows, runs, sets).items()):
        value = select(by_step, rule, f"{test_set}_{metric}", valid_set and f"{valid_set}_accuracy")
        if value is not None:
            out[experiment].append(value)
    return dict(out)


def caption(*rules: str) -> str:
    """ "Model selection: <each rule's sentence>." for the caption of the tables showing `rules`."""
    return f"Model selection: {'; '.join(DESCRIPTIONS[rule] for rule in rules)}."
