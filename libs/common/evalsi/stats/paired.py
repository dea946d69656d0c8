"""Paired comparison of two result sets scored on the same records (run A versus run B).

Pairing removes the between-record variance that dominates eval scores, so the interval on per-record
differences is much tighter than comparing two independent intervals.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

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

Verdict = Literal["better", "worse", "no significant difference", "insufficient data"]

# Below this many discordant pairs the chi-square approximation is poor, so McNemar uses the exact binomial.
_MCNEMAR_EXACT_BELOW: Final = 25


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on paired pass/fail outcomes.

    ``a_only`` counts records that passed in A and failed in B, ``b_only`` the reverse; only these
    discordant pairs carry information about a difference.
    """

    statistic: float
    p_value: float
    exact: bool
    a_only: int
    b_only: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Comparison:
    """B versus A on the same records; ``diff`` is mean(B - A) and the interval is on that difference.

    ``method`` is "t" (per-record differences) or "cluster-t" (differences clustered, e.g. trials of one
    record), or ``None`` when there is no interval. ``mde`` is the smallest true difference a two-sided
    paired t test at alpha = 1 - level would detect with the requested power.
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
    method: Literal["t", "cluster-t"] | None

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

    The interval and p-value come from a t test on the differences B - A, cluster-robust when
    ``clusters`` are given. The verdict says "better" or "worse" only when the interval excludes zero
    (flipped when lower is better), and "insufficient data" with fewer than two pairs (or clusters).
    McNemar's test is added when both sides are pass/fail (0/1) and there are no clusters: it assumes
    independent pairs, which trials sharing a record are not.
    """
    level = _check_level(level)
    _check_alpha_power(1.0 - level, power)
    xa = _as_values(a, "a")
    xb = _as_values(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"a and b must be aligned by record: got {xa.size} and {xb.size} values")
    n = xa.size
    diffs = xb - xa

    pass_fail = n > 0 and clusters is None and _is_binary(xa) and _is_binary(xb)
    mc = mcnemar(xa, xb) if pass_fail else None

    method: Literal["t", "cluster-t"] | None
    parts: tuple[float, float, int] | None = None
    if clusters is None:
        method = "t"
        if n >= 2:
            parts = _t_parts(diffs)
    else:
        method = "cluster-t"
        codes, n_clusters = _cluster_codes(clusters, n)
        if n_clusters >= 2:
            parts = _cluster_t_parts(diffs, codes, n_clusters)

    if parts is None:
        return Comparison(
            n_pairs=n,
            mean_a=_mean(xa),
            mean_b=_mean(xb),
            diff=_mean(diffs),
            ci_low=None,
            ci_high=None,
            p_value=None,
            mcnemar=mc,
            mde=None,
            verdict="insufficient data",
            level=level,
            method=None,
        )
    diff, se, df = parts
    low, high = _t_bounds(diff, se, df, level)
    # se * sqrt(units) is the sd of the differences when units are records, and its cluster-robust
    # analogue otherwise, so one MDE formula serves both with units = df + 1.
    units = df + 1
    mde = minimum_detectable_effect(se * math.sqrt(units), units, alpha=1.0 - level, power=power)
    return Comparison(
        n_pairs=n,
        mean_a=_mean(xa),
        mean_b=_mean(xb),
        diff=diff,
        ci_low=low,
        ci_high=high,
        p_value=_t_p_value(diff, se, df),
        mcnemar=mc,
        mde=mde,
        verdict=_verdict(low, high, higher_is_better),
        level=level,
        method=method,
    )


def mcnemar(a_pass: ArrayLike, b_pass: ArrayLike) -> McNemar:
    """McNemar's test for paired pass/fail outcomes (bool or 0/1), aligned by record.

    Exact binomial when there are fewer than 25 discordant pairs, else chi-square with continuity
    correction; equal to ``statsmodels.stats.contingency_tables.mcnemar(table, exact=..., correction=True)``.
    """
    pa = _as_pass_fail(a_pass, "a_pass")
    pb = _as_pass_fail(b_pass, "b_pass")
    if pa.size != pb.size:
        raise ValueError(f"a_pass and b_pass must be aligned by record: got {pa.size} and {pb.size} values")
    a_only = int(np.count_nonzero(pa & ~pb))
    b_only = int(np.count_nonzero(pb & ~pa))
    discordant = a_only + b_only
    if discordant < _MCNEMAR_EXACT_BELOW:
        statistic = float(min(a_only, b_only))
        # Two-sided exact p doubles the smaller tail; with a_only == b_only that exceeds 1, hence the cap.
        p_value = min(float(stats.binom.cdf(statistic, discordant, 0.5)) * 2.0, 1.0)
        return McNemar(statistic, p_value, True, a_only, b_only)
    statistic = (abs(a_only - b_only) - 1) ** 2 / discordant
    return McNemar(float(statistic), float(stats.chi2.sf(statistic, 1)), False, a_only, b_only)


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


def _as_pass_fail(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    x = _as_values(values, name)
    if not _is_binary(x):
        raise ValueError(f"{name} must be pass/fail (bool or 0/1), found {x[(x != 0.0) & (x != 1.0)][0]}")
    return x == 1.0
