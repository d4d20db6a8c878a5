"""core.statistics against scipy and brute-force numpy on hand-made data, and its verdicts in
both directions and the "cannot tell" cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from debias_workbench.core.statistics import (RunValue, difference, group_bootstrap_se, mean_interval, pack_hits, proportion_se,
                             run_value, unpack_hits)


def runs(values, seeds=None, se=0.0):
    return [RunValue(v, s, se) for v, s in zip(values, seeds or range(len(values)))]


A = [71.2, 74.8, 69.9, 73.1]
B = [66.0, 70.3, 67.2, 66.8]


def test_paired_interval_is_scipys_ttest_rel_without_image_error():
    ci = difference(runs(A), runs(B))
    ref = stats.ttest_rel(A, B).confidence_interval(0.95)
    assert ci.paired and ci.low == pytest.approx(ref.low) and ci.high == pytest.approx(ref.high)


def test_paired_by_seed_not_by_position():
    shuffled = runs(B[::-1], seeds=[3, 2, 1, 0])
    ref = stats.ttest_rel(A, B).confidence_interval(0.95)
    ci = difference(runs(A), shuffled)
    assert ci.low == pytest.approx(ref.low) and ci.high == pytest.approx(ref.high)


def test_welch_interval_where_seeds_differ():
    b = runs(B[:3], seeds=[5, 6, 7])
    ci = difference(runs(A), b)
    ref = stats.ttest_ind(A, B[:3], equal_var=False).confidence_interval(0.95)
    assert not ci.paired and ci.low == pytest.approx(ref.low) and ci.high == pytest.approx(ref.high)


def test_mean_interval_is_scipys_one_sample_t():
    ref = stats.ttest_1samp(A, 0.0).confidence_interval(0.95)
    ci = mean_interval(runs(A))
    assert ci.low == pytest.approx(ref.low) and ci.high == pytest.approx(ref.high)


def test_image_error_widens_the_interval_and_alone_gives_a_normal_interval():
    narrow, wide = difference(runs(A), runs(B)), difference(runs(A, se=2.0), runs(B, se=2.0))
    assert wide.low < narrow.low and wide.high > narrow.high
    same = difference(runs([70.0, 70.0, 70.0], se=1.0), runs([67.0, 67.0, 67.0], se=1.0))
    half = stats.norm.ppf(0.975) * math.sqrt(2.0)  # no seed spread: only the two runs' image errors
    assert same.low == pytest.approx(3.0 - half) and same.high == pytest.approx(3.0 + half)


@pytest.mark.parametrize("a, b, verdict", [(A, B, "higher"), (B, A, "lower"),
                                           ([70.1, 66.0, 72.3], [69.0, 71.4, 68.8], "cannot tell")])
def test_verdicts_from_the_interval(a, b, verdict):
    ci = difference(runs(a), runs(b))
    assert ci.verdict == verdict
    assert ci.text().startswith(verdict + ":")
    assert (ci.low > 0 or ci.high < 0) == (verdict != "cannot tell")


def test_one_seed_cannot_tell_however_large_the_difference():
    ci = difference(runs([95.0]), runs([10.0]))
    assert ci.verdict == "cannot tell" and "seed spread unknown" in ci.text()
    assert difference(runs(A), []).text() == "cannot tell: no numbers"


def test_small_test_sets_make_a_seed_consistent_difference_uncertain():
    """Three seeds agree on +10 points, but each run saw 2 images: the verdict cannot be drawn."""
    few = [run_value({"metric": "accuracy", "value": v, "n": 2, "seed": s}) for s, v in enumerate([50.0] * 3)]
    many = [run_value({"metric": "accuracy", "value": v, "n": 2, "seed": s}) for s, v in enumerate([40.0] * 3)]
    assert difference(few, many).verdict == "cannot tell"
    assert difference(runs([50.0] * 3), runs([40.0] * 3)).verdict == "higher"


def test_proportion_se_is_the_bootstrap_of_the_bits():
    rng = np.random.default_rng(0)
    bits = rng.random(400) < 0.62
    boot = np.array([bits[rng.integers(0, 400, 400)].mean() for _ in range(4000)]) * 100
    assert proportion_se(100 * bits.mean(), 400) == pytest.approx(boot.std(ddof=1), rel=0.06)
    assert math.isnan(proportion_se(50.0, 0))


@pytest.mark.parametrize("statistic", ["min", "mean"])
def test_group_bootstrap_matches_brute_force_stratified_resampling(statistic):
    rng = np.random.default_rng(1)
    groups = np.repeat([0, 1, 2, 3], [200, 120, 30, 60])
    correct = rng.random(groups.size) < np.array([0.9, 0.7, 0.4, 0.5])[groups]
    brute = []
    for _ in range(3000):
        accs = []
        for g in range(4):
            members = correct[groups == g]
            accs.append(members[rng.integers(0, members.size, members.size)].mean())
        brute.append(min(accs) if statistic == "min" else np.mean(accs))
    expected = 100 * np.std(brute, ddof=1)
    assert group_bootstrap_se(correct, groups, statistic, seed=3) == pytest.approx(expected, rel=0.08)


def test_run_value_reads_se_or_derives_it():
    row = {"metric": "accuracy", "value": 80.0, "n": 100, "seed": 2}
    v = run_value(row)
    assert float(v) == 80.0 and v.seed == 2 and v.se == pytest.approx(4.0)
    assert run_value({**row, "se": 1.5}).se == 1.5
    assert run_value({"metric": "bg_gap", "value": 3.0, "n": None, "seed": 0}).se == 0.0


def test_group_metrics_name_the_worst_group_size_and_its_error():
    from debias_workbench.training.evaluation import group_metrics

    labels = np.array([0] * 40 + [1] * 40 + [0] * 8)
    bias = np.array([0] * 40 + [1] * 40 + [1] * 8)           # group (0, 1): 8 bias-conflicting images
    pred = labels.copy()
    pred[80:84] = 1                                           # half of the small group wrong
    out = group_metrics({"pred": pred, "labels": labels, "bias_labels": bias}, {"experiment": "e", "seed": 0}, "unbiased")
    worst = out["worst_group_accuracy"]
    assert worst["value"] == 50.0 and worst["n"] == 8
    # one group of 8 at 50 %: the stratified bootstrap's error is about the binomial one, 100 sqrt(.25 / 8)
    assert worst["se"] == pytest.approx(proportion_se(50.0, 8), rel=0.15)
    assert out["conflicting_accuracy"] == {"value": 50.0, "n": 8, "se": proportion_se(50.0, 8),
                                           "hits": pack_hits(np.array([False] * 4 + [True] * 4))}


def _scored(correct: np.ndarray, seed: int) -> RunValue:
    """The report's RunValue of a scoring row over per-image `correct` (the row as training.evaluation writes it)."""
    from debias_workbench.training.evaluation import scored_share

    return run_value({"metric": "accuracy", "seed": seed, **scored_share(correct)})


