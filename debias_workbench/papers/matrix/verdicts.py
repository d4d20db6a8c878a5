"""The verdict of each compared cell of the methods x benchmarks table: the difference from its row's
baseline (`contrasts`), its 95 % interval (`core.statistics.difference`), corrected for the number of cells
compared, and guarded against a gain bought with the accuracy it trades against.

- **The Benjamini-Hochberg correction** (J. R. Statist. Soc. B 57, 1995; `core.statistics.benjamini_hochberg`).
  The family of tests is every compared cell of the table: each cell's p-value is that of its own interval
  (`core.statistics.Interval.p_value`: the level at which its interval just reaches 0, so the uncorrected
  verdict and p < 0.05 agree), the step-up adjusts them to q-values, and a cell says "better" or "worse" only
  where its q-value is below 0.05: of the cells that say so, at most 5 % are expected to be false (the false
  discovery rate; proved for independent tests and for positively dependent one-sided ones, Benjamini and
  Yekutieli 2001: these two-sided tests, some negatively related (a row's BG-GAP and its Mixed-Rand), are outside
  the proof, where simulations find it robust). Not Holm's
  family-wise control: at three seeds (2 degrees of freedom) over about 80 cells Holm's first step asks
  |t| >= 40, so a screening table of real effects would read "cannot tell" almost everywhere. The uncorrected
  interval stands beside the corrected verdict.
- **The trade-off guard.** A number the family declares `trades_against` an accuracy (IN-9's BG-GAP against
  Mixed-Rand, its shape bias against ORIGINAL: `pipeline.datasets.base.BenchmarkMetric`) says "better" only
  where that accuracy is not worse than the baseline's by its own (uncorrected, so the stricter) interval; a
  smaller gap paid for with 22 points of Mixed-Rand accuracy is "not better", and the cell says why.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import TypeVar

from debias_workbench.core.statistics import LEVEL, Interval, benjamini_hochberg, difference
from debias_workbench.pipeline.datasets.base import BenchmarkMetric
from debias_workbench.training.methods.spec import LAST

#: the correction, named, for the report
CORRECTION = "the Benjamini-Hochberg correction (false discovery rate 5 %)"
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Cell:
    """One method on one benchmark: `status` one of "reference", "compared", "no baseline", "not informative" (a
    method on a benchmark whose ERM fails its capability check), "cannot run", "not run", "no reference" (its
    baseline has no runs there); its `text`; where compared, against `baseline` (its label), the `interval` of
    method minus baseline (uncorrected), its `effect` (the estimate signed so that positive is better), `guard`
    (why a better number is not better: the accuracy it traded; once judged, empty unless it decided the
    verdict), its Benjamini-Hochberg `q_value` and `better` (the corrected verdict; None: cannot tell, or traded)."""

    status: str
    text: str
    interval: Interval | None = None
    effect: float = math.nan
    better: bool | None = None
    baseline: str = ""
    guard: str = ""
    q_value: float = math.nan
    #: how its values were selected, where not at the last iterate (the paper-rule table: `selection`)
    note: str = ""
    #: the selection rule its values were scored by (its row's, for the paper-rule table)
    rule: str = LAST


def trade_off(metric: BenchmarkMetric, judged: Interval, traded: Interval | None) -> str:
    """Why a cell better on `metric` (`judged`) is not better: its `trades_against` accuracy (`traded`, method
    minus baseline) is worse by its own interval, or was not measured; empty where it holds, or where `metric`
    trades against nothing."""
    against = metric.trades_against
    if against is None:
        return ""
    if traded is None or not math.isfinite(traded.estimate):
        return f"its {against.title} was not measured, so the trade-off cannot be checked: not better"
    worse = traded.verdict == ("lower" if against.higher_is_better else "higher")
    if not worse:
        return ""
    way = "lower" if judged.estimate < 0 else "higher"
    return f"{way} {metric.title} at {traded.estimate:+.1f} points {against.title}: not better"


def provisional(
    values: list[float],
    reference: list[float],
    metric: BenchmarkMetric,
    baseline: str,
    traded: tuple[list[float], list[float]] | None = None,
) -> Cell:
    """The compared cell of a method's `values` against its `baseline`'s `reference` on `metric`, before the
    correction (`corrected` writes its verdict and text); `traded`, (method's, baseline's) values of the accuracy
    the metric trades against, where it declares one."""
    judged = difference(values, reference)
    effect = judged.estimate if metric.higher_is_better else -judged.estimate
    guard = trade_off(metric, judged, difference(*traded) if traded and traded[0] and traded[1] else None)
    return Cell("compared", judged.text(), judged, effect, baseline=baseline, guard=guard)


def corrected(cells: dict[K, Cell]) -> dict[K, Cell]:
    """`cells` with every compared one judged under the Benjamini-Hochberg correction across all of them (module
    docstring)."""
    keys = [key for key, cell in cells.items() if cell.status == "compared" and cell.interval is not None]
    adjusted = benjamini_hochberg([cells[key].interval.p_value for key in keys])  # type: ignore[union-attr]
    out = dict(cells)
    for key, p in zip(keys, adjusted):
        out[key] = verdict(cells[key], p, len(keys))
    return out


def verdict(cell: Cell, q_value: float, tests: int) -> Cell:
    """A compared cell judged at its Benjamini-Hochberg `q_value` (of `tests` tests), its uncorrected interval
    beside."""
    assert cell.interval is not None
    significant = q_value < 1 - LEVEL and math.isfinite(cell.effect)
    better = cell.effect > 0 if significant else None
    q_text = f"BH q = {q_value:.2g} of {tests} tests"
    traded = cell.guard if better else ""  # the guard decides only what would be "better"
    if traded:
        head, better = f"{traded} ({q_text})", None
    elif better is None:
        head = f"cannot tell from {cell.baseline} ({q_text})"
    else:
        head = f"{'better' if better else 'worse'} than {cell.baseline} ({q_text})"
    text = f"{cell.note + ': ' if cell.note else ''}{head}; uncorrected: {cell.interval.text()}"
    return replace(cell, text=text, better=better, guard=traded, q_value=q_value)
