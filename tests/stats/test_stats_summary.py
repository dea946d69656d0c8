"""summarize() method choice, figures and edge cases; label_counts shares and intervals."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from evalsi.stats import Aggregate, LabelShare, label_counts, percentile_bootstrap, summarize


def _statsmodels_cluster(y: np.ndarray, groups: np.ndarray, level: float) -> tuple[float, float]:
    codes = np.unique(groups, return_inverse=True)[1]
    fit = sm.OLS(y, np.ones(y.size)).fit(
        cov_type="cluster",
        cov_kwds={"groups": codes, "use_correction": True, "df_correction": True},
        use_t=True,
    )
    low, high = fit.conf_int(alpha=1 - level)[0]
    return float(low), float(high)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_numbers_use_student_t(level: float) -> None:
    x = np.random.default_rng(0).gamma(2.0, size=150)
    agg = summarize(x, binary=False, level=level)
    low, high = stats.t.interval(level, 149, loc=x.mean(), scale=stats.sem(x))
    assert agg.method == "t" and agg.n == 150 and agg.level == level
    assert agg.mean == pytest.approx(x.mean(), rel=1e-12)
    assert agg.std == pytest.approx(np.std(x, ddof=1), rel=1e-12)
    assert (agg.ci_low, agg.ci_high) == pytest.approx((low, high), rel=1e-9)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_binary_uses_wilson(level: float) -> None:
    x = np.random.default_rng(1).random(90) < 0.35
    agg = summarize(x, binary=True, level=level)
    expected = proportion_confint(int(x.sum()), 90, alpha=1 - level, method="wilson")
    assert agg.method == "wilson"
    assert agg.mean == pytest.approx(x.mean(), rel=1e-12)
    assert agg.std == pytest.approx(np.std(x.astype(float), ddof=1), rel=1e-12)
    assert (agg.ci_low, agg.ci_high) == pytest.approx(expected, rel=1e-12)


def test_clustered_numbers_use_cluster_robust_t() -> None:
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(25), 4)
    x = rng.normal(size=100)
    agg = summarize(x, binary=False, clusters=groups)
    assert agg.method == "cluster-t"
    assert (agg.ci_low, agg.ci_high) == pytest.approx(_statsmodels_cluster(x, groups, 0.95), rel=1e-9)


@pytest.mark.parametrize("sizes", [[4] * 25, [1, 2, 3, 4, 5, 6, 7, 8] * 3])
def test_clustered_pass_fail_uses_clopper_pearson_at_the_effective_size(sizes: list[int]) -> None:
    # Korn and Graubard (1998): Clopper-Pearson at n_eff = p(1-p) / V_CR * (z / t_{G-1})^2, within [G_eff, N].
    rng = np.random.default_rng(2)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    x = (rng.random(groups.size) < np.repeat(rng.beta(2, 2, len(sizes)), sizes)).astype(float)
    agg = summarize(x, binary=True, clusters=groups)
    fit = sm.OLS(x, np.ones(x.size)).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": True,
                                                                        "df_correction": True}, use_t=True)
    p, g = x.mean(), len(sizes)
    n_eff = p * (1 - p) / fit.bse[0] ** 2 * (stats.norm.isf(0.025) / stats.t.isf(0.025, g - 1)) ** 2
    n_eff = min(max(n_eff, x.size**2 / np.sum(np.square(sizes))), x.size)
    expected = proportion_confint(p * n_eff, n_eff, alpha=0.05, method="beta")
    assert agg.method == "korn-graubard"
    assert (agg.ci_low, agg.ci_high) == pytest.approx(expected, rel=1e-9)


def test_an_all_pass_clustered_result_is_not_certain() -> None:
    # Every trial of every record passed: the interval is Clopper-Pearson's for 3 of 3 independent units,
    # not [1, 1] (the cluster-robust t interval collapsed there).
    agg = summarize([1, 1, 1, 1, 1, 1], binary=True, clusters=[0, 0, 1, 1, 2, 2])
    assert agg.method == "korn-graubard" and agg.ci_high == 1.0
    assert agg.ci_low == pytest.approx(proportion_confint(3, 3, alpha=0.05, method="beta")[0], rel=1e-12)


def test_binary_cluster_interval_stays_within_the_unit_interval() -> None:
    agg = summarize([1, 1, 1, 1, 1, 0], binary=True, clusters=[0, 0, 1, 1, 2, 2])
    assert agg.method == "korn-graubard" and 0.0 < agg.ci_low < 5 / 6 < agg.ci_high <= 1.0


@pytest.mark.parametrize("clusters", [None, np.repeat(np.arange(20), 3)])
def test_bootstrap_on_request(clusters: np.ndarray | None) -> None:
    x = np.random.default_rng(3).normal(size=60)
    agg = summarize(x, binary=False, method="bootstrap", clusters=clusters, seed=11, resamples=300)
    expected = percentile_bootstrap(x, 0.95, seed=11, resamples=300, clusters=clusters)
    assert (agg.ci_low, agg.ci_high) == expected
    assert agg.method == ("bootstrap" if clusters is None else "bootstrap-cluster")


def test_empty_input() -> None:
    for binary in [True, False]:
        assert summarize([], binary=binary) == Aggregate(0, None, None, None, None, 0.95, None)


def test_single_number_has_mean_only() -> None:
    assert summarize([3.5], binary=False) == Aggregate(1, 3.5, None, None, None, 0.95, None)
    assert summarize([3.5], binary=False, method="bootstrap").method is None


def test_single_binary_value_keeps_its_wilson_interval() -> None:
    # Wilson is defined from one trial, so a single pass/fail still gets an interval (but no std).
    agg = summarize([True], binary=True)
    assert agg.std is None and agg.method == "wilson"
    assert (agg.ci_low, agg.ci_high) == pytest.approx(proportion_confint(1, 1, method="wilson"), rel=1e-12)


def test_all_equal_numbers_collapse() -> None:
    agg = summarize([0.25] * 12, binary=False)
    assert (agg.mean, agg.std, agg.ci_low, agg.ci_high, agg.method) == (0.25, 0.0, 0.25, 0.25, "t")


@pytest.mark.parametrize("passed", [True, False])
def test_all_pass_and_all_fail(passed: bool) -> None:
    agg = summarize([passed] * 20, binary=True)
    low, high = proportion_confint(20 if passed else 0, 20, method="wilson")
    assert agg.mean == float(passed) and agg.std == 0.0
    assert (agg.ci_low, agg.ci_high) == pytest.approx((low, high), rel=1e-12, abs=1e-15)
    assert (agg.ci_high if passed else agg.ci_low) == float(passed)


def test_single_cluster_has_no_interval() -> None:
    agg = summarize([1.0, 2.0, 4.0], binary=False, clusters=["r", "r", "r"])
    assert agg.mean == pytest.approx(7 / 3) and agg.std == pytest.approx(np.std([1, 2, 4], ddof=1))
    assert agg.ci_low is None and agg.ci_high is None and agg.method is None


def test_interval_is_clipped_to_bounds() -> None:
    x = [0.0, 1.0, 1.0, 0.1]
    raw = stats.t.interval(0.95, 3, loc=np.mean(x), scale=stats.sem(x))
    agg = summarize(x, binary=False, bounds=(0.0, 1.0))
    assert raw[0] < 0.0 and raw[1] > 1.0
    assert (agg.ci_low, agg.ci_high) == (0.0, 1.0)
    # Bounds tighter than [0, 1] apply to binary values too.
    tight = summarize([1, 1, 0, 1], binary=True, bounds=(0.4, 0.8))
    assert (tight.ci_low, tight.ci_high) == (0.4, 0.8)


def test_million_values_are_summarised_exactly() -> None:
    x = np.random.default_rng(4).random(1_000_000)
    agg = summarize(x, binary=False)
    low, high = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=stats.sem(x))
    assert (agg.ci_low, agg.ci_high) == pytest.approx((low, high), rel=1e-9)
    passed = x < 0.3
    agg = summarize(passed, binary=True)
    expected = proportion_confint(int(passed.sum()), x.size, method="wilson")
    assert (agg.ci_low, agg.ci_high) == pytest.approx(expected, rel=1e-12)


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="binary"):
        summarize([0.0, 0.5, 1.0], binary=True)
    with pytest.raises(ValueError, match="method"):
        summarize([1.0, 2.0], binary=False, method="bca")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bounds"):
        summarize([1.0, 2.0], binary=False, bounds=(2.0, 1.0))
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, float("nan")], binary=False)


def test_aggregate_to_dict() -> None:
    agg = summarize([1.0, 2.0, 3.0], binary=False, level=0.9)
    assert agg.to_dict() == {
        "n": 3,
        "mean": 2.0,
        "std": 1.0,
        "ci_low": agg.ci_low,
        "ci_high": agg.ci_high,
        "level": 0.9,
        "method": "t",
    }
    with pytest.raises(AttributeError):
        agg.mean = 0.0  # type: ignore[misc]


# --- label_counts -------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_label_counts_match_wilson(level: float) -> None:
    labels = ["cat"] * 6 + ["dog"] * 3 + ["bird"] * 3 + ["eel"]
    shares = label_counts(labels, level=level)
    assert list(shares) == ["cat", "bird", "dog", "eel"]  # by count, ties alphabetically
    for label, count in [("cat", 6), ("dog", 3), ("bird", 3), ("eel", 1)]:
        share = shares[label]
        low, high = proportion_confint(count, 13, alpha=1 - level, method="wilson")
        assert isinstance(share, LabelShare)
        assert share.count == count and share.share == pytest.approx(count / 13, rel=1e-15)
        assert (share.ci_low, share.ci_high) == pytest.approx((low, high), rel=1e-12)
        assert share.level == level
    assert sum(s.count for s in shares.values()) == 13


def test_label_counts_single_label_and_empty() -> None:
    only = label_counts(["yes", "yes"])
    assert list(only) == ["yes"] and only["yes"].share == 1.0 and only["yes"].ci_high == 1.0
    assert label_counts([]) == {}


def test_label_counts_keys_are_strings() -> None:
    shares = label_counts(np.array([1, 2, 2]))
    assert list(shares) == ["2", "1"]
    assert shares["2"].to_dict() == {
        "count": 2,
        "share": 2 / 3,
        "ci_low": shares["2"].ci_low,
        "ci_high": shares["2"].ci_high,
        "level": 0.95,
    }
