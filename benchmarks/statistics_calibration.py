"""Are the report's verdicts calibrated? Two simulated models scored on one shared test set over 3
seeds, judged by the report's own comparison (`core.statistics.difference` on rows written by
`training.evaluation.scored_share`), in several scenarios of how images and models relate: the
false-positive rate where nothing differs and the power at Ge et al.'s published effect (MoCo-v2
77.88 ± 0.28 % → with patch negatives 79.35 ± 0.12 %, 3 seeds, ImageNet-100's 5,000 val images),
at IN-9's 4,050 and the demo's 450 test images.

    python -m benchmarks.statistics_calibration [--repetitions 2000] [--images 4050 450] [--seed 0]

The simulation: each repetition draws its N test images from a population. Model m's run with
seed s gets image i right with probability sigmoid(mu + b_m + z_i + u_mi + e_ms), independently per
run and image: z_i ~ N(0, spread^2) is shared by both models (an image hard for one is hard for the
other), u_mi ~ N(0, interaction^2) is model m's own and fixed across its seeds (a method x image
term: two models of equal accuracy are right on partly different images), e_ms ~ N(0, tau_m^2) a
seed offset. mu and b_m give the published means; tau_m is either given by the scenario or fitted
to the published spread over seeds, as far as the per-image coin flips leave room (their own spread
is about 0.2 points at 4,050 images with spread 20, above MoCo-v2 + patch's 0.12, and above both
published spreads at 450 images or with a moderate spread). Under "no difference" both models are
MoCo-v2; under "effect" the second is MoCo-v2 + patch. A verdict is a false positive when it says
"higher" or "lower" under no difference, and a detection when it says "higher" under the effect.

Prints, per scenario and test-set size, the rates of today's comparison (Banerjee's bound) and of
the rule before it (Welch-Satterthwaite degrees of freedom, `before_verdicts`) on the same draws,
and the share of the difference's estimated variance that comes from the test images; then one
line `fpr=<percent> power=<percent>` for today's rule: the worst false-positive rate over every
scenario and size, and the worst power over the cells where the simulated models have Ge et al.'s
published spreads (MoCo-v2's 0.28 points fitted, not exceeded by the coin flips alone; elsewhere the
models are noisier than the published ones and the effect is not theirs).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special, stats

from debias_workbench.core.statistics import difference, run_value
from debias_workbench.training.evaluation import scored_share

#: name: (spread of the shared per-image logits, sd of the method x image term, seed offset tau in
#: logits or None: fitted to the published spreads over seeds)
SCENARIOS: dict[str, tuple[float, float, float | None]] = {
    "shared images (spread 20)": (20.0, 0.0, None),
    "spread 20, method x image 2": (20.0, 2.0, None),
    "spread 1.5": (1.5, 0.0, None),
    "spread 1.5, method x image 0.5": (1.5, 0.5, None),
    "spread 1.5, method x image 1, seed 0.05": (1.5, 1.0, 0.05),
}
#: (mean accuracy %, std over seeds in points) as published by Ge et al. (ImageNet-100 linear probe)
MOCO_V2 = (77.88, 0.28)
MOCO_V2_PATCH = (79.35, 0.12)
SEEDS = 3
CHUNK = 100                                      # repetitions drawn at once

_GRID = np.linspace(-8.0, 8.0, 4001)            # standard normal quadrature for the calibration
_WEIGHTS = np.exp(-_GRID ** 2 / 2) / np.exp(-_GRID ** 2 / 2).sum()


def _accuracy(logit: float, sd: float) -> float:
    """E[sigmoid(x)] for x ~ N(logit, sd^2)."""
    return float((_WEIGHTS * special.expit(logit + sd * _GRID)).sum())


def _solve(target: float, sd: float) -> float:
    """The logit with _accuracy(logit, sd) = target (bisection)."""
    low, high = -5 * sd - 10, 5 * sd + 10
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if _accuracy(mid, sd) < target else (low, mid)
    return (low + high) / 2


def calibrate(spread: float, interaction: float, tau: float | None,
              images: int) -> tuple[dict[str, tuple[float, float]], bool]:
    """({model: (logit mu + b, seed offset tau)}, whether MoCo-v2's published spread over seeds was
    fitted), for the published means; z + u has the sd sqrt(spread^2 + interaction^2)."""
    sd = float(np.hypot(spread, interaction))
    models, fits = {}, True
    for name, (mean, std) in (("moco_v2", MOCO_V2), ("moco_v2_patch", MOCO_V2_PATCH)):
        logit = _solve(mean / 100, sd)
        p = special.expit(logit + sd * _GRID)
        slope = float((_WEIGHTS * p * (1 - p)).sum())          # d accuracy / d offset
        coin = 100 * np.sqrt(slope / images)                    # spread of the per-image coin flips alone
        fitted = np.sqrt(max(std ** 2 - coin ** 2, 0.0)) / (100 * slope)
        models[name] = (logit, float(fitted if tau is None else tau))
        fits = fits and (name != "moco_v2" or (tau is None and coin < std))
    return models, fits


def _hits(rng: np.random.Generator, z: np.ndarray, interaction: float, logit: float, tau: float) -> np.ndarray:
    """One model's SEEDS runs (repetitions x SEEDS x images, bool) on test images of shared logits z."""
    u = interaction * rng.standard_normal(z.shape, np.float32)           # fixed across the seeds
    e = tau * rng.standard_normal((z.shape[0], SEEDS, 1), np.float32)
    return rng.random((z.shape[0], SEEDS, z.shape[2]), np.float32) < special.expit(np.float32(logit) + z + u + e)


