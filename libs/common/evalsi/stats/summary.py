"""One-call summaries of a metric: mean, sample std and a confidence interval, plus label shares."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from evalsi.stats.bootstrap import percentile_bootstrap
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES
from evalsi.stats.intervals import (
    Bounds,
    Interval,
    _as_values,
    _check_bounds,
    _check_level,
    _clip,
    _cluster_codes,
    _cluster_t_parts,
    _is_binary,
    _mean,
    _std,
    _t_bounds,
    _t_parts,
    _wilson_arrays,
    korn_graubard,
    wilson,
)

IntervalMethod = Literal["wilson", "korn-graubard", "t", "cluster-t", "bootstrap", "bootstrap-cluster"]
SummaryMethod = Literal["auto", "bootstrap"]


@dataclass(frozen=True)
class Aggregate:
    """Summary of one metric over ``n`` observations.

    ``mean`` is ``None`` when ``n == 0``; ``std`` (sample, ddof=1) and the interval are ``None`` when they
    are undefined. ``method`` names how the interval was computed, or is ``None`` when there is none.
    """

    n: int
    mean: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None
    level: float
    method: IntervalMethod | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LabelShare:
    """How often one label occurs: its count, its share of all labels and a Wilson interval for the share."""

    count: int
    share: float
    ci_low: float
    ci_high: float
    level: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    values: ArrayLike,
    *,
    binary: bool,
    clusters: ArrayLike | None = None,
    level: float = 0.95,
    method: SummaryMethod = "auto",
    seed: int = 0,
    resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    bounds: Bounds | None = None,
) -> Aggregate:
    """Mean, sample std and interval of ``values``.

    ``method="auto"``: Wilson for binary values, Student-t for numbers; with ``clusters`` the cluster-robust t
    for numbers and, for binary values, Clopper-Pearson at the cluster-robust effective sample size (``korn_graubard``),
    which keeps its coverage near 0 and 1 where the t interval collapses. ``method="bootstrap"`` uses the seeded
    percentile bootstrap, resampling whole clusters when given. Binary values must be 0/1 (or bool) and
    are bounded to [0, 1] unless ``bounds`` says otherwise; every interval is clipped to the bounds.
    Wilson is defined from one observation; the other intervals need two values (or two clusters).
    """
    level = _check_level(level)
    bounds = _check_bounds(bounds)
    if method not in get_args(SummaryMethod):
        raise ValueError(f"method must be one of {get_args(SummaryMethod)}, got {method!r}")
    x = _as_values(values)
    if binary:
        if not _is_binary(x):
            bad = x[(x != 0.0) & (x != 1.0)][0]
            raise ValueError(f"binary values must be 0/1 or bool, found {bad}")
        if bounds is None:
            bounds = (0.0, 1.0)

    interval: Interval | None
    used: IntervalMethod
    if method == "bootstrap":
        used = "bootstrap" if clusters is None else "bootstrap-cluster"
        interval = percentile_bootstrap(x, level, seed=seed, resamples=resamples, clusters=clusters)
    elif clusters is not None:
        codes, n_clusters = _cluster_codes(clusters, x.size)
        interval = None
        if binary:
            used = "korn-graubard"
            if n_clusters >= 2:
                interval = _clustered_proportion(x, codes, n_clusters, level)
        else:
            used = "cluster-t"
            if n_clusters >= 2:
                interval = _t_bounds(*_cluster_t_parts(x, codes, n_clusters), level)
    elif binary:
        used = "wilson"
        interval = wilson(int(np.count_nonzero(x)), x.size, level)
    else:
        used = "t"
        interval = _t_bounds(*_t_parts(x), level) if x.size >= 2 else None

    if interval is None:
        return Aggregate(x.size, _mean(x), _std(x), None, None, level, None)
    low, high = _clip(interval, bounds)
    return Aggregate(x.size, _mean(x), _std(x), low, high, level, used)


def _clustered_proportion(x: NDArray[np.float64], codes: NDArray[np.intp], n_clusters: int, level: float) -> Interval:
    """Korn-Graubard for clusters of pass/fail values: the cluster-robust variance of the mean, units the
    Kish effective number of clusters (N^2 / sum of squared cluster sizes)."""
    mean, se, df = _cluster_t_parts(x, codes, n_clusters)
    sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    units = float(x.size) ** 2 / float(np.sum(sizes * sizes))
    return korn_graubard(min(max(mean, 0.0), 1.0), se * se, units=units, total=float(x.size), df=df, level=level)


def label_counts(labels: ArrayLike, *, level: float = 0.95) -> dict[str, LabelShare]:
    """Count of each label with its share and a Wilson interval, most frequent first (ties by label).

    Labels are compared as strings, so ``1`` and ``"1"`` are the same label.
    """
    level = _check_level(level)
    keys = np.asarray(labels).astype(str)
    if keys.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {keys.shape}")
    if keys.size == 0:
        return {}
    uniques, counts = np.unique(keys, return_counts=True)
    order = np.lexsort((uniques, -counts))
    uniques, counts = uniques[order], counts[order]
    total = keys.size
    lows, highs = _wilson_arrays(counts.astype(np.float64), float(total), level)
    shares = counts / total
    return {
        str(label): LabelShare(int(count), float(share), float(low), float(high), level)
        for label, count, share, low, high in zip(uniques, counts, shares, lows, highs, strict=True)
    }
