"""The shared model-selection rules (debias_workbench/report/model_selection.py) on hand-made scoring points."""

import math

import pytest

from debias_workbench.report import model_selection as ms


def _rows(experiment, seed, points, final):
    """Curve rows {step: {"<set>_<metric>": value}} and the final eval rows {set: accuracy}."""
    rows = [{"kind": "curve", "experiment": experiment, "seed": seed, "step": step, "metric": key, "value": value}
            for step, values in points.items() for key, value in values.items()]
    rows += [{"kind": "eval", "experiment": experiment, "seed": seed, "variant": test_set, "metric": "accuracy",
              "value": value} for test_set, value in final.items()]
    return rows


ROWS = (_rows("a", 0, {10: {"valid_accuracy": 50, "unbiased_accuracy": 40},
                       20: {"valid_accuracy": 70, "unbiased_accuracy": 30},
                       30: {"valid_accuracy": 70, "unbiased_accuracy": 60}},
              {"valid": 60, "unbiased": 45})
        + _rows("a", 1, {10: {"valid_accuracy": 90, "unbiased_accuracy": 20}}, {"valid": 80, "unbiased": 55})
        + _rows("b", 0, {}, {"valid": 10, "unbiased": 11}))


@pytest.mark.parametrize("rule, expected", [
    # last: the final evaluation; validation: best valid (the earliest of ties: step 20, not 30);
    # oracle: the best test value anywhere
    ("last", {"a": [45, 55], "b": [11]}),
    ("validation", {"a": [30, 20], "b": [11]}),
    ("oracle", {"a": [60, 55], "b": [11]}),
])
def test_each_rule_picks_its_point(rule, expected):
    """A rule that took the last tied point, the test-best point for "validation" or the final
    point for "oracle" would give other values here."""
    assert ms.selected(ROWS, {"a", "b"}, "unbiased", "accuracy", rule, "valid") == expected


def test_runs_outside_the_set_and_missing_points_are_left_out():
    assert ms.selected(ROWS, {"b"}, "unbiased", "accuracy", "last") == {"b": [11]}
    assert ms.selected(ROWS, {"a"}, "worst", "accuracy", "oracle", "valid") == {}
    assert ms.select({}, "last", "unbiased_accuracy") is None


def test_an_unknown_rule_or_validation_without_a_validation_set_is_refused():
    with pytest.raises(ValueError, match="unknown model-selection rule"):
        ms.select({math.inf: {"t": 1.0}}, "best", "t")
    with pytest.raises(ValueError, match="validation"):
        ms.select({math.inf: {"t": 1.0}}, "validation", "t")


def test_every_rule_has_a_caption():
    assert set(ms.DESCRIPTIONS) == set(ms.RULES)
    assert ms.caption("oracle").startswith("Model selection: the best test value")
    assert ms.caption("validation", "oracle") == (f"Model selection: {ms.DESCRIPTIONS['validation']}; "
                                                  f"{ms.DESCRIPTIONS['oracle']}.")


def test_the_caption_goes_under_a_sections_first_table_and_nowhere_without_one():
    from debias_workbench.report.build import add_selection_caption
    from debias_workbench.report.document import Document

    doc = Document("t")
    doc.heading("earlier")
    doc.table(["a"], [["1"]])
    start = len(doc.blocks)
    doc.heading("Table")
    doc.para("intro")
    doc.table(["a"], [["2"]])
    doc.table(["a"], [["3"]])
    add_selection_caption(doc, start, ("last",))
    assert doc.blocks[start + 3] == ("p", ms.caption("last")) and len(doc.blocks) == start + 5
    empty = Document("t")
    empty.para("Not run.")
    add_selection_caption(empty, 0, ("last",))
    assert empty.blocks == [("p", "Not run.")]
