"""Are the report's verdicts calibrated? Two simulated models scored on one shared test set over 3
seeds, judged by the report's own comparison (`core.statistics.difference` on rows written by
`training.evaluation.scored_share`): the false-positive rate where nothing differs and the power
at Ge et al.'s published effect (MoCo-v2 77.88 ± 0.28 % → with patch negatives 79.35 ± 0.12 %,
3 seeds, ImageNet-100's 5,000 val images).

    python -m benchmarks.statistics_calibration [--repetitions 2000] [--images 5000] [--seed 0]

The simulation: each repetition draws its N test images from a population, image i with a logit
z_i ~ N(mu, SPREAD^2) shared by both models (an image hard for one is hard for the other), and
each (model, seed) an offset e ~ N(b_model, tau_model^2); image i is right with probability
sigmoid(z_i + e), independently per model and seed. SPREAD is wide (most images are right or
wrong for every seed, and seeds disagree on about 3 % of them); mu and b give the published means
and tau the published spread over seeds, as far as the per-image coin flips leave room (their
own spread is about 0.17 points at 5,000 images, above MoCo-v2 + patch's 0.12). Under "no
difference" both models are MoCo-v2; under "effect" the second is MoCo-v2 + patch. A verdict is a
false positive when it says "higher" or "lower" under no difference, and a detection when it says
"higher" under the effect.

Prints the rates of today's comparison (paired over seeds and images) and of the earlier rule
(each model's test-image error added as if the two were independent) on the same draws, then
one line `fpr=<percent> power=<percent>` for today's.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special

from debias_workbench.core.statistics import RunValue, difference, run_value
from debias_workbench.training.evaluation import scored_share

#: standard deviation of the per-image logits: seeds disagree on ~3 % of images
SPREAD = 20.0
#: (mean accuracy %, std over seeds in points) as published by Ge et al. (ImageNet-100 linear probe)
MOCO_V2 = (77.88, 0.28)
MOCO_V2_PATCH = (79.35, 0.12)
SEEDS = 3

_GRID = np.linspace(-8.0, 8.0, 4001)            # standard normal quadrature for the calibration
_WEIGHTS = np.exp(-_GRID ** 2 / 2) / np.exp(-_GRID ** 2 / 2).sum()


def _accuracy(mu: float) -> float:
    """E[sigmoid(z)] for z ~ N(mu, SPREAD^2)."""
    return float((_WEIGHTS * special.expit(mu + SPREAD * _GRID)).sum())


def _solve(target: float) -> float:
    """mu with _accuracy(mu) = target (bisection)."""
    low, high = -5 * SPREAD, 5 * SPREAD
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if _accuracy(mid) < target else (low, mid)
    return (low + high) / 2


def calibrate(images: int) -> tuple[float, dict[str, tuple[float, float]]]:
    """(mu of MoCo-v2, {model: (logit offset b, tau)}) matching the published means and spreads."""
    mu = _solve(MOCO_V2[0] / 100)
    models = {}
    for name, (mean, std) in (("moco_v2", MOCO_V2), ("moco_v2_patch", MOCO_V2_PATCH)):
        b = _solve(mean / 100) - mu
        p = special.expit(mu + b + SPREAD * _GRID)
        slope = float((_WEIGHTS * p * (1 - p)).sum())          # d accuracy / d offset
        coin = 100 * np.sqrt(slope / images)                    # spread of the per-image coin flips alone
        tau = np.sqrt(max(std ** 2 - coin ** 2, 0.0)) / (100 * slope)
        models[name] = (b, float(tau))
    return mu, models


def _runs(rng: np.random.Generator, z: np.ndarray, b: float, tau: float) -> list[RunValue]:
    """One model's SEEDS runs on the test images of logits z, as the report reads them."""
    out = []
    for seed in range(SEEDS):
        correct = rng.random(z.size) < special.expit(z + rng.normal(b, tau))
        out.append(run_value({"metric": "accuracy", "seed": seed, **scored_share(correct)}))
    return out


def _independent(values: list[RunValue]) -> list[RunValue]:
    """The same runs without their per-image values: the earlier rule's comparison."""
    return [RunValue(float(v), v.seed, v.se, v.n) for v in values]


def simulate(repetitions: int, images: int, seed: int) -> dict[str, dict[str, float]]:
    """{rule: {"fpr": %, "power": %}} over `repetitions` draws under each hypothesis."""
    mu, models = calibrate(images)
    rng = np.random.default_rng(seed)
    counts = {rule: {"fpr": 0, "power": 0} for rule in ("paired over seeds and images", "independent image errors")}
    for _ in range(repetitions):
        for hypothesis, second in (("fpr", "moco_v2"), ("power", "moco_v2_patch")):
            z = mu + SPREAD * rng.standard_normal(images)
            a = _runs(rng, z, *models["moco_v2"])
            b = _runs(rng, z, *models[second])
            for rule, (x, y) in (("paired over seeds and images", (b, a)),
                                 ("independent image errors", (_independent(b), _independent(a)))):
                verdict = difference(x, y).verdict
                counts[rule][hypothesis] += verdict != "cannot tell" if hypothesis == "fpr" else verdict == "higher"
    return {rule: {k: 100.0 * v / repetitions for k, v in c.items()} for rule, c in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=2000)
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rates = simulate(args.repetitions, args.images, args.seed)
    print(f"{args.repetitions} repetitions of {SEEDS} seeds x 2 models on {args.images:,} shared test images; "
          f"effect: {MOCO_V2} -> {MOCO_V2_PATCH} (Ge et al.)")
    for rule, r in rates.items():
        print(f"{rule:32s} false positives {r['fpr']:5.1f} %   power {r['power']:5.1f} %")
    today = rates["paired over seeds and images"]
    print(f"fpr={today['fpr']:.1f} power={today['power']:.1f}")


if __name__ == "__main__":
    main()
