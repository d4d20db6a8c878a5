"""HSIC (ReBias Eq. A3): the estimator against the formula written as loops, and its behaviour
on independent and dependent samples."""

import math

import pytest
import torch

from debias_workbench.training.losses import hsic


def _hsic_unbiased_by_loops(x, y, sx, sy):
    """Song et al. (2012) Theorem 2 with explicit sums over distinct indices."""
    m = len(x)
    k = [[0.0 if i == j else math.exp(-float(((x[i] - x[j]) ** 2).sum()) / (2 * sx * sx)) for j in range(m)]
         for i in range(m)]
    l = [[0.0 if i == j else math.exp(-float(((y[i] - y[j]) ** 2).sum()) / (2 * sy * sy)) for j in range(m)]
         for i in range(m)]
    trace = sum(k[i][j] * l[j][i] for i in range(m) for j in range(m))
    ksum, lsum = sum(map(sum, k)), sum(map(sum, l))
    cross = sum(k[i][j] * l[j][q] for i in range(m) for j in range(m) for q in range(m))
    return (trace + ksum * lsum / ((m - 1) * (m - 2)) - 2.0 / (m - 2) * cross) / (m * (m - 3))


def _hsic_biased_by_loops(x, y, sx, sy):
    m = len(x)
    k = [[math.exp(-float(((x[i] - x[j]) ** 2).sum()) / (2 * sx * sx)) for j in range(m)] for i in range(m)]
    l = [[math.exp(-float(((y[i] - y[j]) ** 2).sum()) / (2 * sy * sy)) for j in range(m)] for i in range(m)]
    kc = [[k[i][j] - sum(k[i]) / m - sum(k[q][j] for q in range(m)) / m + sum(map(sum, k)) / m ** 2
           for j in range(m)] for i in range(m)]
    return sum(kc[i][j] * l[j][i] for i in range(m) for j in range(m)) / (m - 1) ** 2


@pytest.mark.parametrize("sx, sy", [(1.0, 1.0), (0.7, 2.5)])
def test_hsic_matches_the_formula_written_as_loops(sx, sy):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(9, 3, generator=g, dtype=torch.float64) * 0.6
    y = x[:, :2] ** 2 + 0.3 * torch.randn(9, 2, generator=g, dtype=torch.float64)
    assert hsic(x, y, sx, sy).item() == pytest.approx(_hsic_unbiased_by_loops(x, y, sx, sy), abs=1e-6)
    assert hsic(x, y, sx, sy, "biased").item() == pytest.approx(_hsic_biased_by_loops(x, y, sx, sy), abs=1e-6)


def test_hsic_is_near_zero_for_independent_and_positive_for_dependent_samples():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(256, 4, generator=g), torch.randn(256, 4, generator=g)
    dependent = x.abs() + 0.1 * torch.randn(256, 4, generator=g)  # uncorrelated with x, yet dependent
    independent, dep = hsic(x, y, None, None).item(), hsic(x, dependent, None, None).item()
    assert abs(independent) < 2e-4 and dep > 20 * max(abs(independent), 1e-5)
    assert hsic(x, x, None, None).item() > dep


def test_hsic_rejects_too_few_samples_and_unknown_estimators():
    x = torch.randn(3, 2)
    with pytest.raises(ValueError, match="at least 4"):
        hsic(x, x)
    with pytest.raises(ValueError, match="estimator"):
        hsic(torch.randn(5, 2), torch.randn(5, 2), estimator="fast")
