"""Seeded percentile bootstrap of the mean, optionally resampling whole clusters.

The bootstrap is deterministic for a given seed and input: the random stream comes only from
``np.random.default_rng(seed)`` and the resampling plan depends only on the data. Quantiles are interpolated
between order statistics, as ``scipy.stats.bootstrap(method="percentile")``.

Three plans, by what is cheapest while staying the bootstrap:

- few distinct units (pass/fail, Likert, fixed trials): the draw is exactly a multinomial over the distinct units;
- up to ``_EXACT_UNITS`` units: units drawn with replacement, index by index;
- more: the units are sorted into ``_STRATA`` strata of neighbouring values; how many draws fall in each stratum
  is drawn exactly (a multinomial over the strata), and the sum of the draws within a stratum from its normal
  limit with the stratum's exact mean and (co)variance. Between-strata variation, which is nearly all of it, is
  exact; within a stratum of ~1,000 sorted neighbours a sum of ~1,000 draws is normal to within what 2,000
  resamples can tell. A million values with 2,000 resamples take well under a second instead of over a minute
  (``tests/stats/test_stats_bootstrap.py`` checks the intervals against the exact plan).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES
from evalsi.stats.intervals import (
    Bounds,
    Interval,
    _as_values,
    _check_bounds,
    _check_level,
    _clip,
    _cluster_codes,
)

# Elements drawn per chunk of resamples: ~32 MiB of int64 indices, so 1M values never needs
# resamples x n memory at once.
_CHUNK_ELEMENTS: Final = 1 << 22

# Use multinomial counts over distinct units when they are at most this fraction of all units; a multinomial
# draw costs roughly four index draws per category, so below this it is the faster plan.
_DISTINCT_FRACTION: Final = 0.25

# Above this many units the stratified plan replaces drawing every index (see the module's docstring).
_EXACT_UNITS: Final = 50_000
_STRATA: Final = 1024

T = TypeVar("T")


def percentile_bootstrap(
    values: ArrayLike,
    level: float = 0.95,
    *,
    seed: int = 0,
    resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    clusters: ArrayLike | None = None,
    bounds: Bounds | None = None,
) -> Interval | None:
    """Percentile bootstrap interval for the mean of ``values``.

    With ``clusters``, whole clusters are resampled (the resampled mean is the pooled mean of the drawn
    clusters), which respects within-cluster correlation such as several trials of one record.
    ``None`` with fewer than two values, or fewer than two clusters.
    """
    level = _check_level(level)
    bounds = _check_bounds(bounds)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    x = _as_values(values)
    if clusters is None:
        sums, sizes = x, None
    else:
        codes, n_clusters = _cluster_codes(clusters, x.size)
        # numpy's stubs type every bincount as intp; with float weights it returns float64 sums.
        sums = cast("NDArray[np.float64]", np.bincount(codes, weights=x, minlength=n_clusters))
        sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    if sums.size < 2:
        return None
    if x.min() == x.max():
        # Every resample has the same mean; skip the draws and return the exact collapsed interval.
        return _clip((float(x[0]), float(x[0])), bounds)

    means = _resampled_means(sums, sizes, resamples, np.random.default_rng(seed))
    tail = (1.0 - level) / 2.0
    # Linear interpolation between order statistics, as scipy.stats.bootstrap(method="percentile").
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return _clip((float(low), float(high)), bounds)


def _resampled_means(
    sums: NDArray[np.float64],
    sizes: NDArray[np.float64] | None,
    resamples: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Means of ``resamples`` draws of all units with replacement; a unit is a (sum, size) pair."""
    units = sums.size
    # Packing (sum, size) into one complex number lets a single 1-D np.unique find distinct units;
    # np.unique(axis=0) on a two-column array is about ten times slower.
    keys = sums if sizes is None else sums + 1j * sizes
    distinct, counts = np.unique(keys, return_counts=True)
    out = np.empty(resamples, dtype=np.float64)

    if distinct.size <= _DISTINCT_FRACTION * units:
        # Pass/fail, Likert or fixed-trial data have few distinct units. Drawing units with replacement is
        # then exactly a multinomial draw of how often each distinct unit appears, O(distinct) per resample.
        d_sums = distinct.real.astype(np.float64)
        d_sizes = None if sizes is None else distinct.imag.astype(np.float64)
        probs = counts / units
        step = max(1, _CHUNK_ELEMENTS // distinct.size)
        for start in range(0, resamples, step):
            stop = min(start + step, resamples)
            draws = rng.multinomial(units, probs, size=stop - start).astype(np.float64)
            denom = units if d_sizes is None else draws @ d_sizes
            out[start:stop] = (draws @ d_sums) / denom
        return out

    if units > _EXACT_UNITS:
        return _stratified_means(sums, sizes, resamples, rng)
    step = max(1, _CHUNK_ELEMENTS // units)
    for start in range(0, resamples, step):
        stop = min(start + step, resamples)
        idx = rng.integers(0, units, size=(stop - start, units))
        denom = units if sizes is None else sizes[idx].sum(axis=1)
        out[start:stop] = sums[idx].sum(axis=1) / denom
    return out


def _stratified_means(
    sums: NDArray[np.float64],
    sizes: NDArray[np.float64] | None,
    resamples: int,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Resampled means with exact multinomial stratum counts and normal within-stratum sums (module docstring)."""
    units = sums.size
    ratio = sums if sizes is None else sums / sizes
    order = np.argsort(ratio, kind="stable")
    edges = np.linspace(0, units, _STRATA + 1).astype(np.int64)
    strata = np.repeat(np.arange(_STRATA), np.diff(edges))
    sorted_sums = sums[order]
    sorted_sizes = np.ones(units) if sizes is None else sizes[order]
    members = np.diff(edges).astype(np.float64)
    mean_sum = np.bincount(strata, weights=sorted_sums, minlength=_STRATA) / members
    mean_size = np.bincount(strata, weights=sorted_sizes, minlength=_STRATA) / members
    d_sum = sorted_sums - mean_sum[strata]
    d_size = sorted_sizes - mean_size[strata]
    var_sum = np.bincount(strata, weights=d_sum * d_sum, minlength=_STRATA) / members
    var_size = np.bincount(strata, weights=d_size * d_size, minlength=_STRATA) / members
    cov = np.bincount(strata, weights=d_sum * d_size, minlength=_STRATA) / members
    # Cholesky factor of each stratum's 2x2 covariance of (sum, size) per draw.
    l11 = np.sqrt(var_sum)
    l21 = np.divide(cov, l11, out=np.zeros_like(cov), where=l11 > 0)
    l22 = np.sqrt(np.maximum(var_size - l21 * l21, 0.0))
    out = np.empty(resamples, dtype=np.float64)
    step = max(1, _CHUNK_ELEMENTS // _STRATA)
    for start in range(0, resamples, step):
        stop = min(start + step, resamples)
        counts = rng.multinomial(units, members / units, size=stop - start).astype(np.float64)
        root = np.sqrt(counts)
        z1 = rng.standard_normal(counts.shape)
        drawn_sum = counts @ mean_sum + np.sum(root * z1 * l11, axis=1)
        if sizes is None:
            out[start:stop] = drawn_sum / units
            continue
        z2 = rng.standard_normal(counts.shape)
        drawn_size = counts @ mean_size + np.sum(root * (z1 * l21 + z2 * l22), axis=1)
        out[start:stop] = drawn_sum / drawn_size
    return out


@dataclass(frozen=True)
class ReducerBootstrap:
    """A bootstrap of a dataset-scope reducer: per score name its interval (``None`` with fewer than ten
    resamples that produced it), the resamples that produced one, and the resamples the reducer failed on."""

    intervals: dict[str, Interval | None]
    resamples: dict[str, int]
    failed: int


def reducer_bootstrap(
    values: Sequence[T],
    units: Sequence[str],
    reduce: Callable[[Any], Mapping[str, float]],
    *,
    level: float = 0.95,
    seed: int = 0,
    resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    take: Callable[[NDArray[np.intp]], Any] | None = None,
    cells: tuple[NDArray[np.intp], int] | None = None,
    counted: Callable[[NDArray[np.intp], NDArray[np.intp]], Any] | None = None,
) -> ReducerBootstrap:
    """Percentile bootstrap of any reducer over mapped values: whole units (the records, with every trial of a
    record together) are drawn with replacement from numpy's seeded generator, the reducer runs on each
    resample, and the quantiles are interpolated. A resample the reducer raises on (one class only, say) is
    counted in ``failed``, never silently dropped from the report. With ``take``, a resample is
    ``take(positions)`` (the drawn values' positions in ``values``, repeats included) rather than a list of the
    values: a reducer over columns stacked once draws them with numpy instead of a Python loop a value.

    ``cells`` (each value's cell, and how many cells) with ``counted(positions, counts)`` declare that the reducer
    reads a resample only through how many drawn values fall in each cell. With one value a unit and few cells
    (at most a quarter of the units), a resample is then ``counted`` (a value of each cell and its count), the
    counts drawn as one multinomial over the cells' shares: exactly the distribution of the counts of n values
    drawn with replacement, from a random number a cell instead of one a value (another stream than the draw by
    position, so another interval from the same seed)."""
    level = _check_level(level)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    if len(values) != len(units):
        raise ValueError(f"values and units must be aligned: got {len(values)} and {len(units)}")
    members: dict[str, list[int]] = {}
    for index, unit in enumerate(units):
        members.setdefault(unit, []).append(index)
    groups = list(members.values())
    if len(groups) < 2:
        return ReducerBootstrap({}, {}, 0)
    rng = np.random.default_rng(seed)
    drawn: dict[str, list[float]] = {}
    failed = 0
    samples: Iterator[Any] | None = None
    if cells is not None and counted is not None and len(groups) == len(values):
        tally = np.bincount(cells[0], minlength=cells[1])  # values a cell
        if np.count_nonzero(tally) <= _DISTINCT_FRACTION * len(values):
            samples = _counted_samples(cells[0], tally, counted, resamples, rng)
    if samples is None:
        samples = _drawn_samples(values, groups, resamples, rng, take)
    for sample in samples:
        try:
            figures = reduce(sample)
        except Exception:  # the reducer's own failure on this resample: counted and reported
            failed += 1
            continue
        for name, figure in figures.items():
            drawn.setdefault(name, []).append(figure)
    tail = (1.0 - level) / 2.0
    intervals: dict[str, Interval | None] = {}
    for name, drawn_figures in drawn.items():
        finite = np.asarray(drawn_figures, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        if finite.size >= 10:
            low, high = np.quantile(finite, [tail, 1.0 - tail])
            intervals[name] = (float(low), float(high))
        else:
            intervals[name] = None
    return ReducerBootstrap(intervals, {name: len(found) for name, found in drawn.items()}, failed)


def _drawn_samples(values: Sequence[T], groups: list[list[int]], resamples: int, rng: np.random.Generator,
                   take: Callable[[NDArray[np.intp]], Any] | None) -> Iterator[Any]:
    """Each resample as its drawn values (or ``take`` of their positions): units drawn with replacement."""
    sizes = np.fromiter(map(len, groups), dtype=np.intp, count=len(groups))
    flat = np.fromiter((i for group in groups for i in group), dtype=np.intp, count=len(values))
    starts = np.cumsum(sizes) - sizes
    for _ in range(resamples):
        # A resample's draws at a time: the same stream as one (resamples x units) matrix, without holding it
        # (2,000 x 200,000 units is 3.2 GB of int64).
        row = rng.integers(0, len(groups), size=len(groups))
        if take is None:
            yield [values[i] for g in row for i in groups[g]]
        elif len(groups) == len(values):  # one value a unit, units in value order: the drawn units are the positions
            yield take(row)
        else:  # each drawn unit's run of positions: its start, then one step per member
            lengths = sizes[row]
            ends = np.cumsum(lengths)
            yield take(flat[np.repeat(starts[row] - ends + lengths, lengths) + np.arange(ends[-1])])


def _counted_samples(codes: NDArray[np.intp], tally: NDArray[np.intp],
                     counted: Callable[[NDArray[np.intp], NDArray[np.intp]], Any], resamples: int,
                     rng: np.random.Generator) -> Iterator[Any]:
    """Each resample as ``counted``: the first value of each occupied cell (``codes``, each value's; ``tally``,
    values a cell) and its multinomial count."""
    occupied = np.flatnonzero(tally)
    order = np.argsort(codes, kind="stable")
    firsts = order[(np.cumsum(tally) - tally)[occupied]]
    shares = tally[occupied] / codes.size
    step = max(1, _CHUNK_ELEMENTS // occupied.size)
    for start in range(0, resamples, step):
        for drawn_counts in rng.multinomial(codes.size, shares, size=min(step, resamples - start)):
            yield counted(firsts, drawn_counts)
