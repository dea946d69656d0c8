"""pass@k and pass^k against exact binomial ratios, hand examples and their t-interval summaries."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special
from statsmodels.stats.proportion import proportion_confint

from evalsi.stats import (
    pass_at_k,
    pass_at_k_array,
    pass_hat_k,
    pass_hat_k_array,
    summarize_pass_at_k,
    summarize_pass_hat_k,
)

GRID = [(n, c, k) for n in range(1, 16) for c in range(n + 1) for k in range(1, n + 1)]


def _exact_pass_at_k(n: int, c: int, k: int) -> float:
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


def _exact_pass_hat_k(n: int, c: int, k: int) -> float:
    return float(Fraction(math.comb(c, k), math.comb(n, k)))


def _chen_reference(n: int, c: int, k: int) -> float:
    """The estimator as printed in Chen et al. (2021), figure 3."""
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def test_pass_at_k_matches_exact_binomials() -> None:
    for n, c, k in GRID:
        assert pass_at_k(n, c, k) == pytest.approx(_exact_pass_at_k(n, c, k), rel=1e-12, abs=1e-15)


def test_pass_at_k_matches_chen_reference_and_scipy_comb() -> None:
    for n, c, k in GRID:
        expected = 1.0 - special.comb(n - c, k) / special.comb(n, k)
        assert pass_at_k(n, c, k) == pytest.approx(_chen_reference(n, c, k), rel=1e-12, abs=1e-15)
        assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_pass_hat_k_matches_exact_binomials_and_scipy_comb() -> None:
    for n, c, k in GRID:
        expected = special.comb(c, k) / special.comb(n, k)
        assert pass_hat_k(n, c, k) == pytest.approx(_exact_pass_hat_k(n, c, k), rel=1e-12, abs=1e-15)
        assert pass_hat_k(n, c, k) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    ("n", "c", "k", "at_k", "hat_k"),
    [
        (10, 3, 1, 0.3, 0.3),  # k=1: both are the plain success rate
        (4, 2, 2, 5 / 6, 1 / 6),  # 1 - C(2,2)/C(4,2); C(2,2)/C(4,2)
        (10, 5, 2, 1 - 20 / 90, 20 / 90),
        (10, 5, 6, 1.0, 0.0),  # fewer failures than k: some draw must pass; fewer successes: none all-pass
        (5, 0, 3, 0.0, 0.0),
        (5, 5, 3, 1.0, 1.0),
        (1, 1, 1, 1.0, 1.0),
    ],
)
def test_hand_examples(n: int, c: int, k: int, at_k: float, hat_k: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at_k, rel=1e-12, abs=1e-15)
    assert pass_hat_k(n, c, k) == pytest.approx(hat_k, rel=1e-12, abs=1e-15)


def test_large_n_is_numerically_stable() -> None:
    # The binomials here have hundreds of digits; the product form never forms them.
    for n, c, k in [(10_000, 1, 100), (10_000, 9_990, 100), (2_000, 1_000, 500), (500, 3, 250)]:
        assert pass_at_k(n, c, k) == pytest.approx(_exact_pass_at_k(n, c, k), rel=1e-10, abs=1e-15)
        assert pass_hat_k(n, c, k) == pytest.approx(_exact_pass_hat_k(n, c, k), rel=1e-10, abs=1e-300)


def test_k_greater_than_n_raises_naming_k_and_n() -> None:
    with pytest.raises(ValueError, match=r"k=5 exceeds n=3"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError, match=r"k=5 exceeds n=3"):
        pass_hat_k(3, 1, 5)
    with pytest.raises(ValueError, match=r"k=4 exceeds n=2 trials for record 1"):
        pass_at_k_array([5, 2, 8], [1, 1, 1], 4)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, -1), (5, 2, 1.5), (5, 2, True)])
def test_invalid_counts_are_rejected(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_non_integer_counts_are_rejected_but_integral_floats_pass() -> None:
    with pytest.raises(ValueError, match="integer"):
        pass_at_k_array([5.5], [1], 1)
    with pytest.raises(ValueError, match="integer"):
        pass_at_k_array([5], [float("nan")], 1)
    with pytest.raises(ValueError, match="integer"):
        pass_at_k_array([True], [True], 1)
    assert pass_at_k_array(np.array([4.0]), np.array([2.0]), 2) == pytest.approx([5 / 6])


def test_arrays_must_be_aligned() -> None:
    with pytest.raises(ValueError, match="aligned"):
        pass_hat_k_array([5, 5], [1], 1)


def test_array_versions_match_scalar_versions() -> None:
    rng = np.random.default_rng(0)
    n = rng.integers(5, 40, size=500)
    c = rng.integers(0, n + 1)
    k = 5
    at_k = pass_at_k_array(n, c, k)
    hat_k = pass_hat_k_array(n, c, k)
    assert at_k.shape == hat_k.shape == (500,)
    assert at_k.tolist() == [pass_at_k(int(a), int(b), k) for a, b in zip(n, c, strict=True)]
    assert hat_k.tolist() == [pass_hat_k(int(a), int(b), k) for a, b in zip(n, c, strict=True)]


def test_empty_arrays() -> None:
    assert pass_at_k_array([], [], 3).shape == (0,)
    summary = summarize_pass_at_k([], [], 3)
    assert summary.n == 0 and summary.mean is None and summary.ci_low is None


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_summaries_are_clopper_pearson_over_the_records(level: float) -> None:
    rng = np.random.default_rng(1)
    n = np.full(80, 10)
    c = rng.binomial(10, rng.random(80))
    for summarize_fn, per_record in [
        (summarize_pass_at_k, pass_at_k_array(n, c, 3)),
        (summarize_pass_hat_k, pass_hat_k_array(n, c, 3)),
    ]:
        summary = summarize_fn(n, c, 3, level=level)
        expected = proportion_confint(per_record.mean() * 80, 80, alpha=1 - level, method="beta")
        assert summary.n == 80
        assert summary.mean == pytest.approx(per_record.mean(), rel=1e-12)
        assert summary.std == pytest.approx(np.std(per_record, ddof=1), rel=1e-12)
        assert (summary.ci_low, summary.ci_high) == pytest.approx(expected, rel=1e-9)
        assert summary.level == level and summary.method == "korn-graubard"


def test_an_all_pass_summary_is_not_certain() -> None:
    all_pass = summarize_pass_hat_k([5, 5, 5], [5, 5, 5], 2)
    assert (all_pass.mean, all_pass.ci_high) == (1.0, 1.0)
    assert all_pass.ci_low == pytest.approx(0.025 ** (1 / 3), rel=1e-12)  # Clopper-Pearson, 3 of 3
    mixed = summarize_pass_at_k([10, 10, 10], [10, 10, 1], 1)  # estimates 1, 1, 0.1
    assert 0.0 < mixed.ci_low < 0.7 < mixed.ci_high <= 1.0


def test_summary_of_one_record_is_clopper_pearson_of_one() -> None:
    summary = summarize_pass_at_k([10], [4], 2)
    assert summary.n == 1 and summary.mean == pytest.approx(_exact_pass_at_k(10, 4, 2))
    assert summary.std is None and summary.method == "korn-graubard"
    expected = proportion_confint(summary.mean, 1, alpha=0.05, method="beta")
    assert (summary.ci_low, summary.ci_high) == pytest.approx(expected, rel=1e-9)


