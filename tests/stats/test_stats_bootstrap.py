"""Seeded percentile bootstrap: determinism, agreement with scipy and with a literal cluster bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalsi.stats import bootstrap as bootstrap_module
from evalsi.stats import percentile_bootstrap

RESAMPLES = 20_000


def _scipy_percentile(x: np.ndarray, level: float) -> tuple[float, float]:
    ci = stats.bootstrap(
        (x,),
        np.mean,
        method="percentile",
        confidence_level=level,
        n_resamples=RESAMPLES,
        rng=np.random.default_rng(12345),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def _literal_cluster_bootstrap(
    x: np.ndarray, clusters: np.ndarray, level: float, resamples: int
) -> tuple[float, float]:
    """Reference written the obvious way: draw clusters, concatenate their values, take the mean."""
    rng = np.random.default_rng(999)
    keys = np.unique(clusters)
    members = [x[clusters == key] for key in keys]
    means = np.empty(resamples)
    for i in range(resamples):
        drawn = rng.integers(0, keys.size, size=keys.size)
        means[i] = np.concatenate([members[j] for j in drawn]).mean()
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def _assert_close(
    got: tuple[float, float] | None, expected: tuple[float, float], scale: float, step: float = 0.0
) -> None:
    # Two independent Monte Carlo runs of 20k (or 5k) resamples: the 2.5% quantile wobbles by about
    # 0.02-0.04 standard errors, so 0.12 standard errors is a safe but still meaningful tolerance.
    # Discrete data put resampled means on a lattice, and noise can tip a quantile one step over.
    assert got is not None
    assert got == pytest.approx(expected, abs=0.12 * scale + step)


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_continuous_values_match_scipy(level: float) -> None:
    x = np.random.default_rng(1).normal(size=300)
    got = percentile_bootstrap(x, level, resamples=RESAMPLES)
    _assert_close(got, _scipy_percentile(x, level), stats.sem(x))


def test_few_distinct_values_match_scipy() -> None:
    # 0/1 and Likert-style data take the multinomial shortcut; it must give the same distribution.
    rng = np.random.default_rng(2)
    for x in [(rng.random(400) < 0.3).astype(float), rng.integers(1, 6, size=400).astype(float)]:
        got = percentile_bootstrap(x, resamples=RESAMPLES)
        _assert_close(got, _scipy_percentile(x, 0.95), stats.sem(x), step=1 / x.size)


def test_small_chunks_cover_every_resample(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bootstrap_module, "_CHUNK_ELEMENTS", 1000)
    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    _assert_close(percentile_bootstrap(x, resamples=RESAMPLES), _scipy_percentile(x, 0.95), stats.sem(x))
    xb = (rng.random(300) < 0.6).astype(float)
    got = percentile_bootstrap(xb, resamples=RESAMPLES)
    _assert_close(got, _scipy_percentile(xb, 0.95), stats.sem(xb), step=1 / xb.size)


def test_same_seed_same_answer_other_seed_other_answer() -> None:
    x = np.random.default_rng(4).exponential(size=200)
    first = percentile_bootstrap(x, seed=7, resamples=500)
    assert first == percentile_bootstrap(x, seed=7, resamples=500)
    assert first != percentile_bootstrap(x, seed=8, resamples=500)
    groups = np.repeat(np.arange(40), 5)
    clustered = percentile_bootstrap(x, seed=7, resamples=500, clusters=groups)
    assert clustered == percentile_bootstrap(x, seed=7, resamples=500, clusters=groups)


@pytest.mark.parametrize("kind", ["continuous", "binary trials"])
def test_cluster_bootstrap_matches_literal_reference(kind: str) -> None:
    rng = np.random.default_rng(5)
    n_clusters = 30
    sizes = rng.integers(1, 8, size=n_clusters) if kind == "continuous" else np.full(n_clusters, 4)
    clusters = np.repeat(np.arange(n_clusters), sizes)
    if kind == "continuous":
        x = rng.normal(size=n_clusters)[clusters] + rng.normal(size=clusters.size)
    else:
        x = (rng.random(clusters.size) < rng.random(n_clusters)[clusters]).astype(float)
    expected = _literal_cluster_bootstrap(x, clusters, 0.95, 5000)
    got = percentile_bootstrap(x, resamples=RESAMPLES, clusters=clusters)
    cluster_means = np.bincount(clusters, weights=x) / np.bincount(clusters)
    step = 0.0 if kind == "continuous" else 1 / clusters.size
    _assert_close(got, expected, stats.sem(cluster_means), step)


def test_cluster_bootstrap_is_wider_than_naive_when_clusters_correlate() -> None:
    rng = np.random.default_rng(6)
    clusters = np.repeat(np.arange(25), 8)
    x = 3 * rng.normal(size=25)[clusters] + rng.normal(size=clusters.size)
    naive = percentile_bootstrap(x, resamples=2000)
    clustered = percentile_bootstrap(x, resamples=2000, clusters=clusters)
    assert naive is not None and clustered is not None
    assert clustered[1] - clustered[0] > 2 * (naive[1] - naive[0])


def test_undefined_cases_are_none() -> None:
    assert percentile_bootstrap([]) is None
    assert percentile_bootstrap([1.0]) is None
    assert percentile_bootstrap([1.0, 2.0, 3.0], clusters=["a", "a", "a"]) is None


def test_constant_values_collapse() -> None:
    assert percentile_bootstrap([0.7] * 10) == (0.7, 0.7)
    assert percentile_bootstrap([1.0] * 9, clusters=[0, 0, 0, 0, 1, 1, 2, 2, 2]) == (1.0, 1.0)


def test_interval_is_clipped_to_bounds() -> None:
    x = [1.0] * 9 + [0.0]
    low, high = percentile_bootstrap(x, bounds=(0.0, 0.95))
    assert high == 0.95 and low < 0.95


def test_resamples_must_be_positive() -> None:
    with pytest.raises(ValueError, match="resamples"):
        percentile_bootstrap([1.0, 2.0], resamples=0)


@pytest.mark.parametrize("clustered", [False, True])
def test_the_stratified_plan_for_many_units_agrees_with_drawing_every_index(
    clustered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(21)
    x = rng.lognormal(size=60_000)  # skewed, where a normal shortcut would show first
    clusters = np.repeat(np.arange(20_000), 3) if clustered else None
    stratified = percentile_bootstrap(x, 0.95, seed=1, resamples=5_000, clusters=clusters)
    monkeypatch.setattr(bootstrap_module, "_EXACT_UNITS", 10**9)
    exact = percentile_bootstrap(x, 0.95, seed=2, resamples=5_000, clusters=clusters)
    assert exact is not None
    scale = (exact[1] - exact[0]) / (2 * 1.96)  # the bootstrap standard error
    _assert_close(stratified, exact, scale)
