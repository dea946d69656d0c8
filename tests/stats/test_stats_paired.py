"""Paired comparison, McNemar and minimum detectable effect against scipy and statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.power import TTestPower

from evalsi.stats import Comparison, mcnemar, minimum_detectable_effect, paired_difference, tango_interval


def _pairs_from_table(both: int, a_only: int, b_only: int, neither: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([1] * both + [1] * a_only + [0] * b_only + [0] * neither, dtype=bool)
    b = np.array([1] * both + [0] * a_only + [1] * b_only + [0] * neither, dtype=bool)
    return a, b


# --- paired_difference --------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_paired_difference_matches_scipy(level: float) -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(0.6, 0.2, size=120)
    b = a + rng.normal(0.05, 0.1, size=120)
    d = b - a
    result = paired_difference(a, b, level=level)
    low, high = stats.t.interval(level, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    assert result.n_pairs == 120
    assert result.mean_a == pytest.approx(a.mean(), rel=1e-12)
    assert result.mean_b == pytest.approx(b.mean(), rel=1e-12)
    assert result.diff == pytest.approx(d.mean(), rel=1e-12)
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high), rel=1e-9)
    assert result.p_value == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-9)
    expected_mde = TTestPower().solve_power(nobs=120, alpha=1 - level, power=0.8) * np.std(d, ddof=1)
    assert result.mde == pytest.approx(expected_mde, rel=1e-5)
    assert result.mde == pytest.approx(minimum_detectable_effect(np.std(d, ddof=1), 120, 1 - level), rel=1e-9)
    assert result.method == "t" and result.level == level and result.mcnemar is None
    assert result.test == "paired-t" and result.verdict == "better"


def test_clustered_difference_matches_statsmodels() -> None:
    rng = np.random.default_rng(1)
    records = np.repeat(np.arange(40), 5)  # five trials of each record
    a = (rng.random(records.size) < 0.5).astype(float)
    b = (rng.random(records.size) < np.repeat(rng.random(40), 5)).astype(float)
    d = b - a
    fit = sm.OLS(d, np.ones(d.size)).fit(
        cov_type="cluster",
        cov_kwds={"groups": records, "use_correction": True, "df_correction": True},
        use_t=True,
    )
    result = paired_difference(a, b, clusters=records, level=0.95)
    assert (result.ci_low, result.ci_high) == pytest.approx(tuple(fit.conf_int(0.05)[0]), rel=1e-9)
    assert result.p_value == pytest.approx(fit.pvalues[0], rel=1e-9)
    assert result.method == "cluster-t" and result.test == "cluster-paired-t"
    # McNemar assumes independent pairs, which trials of one record are not.
    assert result.mcnemar is None
    se = fit.bse[0]
    assert result.mde == pytest.approx(minimum_detectable_effect(se * np.sqrt(40), 40, 0.05), rel=1e-12)


def test_singleton_clusters_match_unclustered() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=30), rng.normal(size=30)
    plain = paired_difference(a, b)
    clustered = paired_difference(a, b, clusters=np.arange(30))
    for field in ["diff", "ci_low", "ci_high", "p_value", "mde"]:
        assert getattr(clustered, field) == pytest.approx(getattr(plain, field), rel=1e-9)


def test_verdicts_and_higher_is_better() -> None:
    rng = np.random.default_rng(3)
    a = rng.normal(size=200)
    up = a + 0.5 + rng.normal(0, 0.1, size=200)
    down = a - 0.5 + rng.normal(0, 0.1, size=200)
    noise = a + rng.normal(0, 0.1, size=200)
    assert paired_difference(a, up).verdict == "better"
    assert paired_difference(a, down).verdict == "worse"
    assert paired_difference(a, noise).verdict == "no significant difference"
    assert paired_difference(a, up, higher_is_better=False).verdict == "worse"
    assert paired_difference(a, down, higher_is_better=False).verdict == "better"
    assert paired_difference(a, noise, higher_is_better=False).verdict == "no significant difference"


def test_pass_fail_pairs_get_mcnemar_with_tangos_interval() -> None:
    a, b = _pairs_from_table(both=50, a_only=4, b_only=15, neither=31)
    result = paired_difference(a, b)
    assert result.mcnemar == mcnemar(a, b)
    assert result.test == "mcnemar" and result.method == "tango"
    assert result.p_value == result.mcnemar.p_value
    assert (result.ci_low, result.ci_high) == tango_interval(4, 15, 100, 0.95)
    assert result.diff == pytest.approx(0.11, rel=1e-12)
    assert result.verdict == "better"


def test_numeric_scores_get_no_mcnemar() -> None:
    assert paired_difference([0.5, 1.0, 0.0], [1.0, 1.0, 0.2]).mcnemar is None


@pytest.mark.parametrize("n", [0, 1])
def test_fewer_than_two_pairs_is_insufficient(n: int) -> None:
    result = paired_difference([1.0] * n, [0.0] * n)
    assert result.n_pairs == n and result.verdict == "insufficient data"
    assert result.ci_low is None and result.ci_high is None and result.p_value is None
    assert result.mde is None and result.method is None
    if n == 0:
        assert result.mean_a is None and result.mean_b is None and result.diff is None
    else:
        assert (result.mean_a, result.mean_b, result.diff) == (1.0, 0.0, -1.0)


def test_single_cluster_is_insufficient() -> None:
    result = paired_difference([0, 1, 0], [1, 1, 1], clusters=["r1", "r1", "r1"])
    assert result.verdict == "insufficient data" and result.ci_low is None
    assert result.diff == pytest.approx(2 / 3)


def test_identical_runs_have_zero_width_interval() -> None:
    a = [0.2, 0.4, 0.9, 0.9]
    result = paired_difference(a, a)
    assert (result.diff, result.ci_low, result.ci_high, result.p_value, result.mde) == (0.0, 0.0, 0.0, 1.0, 0.0)
    assert result.verdict == "no significant difference"


def test_constant_nonzero_difference_is_decisive() -> None:
    result = paired_difference([0.0, 0.0, 0.0], [0.5, 0.5, 0.5])
    assert (result.ci_low, result.ci_high, result.p_value) == (0.5, 0.5, 0.0)
    assert result.verdict == "better"


def test_three_pass_fail_flips_are_not_decisive() -> None:
    # All three records flipped from fail to pass: McNemar's p is 0.083 and Tango's interval reaches below zero.
    result = paired_difference([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert result.test == "mcnemar" and result.p_value == pytest.approx(0.0832645, rel=1e-6)
    assert result.ci_low is not None and result.ci_low < 0.0 and result.ci_high == 1.0
    assert result.verdict == "no significant difference"


def test_power_is_validated_even_without_enough_data() -> None:
    with pytest.raises(ValueError, match="power"):
        paired_difference([], [], power=1.5)


def test_misaligned_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="aligned"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="one key per value"):
        paired_difference([1.0, 2.0], [1.0, 2.0], clusters=[1])


def test_comparison_to_dict_nests_mcnemar() -> None:
    a, b = _pairs_from_table(both=3, a_only=1, b_only=2, neither=4)
    result = paired_difference(a, b)
    as_dict = result.to_dict()
    assert isinstance(result, Comparison)
    assert as_dict["mcnemar"] == result.mcnemar.to_dict()
    assert set(as_dict) == {
        "n_pairs", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "p_value",
        "mcnemar", "mde", "verdict", "level", "method", "test",
    }  # fmt: skip


# --- McNemar ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_only", "b_only"),
    [(0, 1), (3, 3), (2, 9), (12, 12), (10, 14), (0, 24), (10, 15), (12, 13), (30, 45), (100, 60)],
)
def test_mcnemar_matches_statsmodels(a_only: int, b_only: int) -> None:
    both, neither = 17, 23
    a, b = _pairs_from_table(both, a_only, b_only, neither)
    expected = sm_mcnemar([[both, a_only], [b_only, neither]], exact=False, correction=False)
    result = mcnemar(a, b)
    assert (result.a_only, result.b_only) == (a_only, b_only)
    assert result.statistic == pytest.approx(float(expected.statistic), rel=1e-12)
    assert result.p_value == pytest.approx(float(expected.pvalue), rel=1e-12)


def test_mcnemar_without_discordant_pairs_finds_no_difference() -> None:
    a, b = _pairs_from_table(both=10, a_only=0, b_only=0, neither=5)
    result = mcnemar(a, b)
    assert (result.statistic, result.p_value) == (0.0, 1.0)


def test_mcnemar_accepts_zero_one_and_rejects_other_values() -> None:
    assert mcnemar([1, 0, 1], [1, 1, 0]) == mcnemar([True, False, True], [True, True, False])
    with pytest.raises(ValueError, match="pass/fail"):
        mcnemar([1, 0.5], [1, 0])
    with pytest.raises(ValueError, match="aligned"):
        mcnemar([1, 0], [1])


# --- minimum detectable effect ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "power"),
    [(4, 0.05, 0.8), (10, 0.01, 0.9), (30, 0.05, 0.95), (100, 0.1, 0.5), (1000, 0.01, 0.9)],
)
def test_mde_matches_statsmodels(n: int, alpha: float, power: float) -> None:
    sd = 0.37
    expected = TTestPower().solve_power(nobs=n, alpha=alpha, power=power, alternative="two-sided") * sd
    got = minimum_detectable_effect(sd, n, alpha, power)
    # statsmodels' own root finder stops at about 1e-6; the power check below is the tight one.
    assert got == pytest.approx(float(np.squeeze(expected)), rel=1e-5)
    reached = TTestPower().power(effect_size=got / sd, nobs=n, alpha=alpha, alternative="two-sided")
    assert reached == pytest.approx(power, rel=1e-9)


def test_mde_for_two_pairs_reaches_requested_power() -> None:
    # With one degree of freedom scipy's noncentral t cdf underflows to NaN far in the tail; check
    # against the power written as two upper tails, which stays finite.
    d = minimum_detectable_effect(1.0, 2, 0.05, 0.8)
    crit = stats.t.isf(0.025, 1)
    shift = d * np.sqrt(2)
    assert stats.nct.sf(crit, 1, shift) + stats.nct.sf(crit, 1, -shift) == pytest.approx(0.8, rel=1e-9)


def test_mde_scales_with_sd_and_shrinks_with_n() -> None:
    assert minimum_detectable_effect(2.0, 50) == pytest.approx(2 * minimum_detectable_effect(1.0, 50), rel=1e-12)
    assert minimum_detectable_effect(1.0, 400) < minimum_detectable_effect(1.0, 100)
    assert minimum_detectable_effect(0.0, 50) == 0.0


@pytest.mark.parametrize("n", [0, 1])
def test_mde_undefined_below_two_pairs(n: int) -> None:
    assert minimum_detectable_effect(1.0, n) is None


@pytest.mark.parametrize(
    ("sd", "alpha", "power"), [(-1.0, 0.05, 0.8), (float("nan"), 0.05, 0.8), (1.0, 0.0, 0.8), (1.0, 0.05, 0.05)]
)
def test_mde_rejects_bad_arguments(sd: float, alpha: float, power: float) -> None:
    with pytest.raises(ValueError):
        minimum_detectable_effect(sd, 10, alpha, power)