def test_hits_round_trip_through_a_tidy_row():
    correct = np.random.default_rng(0).random(4050) < 0.78
    assert np.array_equal(unpack_hits(pack_hits(correct), 4050), correct)
    value = _scored(correct, 0)
    assert float(value) == pytest.approx(100 * correct.mean()) and value.per_image.mean() == pytest.approx(float(value))


def test_paired_over_images_is_the_crossed_two_way_variance():
    """Two models on the same 500 images over 3 seeds: the interval's variance is var(seed means) / k +
    var(image means) / N - MS_residual / (k N) of the per-seed, per-image differences (written out
    here with numpy), its seed part var(seed means) / k with k - 1 degrees of freedom and the rest
    known, combined by Banerjee's bound: half-width sqrt(t_{k-1}^2 seed part + z^2 image part); and it
    is much narrower than the old rule that added each model's image error as if the two were
    independent."""
    rng = np.random.default_rng(1)
    easy = rng.random(500) < 0.75                        # most images right or wrong for both models
    a = [np.where(rng.random(500) < 0.05, ~easy, easy) for _ in range(3)]
    b = [np.where(rng.random(500) < 0.05, ~easy, easy) & (rng.random(500) > 0.04) for _ in range(3)]
    ci = difference([_scored(x, s) for s, x in enumerate(a)], [_scored(x, s) for s, x in enumerate(b)])
    d = 100.0 * (np.stack(a).astype(float) - np.stack(b).astype(float))
    k, n = d.shape
    resid = d - d.mean(1, keepdims=True) - d.mean(0, keepdims=True) + d.mean()
    seed_var = d.mean(1).var(ddof=1) / k
    image_var = max(d.mean(0).var(ddof=1) / n - (resid ** 2).sum() / ((k - 1) * (n - 1)) / (k * n), 0)
    assert image_var > 0
    half = math.sqrt(stats.t.ppf(0.975, k - 1) ** 2 * seed_var + stats.norm.ppf(0.975) ** 2 * image_var)
    assert ci.images == 500 and ci.paired and "500 images" in ci.text()
    assert ci.low == pytest.approx(d.mean() - half) and ci.high == pytest.approx(d.mean() + half)
    independent = difference([RunValue(float(v), v.seed, v.se) for v in (_scored(x, s) for s, x in enumerate(a))],
                             [RunValue(float(v), v.seed, v.se) for v in (_scored(x, s) for s, x in enumerate(b))])
    assert ci.high - ci.low < 0.6 * (independent.high - independent.low)


