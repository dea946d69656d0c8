"""One test per comparison: McNemar with Tango's interval, multiplicity adjustment and sample sizes, checked
against statsmodels, scipy and the definitions (not against our own numbers)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from evalsi.stats import (
    Comparison,
    adjust_p_values,
    mcnemar_sample_size,
    paired_difference,
    t_sample_size,
    tango_interval,
)
from evalsi.stats.paired_proportions import tango_statistic

TABLES = [(0, 5, 20), (4, 15, 100), (1, 7, 21), (16, 6, 161), (0, 0, 20), (3, 0, 3), (0, 20, 20), (9, 11, 40),
          (2, 2, 500), (40, 20, 160)]


def _restricted_q(a_only: int, b_only: int, n: int, diff: float) -> float:
    """The maximum-likelihood probability of an A-only pair when mean(B) - mean(A) = diff, found numerically."""
    rest = n - a_only - b_only

    def negative_log_likelihood(q: float) -> float:
        cells = ((q + diff, b_only), (q, a_only), (1.0 - 2.0 * q - diff, rest))
        return -sum(count * math.log(p) for p, count in cells if count)

    low, high = max(0.0, -diff) + 1e-13, (1.0 - diff) / 2.0 - 1e-13
    return float(optimize.minimize_scalar(negative_log_likelihood, bounds=(low, high), method="bounded",
                                          options={"xatol": 1e-13}).x)


@pytest.mark.parametrize(("a_only", "b_only", "n"), [t for t in TABLES if 0 < t[0] + t[1] < t[2]])
def test_tangos_statistic_uses_the_maximum_likelihood_under_the_null(a_only: int, b_only: int, n: int) -> None:
    for diff in (-0.3, -0.05, 0.0, 0.1, 0.25):
        if not -1 < diff < 1 or (diff > 0 and b_only == 0) or (diff < 0 and a_only == 0):
            continue
        q = _restricted_q(a_only, b_only, n, diff)
        expected = (b_only - a_only - n * diff) / math.sqrt(n * (2 * q + diff * (1 - diff)))
        assert tango_statistic(a_only, b_only, n, diff) == pytest.approx(expected, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize(("a_only", "b_only", "n"), TABLES)
@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_tangos_bounds_are_where_the_score_test_reaches_its_critical_value(
    a_only: int, b_only: int, n: int, level: float
) -> None:
    z = stats.norm.isf((1 - level) / 2)
    low, high = tango_interval(a_only, b_only, n, level)
    estimate = (b_only - a_only) / n
    assert -1.0 <= low <= estimate <= high <= 1.0
    if low > -1.0:
        assert tango_statistic(a_only, b_only, n, low) == pytest.approx(z, abs=1e-7)
    if high < 1.0:
        assert tango_statistic(a_only, b_only, n, high) == pytest.approx(-z, abs=1e-7)
    # At zero the statistic is McNemar's z, so the interval excludes zero exactly when McNemar's p < alpha.
    if a_only + b_only:
        p = sm_mcnemar([[n - a_only - b_only, a_only], [b_only, 0]], exact=False, correction=False).pvalue
        assert tango_statistic(a_only, b_only, n, 0.0) ** 2 == pytest.approx(
            (b_only - a_only) ** 2 / (a_only + b_only), rel=1e-12)
        assert (low > 0 or high < 0) == (p < 1 - level)


def test_the_issues_example_gets_one_verdict_from_one_test() -> None:
    # 20 pairs: A passes all, B fails 5. Before, the interval (paired t) said "worse" while the printed p (exact
    # McNemar, 0.062) said "no difference".
    result = paired_difference([1.0] * 20, [1.0] * 15 + [0.0] * 5)
    assert result.test == "mcnemar" and result.method == "tango"
    assert result.p_value == pytest.approx(
        sm_mcnemar([[15, 5], [0, 0]], exact=False, correction=False).pvalue, rel=1e-12)
    assert result.ci_high is not None and result.ci_high < 0 and result.p_value < 0.05
    assert result.verdict == "worse"


def _significant(result: Comparison) -> bool:
    return result.verdict in ("better", "worse")


@pytest.mark.parametrize("seed", range(6))
def test_verdict_p_value_and_interval_agree_on_generated_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(150):
        n = int(rng.integers(2, 80))
        level = float(rng.choice([0.9, 0.95, 0.99]))
        kind = rng.integers(3)
        a_pass = rng.random() * 0.8 + 0.1
        a = (rng.random(n) < a_pass).astype(float)
        if kind == 0:  # pass/fail, B flips some of A's outcomes
            b = np.where(rng.random(n) < rng.random() * 0.4, 1.0 - a, a)
            result = paired_difference(a, b, level=level)
        elif kind == 1:  # numbers
            a = rng.normal(0.5, 0.2, n)
            b = a + rng.normal(rng.normal(0, 0.05), 0.2, n)
            result = paired_difference(a, b, level=level)
        else:  # pass/fail over trials: clustered
            records = np.repeat(np.arange(max(2, n // 3)), 3)
            a = (rng.random(records.size) < a_pass).astype(float)
            b = (rng.random(records.size) < a_pass + rng.normal(0, 0.15)).astype(float)
            result = paired_difference(a, b, clusters=records, level=level)
        assert result.p_value is not None and result.ci_low is not None and result.ci_high is not None
        excludes_zero = result.ci_low > 0 or result.ci_high < 0
        assert _significant(result) == (result.p_value < 1 - level) == excludes_zero, result


def test_holm_and_bh_match_statsmodels() -> None:
    rng = np.random.default_rng(11)
    for _ in range(40):  # statsmodels' holm takes ~90 ms a call
        p = rng.random(int(rng.integers(1, 15))) ** 3
        if p.size > 2:
            p[1] = p[0]  # ties
        assert adjust_p_values(p, "holm") == pytest.approx(multipletests(p, method="holm")[1], abs=1e-15)
        assert adjust_p_values(p, "bh") == pytest.approx(multipletests(p, method="fdr_bh")[1], abs=1e-15)
        assert adjust_p_values(p, "none") == pytest.approx(list(p), abs=0)


def test_adjustment_refuses_what_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="accepted: holm, bh, none"):
        adjust_p_values([0.1], "bonferroni")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        adjust_p_values([1.5], "holm")


@pytest.mark.parametrize(("diff", "sd"), [(0.05, 0.3), (0.1, 0.2), (0.5, 1.0), (1.0, 0.2), (0.01, 0.5)])
def test_t_sample_size_is_statsmodels_rounded_up(diff: float, sd: float) -> None:
    expected = TTestPower().solve_power(effect_size=diff / sd, alpha=0.05, power=0.8)
    assert t_sample_size(diff, sd, 0.05, 0.8) == max(2, math.ceil(expected))


@pytest.mark.parametrize(("diff", "discordance"), [(0.1, 0.2), (-0.05, 0.15), (0.2, 0.3)])
def test_mcnemar_sample_size_reaches_its_power_in_simulation(diff: float, discordance: float) -> None:
    n = mcnemar_sample_size(diff, discordance, alpha=0.05, power=0.8)
    rng = np.random.default_rng(5)
    b_only_p, a_only_p = (discordance + diff) / 2, (discordance - diff) / 2
    counts = rng.multinomial(n, [b_only_p, a_only_p, 1 - discordance], size=4000)
    hits = 0
    for b_only, a_only, _ in counts:
        low, high = tango_interval(int(a_only), int(b_only), n, 0.95)
        hits += low > 0 or high < 0
    assert 0.76 <= hits / 4000 <= 0.86, (n, hits / 4000)
