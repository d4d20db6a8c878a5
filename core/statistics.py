"""Uncertainty of the numbers the report compares, and the verdicts drawn from it.

A run's value (an accuracy, a gap, a shape bias) has two sources of error: the training run
(another seed gives another model) and the test images (another draw of test images gives
another value). The first is measured by the spread over seeds, the second by a bootstrap over
the test images of each run (`proportion_se`, `group_bootstrap_se`), computed when the run is
scored and stored with its row as `se`.

The difference between two models' means over seeds gets a 95 % confidence interval
(`difference`): a t interval whose variance adds

- the seed part: the variance of the per-seed differences / k where both models ran the same
  k >= 2 seeds (paired, as scipy's `ttest_rel`), else Welch's s_a^2 / k_a + s_b^2 / k_b (as
  `ttest_ind(equal_var=False)`);
- the test-image part: (mean se_a)^2 + (mean se_b)^2, each model's seeds taken as sharing one
  draw of test images (they do) and the two models as independent (they are positively
  correlated on shared images, so this overstates the error: the interval is conservative);

with the Welch-Satterthwaite degrees of freedom (the test-image part, from thousands of images,
counts as known). The verdict is "higher" or "lower" when the interval excludes 0 and
"cannot tell" otherwise; with one seed on a side the seed spread is unknown and the verdict is
"cannot tell" whatever the difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: resamples of every test-image bootstrap
RESAMPLES = 2000
LEVEL = 0.95

#: the method, in one sentence, for the report
METHOD = ("Every comparison is a 95 % confidence interval of the difference of the two models' means over seeds "
          "(a t interval, paired by seed where both ran the same seeds, Welch's otherwise, that adds each run's "
          "test-image sampling error from a bootstrap over its test images); a verdict says \"higher\" or \"lower\" "
          "only when the interval excludes 0, else \"cannot tell\" (always with one seed on a side).")


class RunValue(float):
    """A run's value that also knows its training seed, its test-image standard error `se` (0 where
    unknown) and the number of images `n` it rests on (None where not one count)."""

    seed: int | None
    se: float
    n: int | None

    def __new__(cls, value: float, seed: int | None = None, se: float | None = None, n: int | None = None):
        out = super().__new__(cls, value)
        out.seed, out.se, out.n = seed, float(se or 0.0), n
        return out

    def __reduce__(self):  # survives copy / pickle with its attributes
        return RunValue, (float(self), self.seed, self.se, self.n)


def run_value(row: dict) -> RunValue:
    """The `RunValue` of a tidy metric row: its `se` when it has one, else the binomial one of an
    accuracy-like percentage on its `n` images (`proportion_se`), else 0."""
    se = row.get("se")
    if se is None and row.get("n") and str(row.get("metric", "")).endswith("accuracy"):
        se = proportion_se(row["value"], row["n"])
    return RunValue(row["value"], row.get("seed"), se, row.get("n"))


def proportion_se(percent: float, n: int) -> float:
    """Bootstrap standard error (points) of a percentage of n images: resampling n images with
    replacement makes the count correct Binomial(n, p), so the bootstrap's standard error is
    exactly 100 sqrt(p (1 - p) / n) (no resampling needed). NaN without images."""
    if not n or not math.isfinite(percent):
        return float("nan")
    p = percent / 100.0
    return 100.0 * math.sqrt(max(p * (1.0 - p), 0.0) / n)


def group_bootstrap_se(correct: np.ndarray, groups: np.ndarray, statistic: str, seed: int,
                       resamples: int = RESAMPLES) -> float:
    """Bootstrap standard error (points) of the worst-group ("min") or mean-over-groups ("mean")
    accuracy of per-image `correct` (N,) bool in `groups` (N,) ids, resampling the images of every
    group with replacement (a stratified bootstrap: each group keeps its size). A group's resampled
    accuracy is Binomial(n_g, p_g) / n_g, drawn directly."""
    ids, inverse = np.unique(groups, return_inverse=True)
    n = np.bincount(inverse, minlength=len(ids))
    k = np.bincount(inverse, weights=correct.astype(float), minlength=len(ids))
    rng = np.random.default_rng(seed)
    draws = rng.binomial(n[None, :], (k / n)[None, :], size=(resamples, len(ids))) / n[None, :]  # (R, G)
    per_resample = draws.min(axis=1) if statistic == "min" else draws.mean(axis=1)
    return float(100.0 * per_resample.std(ddof=1))


@dataclass(frozen=True)
class Interval:
    """A 95 % confidence interval of a difference (or of one model's mean) and how it was made."""

    estimate: float
    low: float
    high: float
    paired: bool
    seeds: tuple[int, int]   # seeds on each side (one side: (k, 0))

    @property
    def verdict(self) -> str:
        """"higher" / "lower" where the interval excludes 0, else "cannot tell"."""
        if self.low > 0:
            return "higher"
        if self.high < 0:
            return "lower"
        return "cannot tell"

    def text(self, digits: int = 1, unit: str = " points") -> str:
        """"higher: +3.1 points (95 % CI +0.4 to +5.8, paired over 3 seeds)" and the like."""
        how = (f"paired over {self.seeds[0]} seeds" if self.paired else
               f"{self.seeds[0]} vs {self.seeds[1]} seeds" if self.seeds[1] else f"{self.seeds[0]} seeds")
        if not math.isfinite(self.estimate):
            return "cannot tell: no numbers"
        if not math.isfinite(self.low):
            return f"cannot tell: {self.estimate:+.{digits}f}{unit} (one seed on a side: seed spread unknown, {how})"
        return (f"{self.verdict}: {self.estimate:+.{digits}f}{unit} (95 % CI {self.low:+.{digits}f} to "
                f"{self.high:+.{digits}f}, {how})")


def _t_interval(estimate: float, seed_var: float, seed_df: float, image_var: float, seeds: tuple[int, int],
                paired: bool) -> Interval:
    """estimate +- t(df) sqrt(seed_var + image_var), df by Welch-Satterthwaite (image part: df infinite)."""
    total = seed_var + image_var
    if math.isnan(seed_df) or seed_df <= 0 or not math.isfinite(total):  # one seed: no spread to judge against
        return Interval(estimate, -math.inf, math.inf, paired, seeds)
    if total == 0:
        return Interval(estimate, estimate, estimate, paired, seeds)
    from scipy import stats  # here, not at the top: every training job imports this module (1 CPU-s)

    df = total ** 2 * seed_df / seed_var ** 2 if seed_var > 0 else math.inf
    half = float(stats.t.ppf(0.5 + LEVEL / 2, df)) * math.sqrt(total)
    return Interval(estimate, estimate - half, estimate + half, paired, seeds)


def _image_var(values: Sequence[RunValue]) -> float:
    ses = [getattr(v, "se", 0.0) for v in values]
    ses = [s for s in ses if math.isfinite(s)]
    return float(np.mean(ses)) ** 2 if ses else 0.0


def mean_interval(values: Sequence[float]) -> Interval:
    """95 % interval of one model's mean over its seeds: t over the seeds (scipy's `ttest_1samp`
    interval) widened by the runs' test-image error. With one seed, the run's own test-image
    interval (normal): it says whether that run learned, not how seeds vary; unbounded where the
    run's error is unknown too."""
    x = np.asarray([float(v) for v in values if math.isfinite(float(v))])
    k = len(x)
    if k == 0:
        return Interval(math.nan, -math.inf, math.inf, False, (0, 0))
    image_var = _image_var(values)
    if k == 1:
        return _t_interval(float(x[0]), 0.0, math.inf if image_var > 0 else math.nan, image_var, (1, 0), False)
    return _t_interval(float(x.mean()), float(x.var(ddof=1)) / k, k - 1, image_var, (k, 0), False)


def difference(a: Sequence[float], b: Sequence[float]) -> Interval:
    """95 % interval of mean(a) - mean(b) over seeds (module docstring): paired where every value
    carries a seed and both sides have the same k >= 2 seeds, Welch's otherwise."""
    a = [v for v in a if math.isfinite(float(v))]
    b = [v for v in b if math.isfinite(float(v))]
    ka, kb = len(a), len(b)
    if not ka or not kb:
        return Interval(math.nan, -math.inf, math.inf, False, (ka, kb))
    estimate = float(np.mean([float(v) for v in a]) - np.mean([float(v) for v in b]))
    image_var = _image_var(a) + _image_var(b)
    seeds_a, seeds_b = [getattr(v, "seed", None) for v in a], [getattr(v, "seed", None) for v in b]
    if None not in seeds_a and sorted(seeds_a) == sorted(seeds_b) and len(set(seeds_a)) == ka and ka >= 2:
        by_seed = {s: float(v) for s, v in zip(seeds_b, b)}
        d = np.array([float(v) - by_seed[s] for s, v in zip(seeds_a, a)])
        return _t_interval(estimate, float(d.var(ddof=1)) / ka, ka - 1, image_var, (ka, kb), True)
    if ka < 2 or kb < 2:
        return Interval(estimate, -math.inf, math.inf, False, (ka, kb))
    va = float(np.var([float(v) for v in a], ddof=1)) / ka
    vb = float(np.var([float(v) for v in b], ddof=1)) / kb
    seed_var = va + vb
    seed_df = seed_var ** 2 / (va ** 2 / (ka - 1) + vb ** 2 / (kb - 1)) if seed_var > 0 else math.inf
    return _t_interval(estimate, seed_var, seed_df, image_var, (ka, kb), False)