def _method_by_image_draws(repetitions: int, images: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hits (points, 0 or 100; repetitions x 3 seeds x images) of two models of equal accuracy on
    shared test images: image i is right with probability sigmoid(1.3 + z_i + u_mi), z_i ~ N(0, 1.5^2)
    shared, u_mi ~ N(0, 0.7^2) each model's own and fixed across seeds (a method x image term: the
    two models are right on partly different images), the seeds independent coin flips."""
    rng = np.random.default_rng(seed)
    z = 1.3 + 1.5 * rng.standard_normal((repetitions, 1, images))
    a, b = (100.0 * (rng.random((repetitions, 3, images)) < 1 / (1 + np.exp(-z - 0.7 * rng.standard_normal(z.shape))))
            for _ in range(2))
    return a, b


def test_fidelity_of_verdicts_where_two_models_err_on_different_images():
    """2,000 simulated pairs of equal models with a method x image term, 3 seeds, 200 shared images:
    where nothing differs, the Welch-Satterthwaite rule before (the calibration benchmark's
    `before_verdicts`: its df grows when the 2-df seed part is small by chance) says "higher" or
    "lower" clearly more often than 5 % of the time, the report's comparison (`difference`,
    Banerjee's bound) at most 5 %; and Banerjee's interval holds the one before, so every verdict it
    draws, the rule before drew too."""
    from benchmarks.statistics_calibration import before_verdicts

    a, b = _method_by_image_draws(2000, 200, seed=0)
    before = before_verdicts(a - b)
    codes = {"higher": 1, "lower": -1, "cannot tell": 0}
    today = np.array([codes[difference([RunValue(x.mean(), s, 0.0, x.size, x) for s, x in enumerate(ra)],
                                       [RunValue(x.mean(), s, 0.0, x.size, x) for s, x in enumerate(rb)]).verdict]
                      for ra, rb in zip(a, b)])
    assert np.mean(before != 0) > 0.06 and np.mean(today != 0) <= 0.05, (np.mean(before != 0), np.mean(today != 0))
    assert np.all(before[today != 0] == today[today != 0])


def test_a_share_of_0_or_100_percent_keeps_the_uncertainty_of_its_images():
    """At 0 % or 100 % the binomial error is 0; the Agresti-Coull one is not, and it shrinks with n."""
    assert proportion_se(100.0, 50) > proportion_se(100.0, 5000) > 0
    assert proportion_se(0.0, 50) == pytest.approx(proportion_se(100.0, 50))
    assert proportion_se(100.0, 50) == pytest.approx(100 * math.sqrt((2 / 54) * (52 / 54) / 54))
    one = mean_interval([run_value({"metric": "accuracy", "value": 100.0, "n": 50, "seed": 0})])
    assert one.high - one.low > 1.0
