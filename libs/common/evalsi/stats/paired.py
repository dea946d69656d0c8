"""Paired comparison of two result sets scored on the same records (run A versus run B).

Pairing removes the between-record variance that dominates eval scores, so the interval on per-record
differences is much tighter than comparing two independent intervals. For each kind of metric one test gives the
p-value, the interval and the verdict, so they agree: significant <=> p < alpha <=> the interval excludes zero.

- pass/fail, one observation per record: McNemar's test and Tango's interval, its inversion (``paired_proportions``);
- numbers: the paired t test and its interval;
- either, with trials or clusters: the cluster-robust t test on the differences (CR1, G-1 df).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from evalsi.stats.intervals import (
    _as_values,
    _check_level,
    _cluster_codes,
    _cluster_t_parts,
    _is_binary,
    _mean,
    _t_bounds,
    _t_p_value,
    _t_parts,
)
from evalsi.stats.paired_proportions import McNemar, discordant_counts, mcnemar_from_counts, mcnemar_mde, tango_interval

Verdict = Literal["better", "worse", "no significant difference", "insufficient data"]
Test = Literal["mcnemar", "paired-t", "cluster-paired-t"]


@dataclass(frozen=True)
class Comparison:
    """B versus A on the same records; ``diff`` is mean(B - A) and the interval is on that difference.

    ``test`` names the one test behind ``p_value``, the interval and the verdict: "mcnemar" (its interval
    Tango's), "paired-t" or "cluster-paired-t"; ``None`` with too little data. ``method`` names the interval:
    "tango", "t" or "cluster-t". ``mde`` is the smallest true difference that same test at alpha = 1 - level
    would detect with the requested power.
    """

    n_pairs: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    mcnemar: McNemar | None
    mde: float | None
    verdict: Verdict
    level: float
    method: Literal["tango", "t", "cluster-t"] | None
    test: Test | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_difference(
    a: ArrayLike,
    b: ArrayLike,
    *,
    clusters: ArrayLike | None = None,
    level: float = 0.95,
    higher_is_better: bool = True,
    power: float = 0.8,
) -> Comparison:
    """Compare B with A, aligned by record (``a[i]`` and ``b[i]`` score the same record).

    Pass/fail on both sides without clusters: McNemar's test with Tango's interval. Otherwise a t test on the
    differences B - A, cluster-robust when ``clusters`` are given (trials sharing a record are not independent
    pairs). The verdict says "better" or "worse" only when the interval excludes zero (flipped when lower is
    better), and "insufficient data" with fewer than two pairs (or clusters).
    """
    level = _check_level(level)
    _check_alpha_power(1.0 - level, power)
    xa = _as_values(a, "a")
    xb = _as_values(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"a and b must be aligned by record: got {xa.size} and {xb.size} values")
    n = xa.size
    diffs = xb - xa
    means = {"mean_a": _mean(xa), "mean_b": _mean(xb), "diff": _mean(diffs)}

    if clusters is None and n >= 2 and _is_binary(xa) and _is_binary(xb):
        return _mcnemar_comparison(xa, xb, level, higher_is_better, power, means)

    test: Test
    parts: tuple[float, float, int] | None = None
    if clusters is None:
        test = "paired-t"
        if n >= 2:
            parts = _t_parts(diffs)
    else:
        test = "cluster-paired-t"
        codes, n_clusters = _cluster_codes(clusters, n)
        if n_clusters >= 2:
            parts = _cluster_t_parts(diffs, codes, n_clusters)

    if parts is None:
        return Comparison(n_pairs=n, **means, ci_low=None, ci_high=None, p_value=None, mcnemar=None, mde=None,
                          verdict="insufficient data", level=level, method=None, test=None)
    diff, se, df = parts
    low, high = _t_bounds(diff, se, df, level)
    # se * sqrt(units) is the sd of the differences when units are records, and its cluster-robust
    # analogue otherwise, so one MDE formula serves both with units = df + 1.
    units = df + 1
    mde = minimum_detectable_effect(se * math.sqrt(units), units, alpha=1.0 - level, power=power)
    return Comparison(n_pairs=n, **means, ci_low=low, ci_high=high, p_value=_t_p_value(diff, se, df), mcnemar=None,
                      mde=mde, verdict=_verdict(low, high, higher_is_better), level=level,
                      method="t" if test == "paired-t" else "cluster-t", test=test)


def _mcnemar_comparison(xa: NDArray[np.float64], xb: NDArray[np.float64], level: float, higher_is_better: bool,
                        power: float, means: dict[str, float | None]) -> Comparison:
    a_only, b_only, n = discordant_counts(xa, xb)
    test = mcnemar_from_counts(a_only, b_only)
    low, high = tango_interval(a_only, b_only, n, level)
    mde = mcnemar_mde((a_only + b_only) / n, n, alpha=1.0 - level, power=power)
    return Comparison(n_pairs=n, **means, ci_low=low, ci_high=high, p_value=test.p_value, mcnemar=test, mde=mde,
                      verdict=_verdict(low, high, higher_is_better), level=level, method="tango", test="mcnemar")


def minimum_detectable_effect(
    sd_diff: float, n: int, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """Smallest mean difference a two-sided paired t test on ``n`` pairs detects with ``power``.

    Equal to ``statsmodels.stats.power.TTestPower().solve_power(nobs=n, alpha=alpha, power=power,
    alternative="two-sided") * sd_diff``. ``None`` with fewer than two pairs.
    """
    _check_alpha_power(alpha, power)
    if not (math.isfinite(sd_diff) and sd_diff >= 0.0):
        raise ValueError(f"sd_diff must be finite and non-negative, got {sd_diff!r}")
    if n < 2:
        return None
    if sd_diff == 0.0:
        return 0.0
    return _standardized_effect(int(n), alpha, power) * sd_diff


def _standardized_effect(n: int, alpha: float, power: float) -> float:
    """Cohen's d at which a two-sided one-sample t test on ``n`` observations reaches ``power``."""
    df = n - 1
    crit = float(stats.t.isf(alpha / 2.0, df))

    def shortfall(d: float) -> float:
        shift = d * math.sqrt(n)
        # Power of the two-sided test: both rejection tails under the noncentral t. The lower tail is
        # written as the upper tail at -shift because scipy's nct.cdf returns NaN once that mass underflows.
        reached = stats.nct.sf(crit, df, shift) + stats.nct.sf(crit, df, -shift)
        return float(reached) - power

    # Power is alpha at d = 0 and rises to 1, so doubling an upper end always brackets the root.
    high = 1.0
    while shortfall(high) < 0.0:
        high *= 2.0
    return float(optimize.brentq(shortfall, 0.0, high, xtol=1e-14, rtol=1e-14))


def _check_alpha_power(alpha: float, power: float) -> None:
    # Written so that NaN fails too. Power at or below alpha is reached by a zero effect: no MDE to find.
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not alpha < power < 1.0:
        raise ValueError(f"power must be above alpha and below 1, got power={power!r}, alpha={alpha!r}")


def _verdict(low: float, high: float, higher_is_better: bool) -> Verdict:
    if low > 0.0:
        return "better" if higher_is_better else "worse"
    if high < 0.0:
        return "worse" if higher_is_better else "better"
    return "no significant difference"
