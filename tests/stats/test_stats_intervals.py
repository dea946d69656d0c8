"""Wilson, Student-t and cluster-robust t intervals against statsmodels and scipy reference values."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from evalsi.stats import cluster_robust_t, t_interval, wilson

LEVELS = [0.9, 0.95, 0.99]


def _statsmodels_cluster(y: np.ndarray, groups: np.ndarray, level: float) -> tuple[float, float]:
    codes = np.unique(groups, return_inverse=True)[1]
    fit = sm.OLS(y, np.ones(y.size)).fit(
        cov_type="cluster",
        cov_kwds={"groups": codes, "use_correction": True, "df_correction": True},
        use_t=True,
    )
    low, high = fit.conf_int(alpha=1 - level)[0]
    return float(low), float(high)


# --- Wilson -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [1, 2, 5, 10, 37, 100, 1000])
def test_wilson_matches_statsmodels(n: int, level: float) -> None:
    for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
        expected = proportion_confint(successes, n, alpha=1 - level, method="wilson")
        assert wilson(successes, n, level) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_wilson_extremes_stay_in_unit_interval() -> None:
    low, high = wilson(0, 20)
    assert low == 0.0 and 0.0 < high < 1.0
    low, high = wilson(20, 20)
    assert high == 1.0 and 0.0 < low < 1.0


def test_wilson_default_level_is_95() -> None:
    assert wilson(7, 19) == wilson(7, 19, 0.95)


def test_wilson_no_trials_is_none() -> None:
    assert wilson(0, 0) is None


@pytest.mark.parametrize(("successes", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(successes: int, n: int) -> None:
    with pytest.raises(ValueError, match="successes"):
        wilson(successes, n)


@pytest.mark.parametrize("level", [0.0, 1.0, -0.5, 95, float("nan")])
def test_level_must_be_a_probability(level: float) -> None:
    with pytest.raises(ValueError, match="level"):
        wilson(1, 2, level)
    with pytest.raises(ValueError, match="level"):
        t_interval([1.0, 2.0], level)
    with pytest.raises(ValueError, match="level"):
        cluster_robust_t([1.0, 2.0], [0, 1], level)


# --- Student-t ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [2, 3, 10, 250])
def test_t_interval_matches_scipy(n: int, level: float) -> None:
    x = np.random.default_rng(n).normal(3.0, 2.0, size=n)
    expected = stats.t.interval(level, n - 1, loc=np.mean(x), scale=stats.sem(x))
    assert t_interval(x, level) == pytest.approx(expected, rel=1e-9)


def test_t_interval_with_large_common_offset() -> None:
    x = 1e9 + np.random.default_rng(0).normal(size=50)
    expected = stats.t.interval(0.95, 49, loc=np.mean(x), scale=stats.sem(x))
    assert t_interval(x) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("values", [[], [4.2]])
def test_t_interval_undefined_below_two_values(values: list[float]) -> None:
    assert t_interval(values) is None


def test_t_interval_collapses_on_constant_values() -> None:
    assert t_interval([0.1] * 7) == (0.1, 0.1)


def test_t_interval_accepts_bools() -> None:
    x = [True, False, True, True]
    assert t_interval(x) == pytest.approx(t_interval([1.0, 0.0, 1.0, 1.0]), rel=1e-15)


def test_t_interval_clips_to_bounds() -> None:
    x = [0.0, 1.0, 1.0]
    low, high = stats.t.interval(0.95, 2, loc=np.mean(x), scale=stats.sem(x))
    assert low < 0.0 and high > 1.0
    assert t_interval(x, bounds=(0.0, 1.0)) == (0.0, 1.0)
    assert t_interval(x, bounds=(0.5, 0.9)) == (0.5, 0.9)


def test_bounds_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="bounds"):
        t_interval([1.0, 2.0], bounds=(1.0, 0.0))


@pytest.mark.parametrize("bad", [[1.0, float("nan")], [float("inf"), 1.0]])
def test_non_finite_values_are_rejected(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="finite"):
        t_interval(bad)
    with pytest.raises(ValueError, match="finite"):
        cluster_robust_t(bad, [0, 1])


def test_values_must_be_one_dimensional() -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        t_interval(np.ones((3, 2)))


# --- Cluster-robust t ---------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("n", "n_clusters"), [(6, 2), (40, 3), (200, 17), (500, 120)])
def test_cluster_robust_t_matches_statsmodels(n: int, n_clusters: int, level: float) -> None:
    rng = np.random.default_rng(n + n_clusters)
    groups = rng.integers(0, n_clusters, size=n)
    groups[:n_clusters] = np.arange(n_clusters)  # every cluster present, sizes unequal
    effects = rng.normal(size=n_clusters)
    y = effects[groups] + rng.normal(size=n)
    expected = _statsmodels_cluster(y, groups, level)
    assert cluster_robust_t(y, groups, level) == pytest.approx(expected, rel=1e-9)


def test_cluster_robust_t_binary_trials_match_statsmodels() -> None:
    rng = np.random.default_rng(7)
    records = np.repeat(np.array([f"rec-{i}" for i in range(30)]), 5)
    y = (rng.random(records.size) < np.repeat(rng.random(30), 5)).astype(float)
    assert cluster_robust_t(y, records) == pytest.approx(_statsmodels_cluster(y, records, 0.95), rel=1e-9)


def test_cluster_keys_may_be_strings_ints_or_tuples() -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(size=60)
    ints = np.repeat(np.arange(12), 5)
    strs = [f"k{i}" for i in ints]
    tuples = [("dataset", f"k{i}") for i in ints]
    expected = cluster_robust_t(y, ints)
    assert cluster_robust_t(y, strs) == pytest.approx(expected, rel=1e-12)
    assert cluster_robust_t(y, tuples) == pytest.approx(expected, rel=1e-12)


def test_singleton_clusters_reduce_to_t_interval() -> None:
    y = np.random.default_rng(5).normal(size=40)
    assert cluster_robust_t(y, np.arange(40)) == pytest.approx(t_interval(y), rel=1e-12)


def test_cluster_robust_t_needs_two_clusters() -> None:
    assert cluster_robust_t([1.0, 2.0, 3.0], ["a", "a", "a"]) is None
    assert cluster_robust_t([], []) is None


def test_cluster_robust_t_collapses_on_constant_values() -> None:
    assert cluster_robust_t([2.5] * 6, [0, 0, 1, 1, 2, 2]) == (2.5, 2.5)


def test_cluster_robust_t_clips_to_bounds() -> None:
    y = [0.0, 1.0, 1.0, 1.0]
    unclipped = cluster_robust_t(y, [0, 0, 1, 1])
    assert unclipped is not None and unclipped[1] > 1.0
    assert cluster_robust_t(y, [0, 0, 1, 1], bounds=(0.0, 1.0)) == (0.0, 1.0)


def test_cluster_keys_must_align_with_values() -> None:
    with pytest.raises(ValueError, match="one key per value"):
        cluster_robust_t([1.0, 2.0, 3.0], [0, 1])


def test_mixed_unorderable_cluster_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="comparable"):
        cluster_robust_t([1.0, 2.0, 3.0], np.array(["a", None, 1], dtype=object))