def parts(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, seed part, image part) of per-seed, per-image differences d (repetitions x k x N):
    the crossed two-way split of `core.statistics` (var(seed means) / k; var(image means) / N -
    MS_residual / (k N), at least 0)."""
    _, k, n = d.shape
    seed_means, image_means = d.mean(2), d.mean(1)
    resid = d - seed_means[:, :, None] - image_means[:, None, :] + d.mean((1, 2))[:, None, None]
    ms_residual = (resid ** 2).sum((1, 2)) / ((k - 1) * (n - 1))
    image_var = np.maximum(image_means.var(1, ddof=1) / n - ms_residual / (k * n), 0.0)
    return d.mean((1, 2)), seed_means.var(1, ddof=1) / k, image_var


def before_verdicts(d: np.ndarray) -> np.ndarray:
    """+1 / -1 / 0 ("higher" / "lower" / "cannot tell") of the rule before Banerjee's bound on
    differences d (repetitions x k x N): estimate +- t_df sqrt(v_seed + v_image), with the
    Welch-Satterthwaite df = (v_seed + v_image)^2 (k - 1) / v_seed^2."""
    estimate, seed_var, image_var = parts(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (seed_var + image_var) ** 2 * (d.shape[1] - 1) / seed_var ** 2
    half = stats.t.ppf(0.975, df) * np.sqrt(seed_var + image_var)
    return np.where(estimate > half, 1, np.where(estimate < -half, -1, 0))


def _today(a: np.ndarray, b: np.ndarray) -> int:
    """+1 / -1 / 0 of the report's comparison of runs b against runs a (SEEDS x images, bool each)."""
    rows = [[run_value({"metric": "accuracy", "seed": s, **scored_share(x)}) for s, x in enumerate(runs)]
            for runs in (b, a)]
    return {"higher": 1, "lower": -1}.get(difference(*rows).verdict, 0)


def simulate(scenario: tuple[float, float, float | None], images: int, repetitions: int,
             rng: np.random.Generator) -> dict[str, float]:
    """{"fpr", "power"} of today's rule and the one before (`*_before`), in %, the image share of
    the estimated variance under no difference ("image share", %) and whether Ge et al.'s spreads
    were fitted ("fits": 1 or 0)."""
    spread, interaction, tau = scenario
    models, fits = calibrate(spread, interaction, tau, images)
    counts = dict.fromkeys(("fpr", "power", "fpr_before", "power_before"), 0)
    seed_sum = image_sum = 0.0
    for start in range(0, repetitions, CHUNK):
        size = min(CHUNK, repetitions - start)
        for hypothesis, second, wanted in (("fpr", "moco_v2", (1, -1)), ("power", "moco_v2_patch", (1,))):
            z = spread * rng.standard_normal((size, 1, images), np.float32)
            a = _hits(rng, z, interaction, *models["moco_v2"])
            b = _hits(rng, z, interaction, *models[second])
            counts[hypothesis] += sum(_today(x, y) in wanted for x, y in zip(a, b))
            d = 100.0 * (b.astype(np.float32) - a.astype(np.float32))
            counts[hypothesis + "_before"] += int(np.isin(before_verdicts(d), wanted).sum())
            if hypothesis == "fpr":
                _, seed_var, image_var = parts(d)
                seed_sum, image_sum = seed_sum + seed_var.sum(), image_sum + image_var.sum()
    rates = {k: 100.0 * v / repetitions for k, v in counts.items()}
    return {**rates, "image share": float(100.0 * image_sum / (seed_sum + image_sum)), "fits": float(fits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=2000)
    parser.add_argument("--images", type=int, nargs="+", default=[4050, 450])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"{args.repetitions} repetitions of {SEEDS} seeds x 2 models on shared test images; effect: "
          f"{MOCO_V2} -> {MOCO_V2_PATCH} (Ge et al.); false positives and power in %, today (Banerjee's bound) "
          f"/ before (Welch-Satterthwaite); * power at Ge et al.'s spreads")
    print(f"{'scenario':42s} {'images':>6s} {'image share':>11s} {'false positives':>16s} {'power':>14s}")
    fpr, power = [], []
    for name, scenario in SCENARIOS.items():
        for images in args.images:
            r = simulate(scenario, images, args.repetitions, rng)
            mark = "*" if r["fits"] else " "
            print(f"{name:42s} {images:6d} {r['image share']:10.0f}% {r['fpr']:7.1f} / {r['fpr_before']:5.1f} "
                  f"{r['power']:5.1f} / {r['power_before']:5.1f}{mark}")
            fpr.append(r["fpr"])
            power += [r["power"]] if r["fits"] else []
    print(f"fpr={max(fpr):.1f} power={min(power, default=float('nan')):.1f}")


if __name__ == "__main__":
    main()
