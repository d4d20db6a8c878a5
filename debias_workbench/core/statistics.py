"""Uncertainty of the numbers the report compares, and the verdicts drawn from it.

A run's value (an accuracy, a gap, a shape bias) has two sources of error: the training run
(another seed gives another model) and the test images (another draw of test images gives
another value). The first is measured by the spread over seeds, the second by a bootstrap over
the test images of each run (`proportion_se`, `group_bootstrap_se`), computed when the run is
scored and stored with its row as `se`; an accuracy-like row also keeps which of its images were
right (`hits`, packed bits in store order), so that two models scored on the same images can be
compared image by image.

The difference between two models' means over seeds gets a 95 % confidence interval
(`difference`) from two variance parts, a seed part v_seed with nu degrees of freedom and a
test-image part v_image counted as known (thousands of images):

- **paired over seeds and images** where both models ran the same k >= 2 seeds and every run
  kept its per-image values on the same images: the seeds and the test images are two crossed
  random factors of the per-seed, per-image differences d[s, i], and the variance of their mean is
  var(seed means) / k + var(image means) / N - MS_residual / (k N) (the crossed two-way
  random-effects estimate; the last term is in both of the first two): v_seed = var(seed means) / k
  with nu = k - 1, v_image = max(var(image means) / N - MS_residual / (k N), 0). An image hard for
  both models adds nothing; an image one model gets right and the other wrong in every seed (a
  method x image term) makes the image means vary, and enters through v_image;
- **paired over seeds** where only the seeds pair: v_seed = the variance of the per-seed
  differences / k (scipy's `ttest_rel`), nu = k - 1, and v_image = (mean se_a)^2 + (mean se_b)^2,
  each model's test-image error taken as independent (they are positively correlated on shared
  images, so this overstates the error: the interval is conservative);
- **Welch's** otherwise: v_seed = s_a^2 / k_a + s_b^2 / k_b with the Welch-Satterthwaite nu
  (`ttest_ind(equal_var=False)`), and the same v_image.

The interval is estimate +- sqrt(t_nu^2 v_seed + z^2 v_image), t_nu and z the 97.5 % quantiles of
Student's t and the normal: Banerjee's bound (S. K. Banerjee, Sankhya A 23, 1961: a confidence
interval from separate variance estimates and the t table), which covers the difference with at
least 95 % whatever the true ratio of the two parts (in the Welch case, as far as Welch's nu holds
for the seed part). Not estimate +- t_df sqrt(v_seed + v_image) with df = (v_seed + v_image)^2 nu /
v_seed^2 (Welch-Satterthwaite, the rule before): with 3 seeds v_seed rests on 2 degrees of freedom
and is often far below its mean by chance; then df grows towards the normal's just when the
interval is too narrow, and where v_image is a small or middling share of the variance the verdicts
say "higher" or "lower" more often than 5 % of the time where nothing differs. Banerjee's bound is
exact where either part is all of the variance, conservative in between, and never narrower than
the rule before (`benchmarks/statistics_calibration.py` measures both rules).

The verdict is "higher" or "lower" when the interval excludes 0 and "cannot tell" otherwise; with
one seed on a side the seed spread is unknown and the verdict is "cannot tell" whatever the
difference. Intervals are per comparison, without a correction for the number of comparisons a
report makes: of twenty comparisons where nothing differs, at most about one says "higher" or
"lower" (`benchmarks/statistics_calibration.py` measures the rate and the power). Each interval
has the p-value of its own statistic (`Interval.p_value`, the level at which its bound reaches 0),
which a section judging many cells at once corrects with Benjamini and Hochberg's step-up
(`benjamini_hochberg`: the methods x benchmarks table).
A share of 0 % or 100 % has no binomial spread; its standard error is then the Agresti-Coull one
(two successes and two failures added), so it is never a zero-width interval.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: resamples of every test-image bootstrap
RESAMPLES = 2000
LEVEL = 0.95
#: log10 of the smallest p-value `Interval.p_value` resolves (below it, this value)
SMALLEST_LOG_P = -300.0

#: the method, in one sentence, for the report
METHOD = (
    "Every comparison is a 95 % confidence interval of the difference of the two models' means over seeds: "
    "a t interval paired over seeds and test images where both models ran the same seeds on the same images "
    "(seeds and images as crossed random factors), else paired by seed or Welch's, adding each run's test-image "
    "error from a bootstrap over its images as if the two were independent (conservative); the seed part "
    "(Student's t over the seeds) and the test-image part (normal) are combined by Banerjee's bound, valid "
    "whatever their ratio; a verdict says \"higher\" or \"lower\" only when the interval excludes 0, else "
    "\"cannot tell\" (always with one seed on a side). Intervals are per comparison, not corrected for their "
    "number: where nothing differs, at most about one in twenty says \"higher\" or \"lower\". A section that "
    "corrects its verdicts for the number of its comparisons names the correction and its family of tests, and "
    "keeps the uncorrected interval beside each corrected verdict."
)


class RunValue(float):
    """A run's value that also knows its training seed, its test-image standard error `se` (0 where
    unknown), the number of images `n` it rests on (None where not one count) and, where kept, its
    value on each image `per_image` (points, in store order; their mean is the value)."""

    seed: int | None
    se: float
    n: int | None
    per_image: np.ndarray | None

    def __new__(
        cls,
        value: float,
        seed: int | None = None,
        se: float | None = None,
        n: int | None = None,
        per_image: np.ndarray | None = None,
    ):
        out = super().__new__(cls, value)
        out.seed, out.se, out.n, out.per_image = seed, float(se or 0.0), n, per_image
        return out

    def __reduce__(self):  # survives copy / pickle with its attributes
        return RunValue, (float(self), self.seed, self.se, self.n, self.per_image)


def pack_hits(hits: np.ndarray) -> str:
    """Per-image right / wrong (bool, store order) as text for a tidy row: packed bits, base64."""
    return base64.b64encode(np.packbits(hits.astype(bool)).tobytes()).decode("ascii")


def unpack_hits(text: str, n: int) -> np.ndarray:
    """The `n` booleans `pack_hits` wrote."""
    return np.unpackbits(np.frombuffer(base64.b64decode(text), np.uint8), count=n).astype(bool)


def run_value(row: dict) -> RunValue:
    """The `RunValue` of a tidy metric row: its `se` when it has one, else the binomial one of an
    accuracy-like percentage on its `n` images (`proportion_se`), else 0; its per-image values
    (100 for a right image, 0 for a wrong one) where the row kept its `hits`."""
    se = row.get("se")
    if se is None and row.get("n") and str(row.get("metric", "")).endswith("accuracy"):
        se = proportion_se(row["value"], row["n"])
    per_image = 100.0 * unpack_hits(row["hits"], row["n"]) if row.get("hits") and row.get("n") else None
    return RunValue(row["value"], row.get("seed"), se, row.get("n"), per_image)


def proportion_se(percent: float, n: int) -> float:
    """Bootstrap standard error (points) of a percentage of n images: resampling n images with
    replacement makes the count correct Binomial(n, p), so the bootstrap's standard error is
    exactly 100 sqrt(p (1 - p) / n) (no resampling needed). At 0 % and 100 % that is 0, as if n
    images had settled the rate exactly; there the Agresti-Coull one, with p~ = (x + 2) / (n + 4)
    and 100 sqrt(p~ (1 - p~) / (n + 4)). NaN without images."""
    if not n or not math.isfinite(percent):
        return float("nan")
    p = percent / 100.0
    if p <= 0.0 or p >= 1.0:
        p, n = (p * n + 2) / (n + 4), n + 4
    return 100.0 * math.sqrt(max(p * (1.0 - p), 0.0) / n)


def group_bootstrap_se(
    correct: np.ndarray, groups: np.ndarray, statistic: str, seed: int, resamples: int = RESAMPLES
) -> float:
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
    seeds: tuple[int, int]  # seeds on each side (one side: (k, 0))
    images: int = 0  # test images both sides were paired on (0: not paired by image)
    #: the two variance parts and the seed part's degrees of freedom the interval was made from (`_t_interval`)
    seed_var: float = math.nan
    seed_df: float = math.nan
    image_var: float = 0.0

    @property
    def p_value(self) -> float:
        """Two-sided p-value of "no difference" from the interval's own statistic: the smallest level alpha at
        which Banerjee's bound, estimate +- sqrt(t_(nu, 1 - alpha/2)^2 v_seed + z_(1 - alpha/2)^2 v_image),
        excludes 0 (so p < 0.05 exactly where the 95 % interval does). With no test-image part it is the t
        test's, 2 P(T_nu > |estimate| / sqrt(v_seed)) (scipy's `ttest_rel` / `ttest_ind(equal_var=False)`);
        with no seed part the normal's. 1 where the interval is unbounded (one seed on a side) or has no
        numbers: no evidence."""
        if not (math.isfinite(self.low) and math.isfinite(self.high) and math.isfinite(self.estimate)):
            return 1.0
        if self.estimate == 0.0:
            return 1.0
        # here, not at the top: every training job imports this module (`_t_interval`)
        from scipy import optimize, special

        seed_var = self.seed_var if self.seed_var > 0 else 0.0

        def excess(log_alpha: float) -> float:  # half-width at level 1 - alpha minus |estimate|: decreasing
            tail = 10.0**log_alpha / 2  # the lower quantiles, exact in the far tail where 1 - tail rounds to 1
            t = float(special.stdtrit(self.seed_df, tail)) if seed_var > 0 else 0.0
            return math.sqrt(t**2 * seed_var + float(special.ndtri(tail)) ** 2 * self.image_var) - abs(self.estimate)

        if excess(SMALLEST_LOG_P) <= 0:
            return 10.0**SMALLEST_LOG_P
        return 10.0 ** float(optimize.brentq(excess, SMALLEST_LOG_P, 0.0, xtol=1e-10))

    @property
    def verdict(self) -> str:
        """ "higher" / "lower" where the interval excludes 0, else "cannot tell"."""
        if self.low > 0:
            return "higher"
        if self.high < 0:
            return "lower"
        return "cannot tell"

    def text(self, digits: int = 1, unit: str = " points") -> str:
        """ "higher: +3.1 points (95 % CI +0.4 to +5.8, paired over 3 seeds)" and the like."""
        how = (
            f"paired over {self.seeds[0]} seeds and {self.images:,} images"
            if self.images
            else f"paired over {self.seeds[0]} seeds"
            if self.paired
            else f"{self.seeds[0]} vs {self.seeds[1]} seeds"
            if self.seeds[1]
            else f"{self.seeds[0]} seeds"
        )
        if not math.isfinite(self.estimate):
            return "cannot tell: no numbers"
        if not math.isfinite(self.low):
            return f"cannot tell: {self.estimate:+.{digits}f}{unit} (one seed on a side: seed spread unknown, {how})"
        return (
            f"{self.verdict}: {self.estimate:+.{digits}f}{unit} (95 % CI {self.low:+.{digits}f} to "
            f"{self.high:+.{digits}f}, {how})"
        )


def _t_interval(
    estimate: float,
    seed_var: float,
    seed_df: float,
    image_var: float,
    seeds: tuple[int, int],
    paired: bool,
    images: int = 0,
) -> Interval:
    """estimate +- sqrt(t(seed_df)^2 seed_var + z^2 image_var), Banerjee's bound (module docstring);
    unbounded where the seed spread is unknown (one seed)."""
    if math.isnan(seed_df) or seed_df <= 0 or not math.isfinite(seed_var + image_var):
        return Interval(estimate, -math.inf, math.inf, paired, seeds, images, seed_var, seed_df, image_var)
    # here, not at the top: every training job imports this module (docs/measurements.md#the-demos-cost-per-rule)
    from scipy import special

    quantile = 0.5 + LEVEL / 2  # special's quantiles: stats.t.ppf and stats.norm.ppf without their checks
    t = float(special.stdtrit(seed_df, quantile)) if seed_var > 0 else 0.0
    half = math.sqrt(t**2 * seed_var + float(special.ndtri(quantile)) ** 2 * image_var)
    return Interval(estimate, estimate - half, estimate + half, paired, seeds, images, seed_var, seed_df, image_var)


def _image_var(values: Sequence[float]) -> float:
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
    seeds_a: list[Any] = [getattr(v, "seed", None) for v in a]
    seeds_b: list[Any] = [getattr(v, "seed", None) for v in b]
    if None not in seeds_a and sorted(seeds_a) == sorted(seeds_b) and len(set(seeds_a)) == ka and ka >= 2:
        by_seed = {s: v for s, v in zip(seeds_b, b)}
        pairs = [(v, by_seed[s]) for s, v in zip(seeds_a, a)]
        if per_image := _per_image_differences(pairs):
            seed_var, seed_df, images_var, images = per_image
            return _t_interval(estimate, seed_var, seed_df, images_var, (ka, kb), True, images)
        d = np.array([float(x) - float(y) for x, y in pairs])
        return _t_interval(estimate, float(d.var(ddof=1)) / ka, ka - 1, image_var, (ka, kb), True)
    if ka < 2 or kb < 2:
        return Interval(estimate, -math.inf, math.inf, False, (ka, kb))
    va = float(np.var([float(v) for v in a], ddof=1)) / ka
    vb = float(np.var([float(v) for v in b], ddof=1)) / kb
    seed_var = va + vb
    welch_df = seed_var**2 / (va**2 / (ka - 1) + vb**2 / (kb - 1)) if seed_var > 0 else math.inf
    return _t_interval(estimate, seed_var, welch_df, image_var, (ka, kb), False)


def _per_image_differences(pairs: list[tuple[float, float]]) -> tuple[float, int, float, int] | None:
    """(seed part, its df, image part, N) of the crossed seeds x images variance of the mean
    difference (module docstring) where every run of the seed-paired `pairs` kept its values on the
    same N images; None otherwise."""
    arrays = [getattr(v, "per_image", None) for pair in pairs for v in pair]
    present = [x for x in arrays if x is not None]
    if len(present) != len(arrays) or len({len(x) for x in present}) != 1 or len(present[0]) < 2:
        return None
    d = np.stack([x - y for x, y in zip(present[::2], present[1::2])])  # (k seeds, N images)
    k, n = d.shape
    seed_means, image_means = d.mean(axis=1), d.mean(axis=0)
    residual = d - seed_means[:, None] - image_means[None, :] + d.mean()
    ms_residual = float((residual**2).sum()) / ((k - 1) * (n - 1))
    image_part = max(float(image_means.var(ddof=1)) / n - ms_residual / (k * n), 0.0)
    return float(seed_means.var(ddof=1)) / k, k - 1, image_part, n


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values; Y. Benjamini and Y. Hochberg, J. R. Statist. Soc. B 57,
    1995), in the order given: with the m p-values sorted, p_(1) <= ... <= p_(m), the i-th adjusted is
    min over j >= i of min(1, m p_(j) / j). Rejecting where it is below alpha keeps the expected share of false
    rejections among the rejections (the false discovery rate) at most alpha for independent tests and for
    positively regression-dependent ones (Benjamini and Yekutieli 2001; two-sided tests of mixed dependence are
    outside that proof)."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 1.0
    for rank, i in reversed(list(enumerate(sorted(range(m), key=lambda i: p_values[i]), start=1))):
        running = min(running, min(1.0, m * p_values[i] / rank))
        adjusted[i] = running
    return adjusted
