"""Closed-form confidence intervals: Wilson for proportions, Student-t and cluster-robust t for means.

Every function returns ``None`` when the interval is undefined (no observations, fewer than two
observations, fewer than two clusters) rather than NaN, so callers can store and render the result as-is.
A zero-variance sample is not undefined: its interval collapses to the mean.

The private helpers (input checks, centring, cluster coding) are shared by the other modules of this
package so that every family validates and clips its inputs the same way.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

Interval = tuple[float, float]
Bounds = tuple[float, float]


def wilson(successes: int, n: int, level: float = 0.95) -> Interval | None:
    """Wilson score interval for ``successes`` out of ``n``; ``None`` when ``n == 0``.

    Matches ``statsmodels.stats.proportion.proportion_confint(successes, n, alpha=1 - level,
    method="wilson")``, including its clipping to [0, 1].
    """
    level = _check_level(level)
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return None
    # One count in scalar arithmetic: _wilson_arrays' operations in its order, so the same bits, without numpy's
    # cost per call on one-element arrays (~25 us of the worker's CPU for an Evaluate of one record).
    z = float(-special.ndtri((1.0 - level) / 2.0))
    z2 = z * z
    size = float(n)
    p = successes / size
    denom = 1.0 + z2 / size
    centre = (p + z2 / (2.0 * size)) / denom
    half = z * math.sqrt(p * (1.0 - p) / size + z2 / (4.0 * size**2)) / denom
    return min(max(centre - half, 0.0), 1.0), min(max(centre + half, 0.0), 1.0)


def t_interval(values: ArrayLike, level: float = 0.95, *, bounds: Bounds | None = None) -> Interval | None:
    """Student-t interval for the mean; ``None`` for fewer than two values.

    Matches ``scipy.stats.t.interval(level, n - 1, loc=mean, scale=scipy.stats.sem(values))``.
    """
    level = _check_level(level)
    bounds = _check_bounds(bounds)
    x = _as_values(values)
    if x.size < 2:
        return None
    mean, se, df = _t_parts(x)
    return _clip(_t_bounds(mean, se, df, level), bounds)


def cluster_robust_t(
    values: ArrayLike, clusters: ArrayLike, level: float = 0.95, *, bounds: Bounds | None = None
) -> Interval | None:
    """Interval for the mean when observations share clusters (a cluster key, or trials of one record).

    CR1 sandwich variance with the small-sample factor G/(G-1)*(N-1)/(N-K) and a t reference with G-1
    degrees of freedom, i.e. statsmodels ``OLS(y, ones).fit(cov_type="cluster", cov_kwds={"groups": ...,
    "use_correction": True, "df_correction": True}, use_t=True)``. ``None`` with fewer than two clusters,
    where the variance between clusters cannot be estimated.
    """
    level = _check_level(level)
    bounds = _check_bounds(bounds)
    x = _as_values(values)
    codes, n_clusters = _cluster_codes(clusters, x.size)
    if n_clusters < 2:
        return None
    mean, se, df = _cluster_t_parts(x, codes, n_clusters)
    return _clip(_t_bounds(mean, se, df, level), bounds)


def korn_graubard(
    mean: float, variance: float, *, units: float, total: float, df: int, level: float = 0.95
) -> Interval:
    """Interval for a mean of values in [0, 1] that are not independent trials (pass/fail over clustered
    records, per-sample pass@k): Clopper-Pearson at the effective sample size (Korn and Graubard 1998).

    The effective sample size is mean(1 - mean) / variance (the variance of the mean from its own estimator),
    scaled by (z / t_df)^2 for few units and kept within [units, total]: never more than the trials there are,
    never fewer than the independent units. ``variance`` 0 (or a mean of exactly 0 or 1, which has no variance to
    size from) takes ``units``, as if every unit's trials agreed. Clopper-Pearson rather than Wilson: Wilson's
    coverage dips well below nominal near 0 and 1 with few units (83% for pass@5 with 10 samples at 0.98,
    benchmarks/coverage.py). An all-pass result thus reads [(alpha/2)^(1/units), 1], never [1, 1].
    """
    level = _check_level(level)
    if not 0.0 <= mean <= 1.0:
        raise ValueError(f"mean must be within [0, 1], got {mean!r}")
    if units <= 0 or total < units:
        raise ValueError(f"need 0 < units <= total, got units={units!r}, total={total!r}")
    spread = mean * (1.0 - mean)
    if spread == 0.0 or variance <= 0.0:
        n_eff = units
    else:
        z = float(-special.ndtri((1.0 - level) / 2.0))
        t = float(special.stdtrit(max(df, 1), (1.0 + level) / 2.0))
        n_eff = min(max(spread / variance * (z / t) ** 2, units), total)
    return clopper_pearson(mean * n_eff, n_eff, level)


def clopper_pearson(successes: float, n: float, level: float = 0.95) -> Interval:
    """Clopper-Pearson's interval from beta quantiles, for real-valued ``successes`` out of ``n`` too; equals
    ``statsmodels proportion_confint(method="beta")`` for whole counts."""
    alpha = 1.0 - _check_level(level)
    low = 0.0 if successes <= 0.0 else float(special.betaincinv(successes, n - successes + 1.0, alpha / 2.0))
    high = 1.0 if successes >= n else float(special.betaincinv(successes + 1.0, n - successes, 1.0 - alpha / 2.0))
    return low, high


# ---------------------------------------------------------------------------------------------------------
# Shared helpers (used across evalsi.stats; not part of the public API).


def _check_level(level: float) -> float:
    # Written so that NaN fails too.
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    return float(level)


def _check_bounds(bounds: Bounds | None) -> Bounds | None:
    if bounds is None:
        return None
    low, high = (float(b) for b in bounds)
    if not low <= high:
        raise ValueError(f"bounds must be (low, high) with low <= high, got {bounds!r}")
    return low, high


def _clip(interval: Interval, bounds: Bounds | None) -> Interval:
    low, high = interval
    if bounds is not None:
        low = min(max(low, bounds[0]), bounds[1])
        high = min(max(high, bounds[0]), bounds[1])
    return float(low), float(high)


def _as_values(values: ArrayLike, name: str = "values") -> NDArray[np.float64]:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    finite = np.isfinite(x)
    if not finite.all():
        # NaN would silently poison every figure; name the first offender so the caller can find it.
        i = int(np.argmin(finite))
        raise ValueError(f"{name} must be finite; {name}[{i}] is {x[i]}")
    return x


def _is_binary(x: NDArray[np.float64]) -> bool:
    return bool(np.all((x == 0.0) | (x == 1.0)))


def _centre(x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
    """Mean and residuals of a non-empty sample.

    Shifting by the first value keeps a constant sample's mean exactly equal to that value (so its
    interval collapses onto it) and avoids cancellation when values carry a large common offset.
    """
    shift = x[0]
    d = x - shift
    d_mean = d.mean()
    return float(shift + d_mean), d - d_mean


def _mean(x: NDArray[np.float64]) -> float | None:
    if x.size == 1:  # what _centre gives one value (-0.0 included), without its array arithmetic
        return float(x[0]) + 0.0
    return _centre(x)[0] if x.size else None


def _std(x: NDArray[np.float64]) -> float | None:
    if x.size < 2:
        return None
    _, resid = _centre(x)
    return math.sqrt(float(np.sum(np.square(resid))) / (x.size - 1))


def _t_parts(x: NDArray[np.float64]) -> tuple[float, float, int]:
    """Mean, standard error and degrees of freedom for a sample of at least two values."""
    mean, resid = _centre(x)
    n = x.size
    se = math.sqrt(float(np.sum(np.square(resid))) / (n - 1) / n)
    return mean, se, n - 1


def _cluster_codes(clusters: ArrayLike, n: int) -> tuple[NDArray[np.intp], int]:
    """Dense integer codes 0..G-1 for cluster keys, and G."""
    keys = np.asarray(clusters)
    if keys.ndim == 2:
        # A sequence of equal-length tuples (e.g. (dataset, record_id)) arrives as rows; each row is a key.
        uniques, codes = np.unique(keys, axis=0, return_inverse=True)
        n_clusters = uniques.shape[0]
    elif keys.ndim == 1:
        try:
            uniques, codes = np.unique(keys, return_inverse=True)
        except TypeError as exc:
            raise ValueError("cluster keys must be mutually comparable (e.g. all str or all int)") from exc
        n_clusters = uniques.size
    else:
        raise ValueError(f"clusters must hold one key per value, got shape {keys.shape}")
    codes = codes.reshape(-1)
    if codes.size != n:
        raise ValueError(f"clusters must hold one key per value: got {codes.size} keys for {n} values")
    return codes, n_clusters


def _cluster_t_parts(
    x: NDArray[np.float64], codes: NDArray[np.intp], n_clusters: int
) -> tuple[float, float, int]:
    """Mean, CR1 standard error and G-1 degrees of freedom; needs at least two clusters.

    For an intercept-only OLS the sandwich reduces to sum_g (sum of residuals in g)^2 / N^2; the CR1
    factor is G/(G-1) because (N-1)/(N-K) is 1 with K=1.
    """
    mean, resid = _centre(x)
    n = x.size
    cluster_sums = np.bincount(codes, weights=resid, minlength=n_clusters)
    meat = float(np.sum(np.square(cluster_sums)))
    se = math.sqrt(n_clusters / (n_clusters - 1) * meat) / n
    return mean, se, n_clusters - 1


def _t_bounds(mean: float, se: float, df: int, level: float) -> Interval:
    if se == 0.0:
        return mean, mean
    # Same quantile expression as scipy.stats.t.interval so results agree to the last few ulps; scipy.stats.t.ppf is
    # special.stdtrit underneath (bit for bit), and scipy.special loads in a third of scipy.stats' time.
    q = float(special.stdtrit(df, (1.0 + level) / 2.0))
    return mean - q * se, mean + q * se


def _t_p_value(mean: float, se: float, df: int) -> float:
    """Two-sided p-value for mean == 0. A zero standard error gives 1 at zero and 0 elsewhere."""
    if se == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return float(2.0 * special.stdtr(df, -abs(mean) / se))  # scipy.stats.t.sf, bit for bit


def _wilson_arrays(
    successes: NDArray[np.float64], n: float, level: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Vectorised Wilson bounds for many counts out of the same ``n > 0``."""
    # Same operation order as statsmodels so the figures agree to the last ulp.
    z = float(-special.ndtri((1.0 - level) / 2.0))  # scipy.stats.norm.isf, bit for bit
    z2 = z * z
    p = successes / n
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * np.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n**2)) / denom
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
