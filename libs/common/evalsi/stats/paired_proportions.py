"""Paired pass/fail outcomes: McNemar's test, Tango's score interval that inverts it, and its power.

One test gives the p-value, the interval and the verdict, so they cannot disagree. McNemar's asymptotic test
without continuity correction is the score test of "no difference"; Tango's (1998) interval for the difference
of paired proportions is the set of differences that same score test does not reject. At a difference of zero
Tango's statistic *is* McNemar's z, so the interval excludes zero exactly when McNemar's p is below alpha.
Fagerland, Lydersen and Laake (2013, BMC Med Res Methodol 13:91) recommend this asymptotic McNemar test over the
exact conditional one (which is conservative), and Tango's interval among the intervals for paired differences;
``benchmarks/coverage.py`` checks its coverage on our grid.

Counts follow the comparison's direction, B against A: ``b_only`` records pass in B and fail in A, ``a_only``
the reverse; the difference is (b_only - a_only) / n, mean(B) - mean(A).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from evalsi.stats.intervals import Interval, _as_values, _is_binary

# Keeps the root search off the ends of (-1, 1), where the score statistic's variance can vanish.
_EDGE = 1e-12


@dataclass(frozen=True)
class McNemar:
    """McNemar's test on paired pass/fail outcomes: ``statistic`` is the chi-square (z squared), 1 df."""

    statistic: float
    p_value: float
    a_only: int
    b_only: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def discordant_counts(a_pass: ArrayLike, b_pass: ArrayLike) -> tuple[int, int, int]:
    """(a_only, b_only, n) for two aligned pass/fail sequences (bool or 0/1)."""
    pa = _as_pass_fail(a_pass, "a_pass")
    pb = _as_pass_fail(b_pass, "b_pass")
    if pa.size != pb.size:
        raise ValueError(f"a_pass and b_pass must be aligned by record: got {pa.size} and {pb.size} values")
    return int(np.count_nonzero(pa & ~pb)), int(np.count_nonzero(pb & ~pa)), int(pa.size)


def mcnemar(a_pass: ArrayLike, b_pass: ArrayLike) -> McNemar:
    """McNemar's asymptotic test without continuity correction, aligned by record; equal to
    ``statsmodels.stats.contingency_tables.mcnemar(table, exact=False, correction=False)``. With no discordant
    pair there is no evidence of a difference: statistic 0, p = 1."""
    a_only, b_only, _ = discordant_counts(a_pass, b_pass)
    return mcnemar_from_counts(a_only, b_only)


def mcnemar_from_counts(a_only: int, b_only: int) -> McNemar:
    discordant = a_only + b_only
    if discordant == 0:
        return McNemar(0.0, 1.0, a_only, b_only)
    statistic = (b_only - a_only) ** 2 / discordant
    return McNemar(float(statistic), float(special.chdtrc(1, statistic)), a_only, b_only)


def tango_interval(a_only: int, b_only: int, n: int, level: float) -> Interval:
    """Tango's score interval for mean(B) - mean(A) from the discordant counts out of ``n`` pairs (n >= 1).

    The set of differences d whose score statistic T(d) lies within +-z; T falls as d rises, so each bound is
    one root, found by Brent's method to 1e-12.
    """
    if n < 1 or a_only < 0 or b_only < 0 or a_only + b_only > n:
        raise ValueError(f"need 0 <= a_only + b_only <= n and n >= 1, got a_only={a_only}, b_only={b_only}, n={n}")
    z = _z(level)
    estimate = (b_only - a_only) / n
    low = -1.0 if estimate == -1.0 else _root(lambda d: tango_statistic(a_only, b_only, n, d) - z, -1.0, estimate)
    high = 1.0 if estimate == 1.0 else _root(lambda d: tango_statistic(a_only, b_only, n, d) + z, estimate, 1.0)
    return low, high


def tango_statistic(a_only: int, b_only: int, n: int, diff: float) -> float:
    """Tango's score statistic for the null "mean(B) - mean(A) = diff".

    In Tango's notation B's pass with A's fail is cell 12 and the reverse cell 21, so diff = p12 - p21 and
    T = (n12 - n21 - n diff) / sqrt(n (2 q + diff (1 - diff))), where q is the maximum-likelihood p21 under the
    null: the root of 2n q^2 + B q + C with B = -(n12 + n21) + (2n - n12 + n21) diff, C = -n21 diff (1 - diff).
    """
    quad_a = 2.0 * n
    quad_b = -(b_only + a_only) + (2.0 * n - b_only + a_only) * diff
    quad_c = -a_only * diff * (1.0 - diff)
    q = (math.sqrt(max(quad_b * quad_b - 4.0 * quad_a * quad_c, 0.0)) - quad_b) / (2.0 * quad_a)
    variance = n * (2.0 * q + diff * (1.0 - diff))
    numerator = b_only - a_only - n * diff
    if variance <= 0.0:
        return math.copysign(math.inf, numerator) if numerator else 0.0
    return numerator / math.sqrt(variance)


def mcnemar_power(diff: float, discordance: float, n: int, alpha: float) -> float:
    """Power of the two-sided test at ``n`` pairs when the true difference is ``diff`` and the probability of a
    discordant pair ``discordance`` (Connor 1987's normal approximation)."""
    if not 0.0 < discordance <= 1.0 or abs(diff) > discordance:
        raise ValueError(f"need 0 < discordance <= 1 and |diff| <= discordance, got {discordance}, {diff}")
    spread = math.sqrt(max(discordance - diff * diff, 1e-300))
    z = _z(1.0 - alpha)
    shift = math.sqrt(n) * abs(diff)
    return float(special.ndtr((shift - z * math.sqrt(discordance)) / spread)
                 + special.ndtr((-shift - z * math.sqrt(discordance)) / spread))


def mcnemar_sample_size(diff: float, discordance: float, alpha: float, power: float) -> int:
    """Pairs needed to detect ``diff`` with ``power`` (Connor 1987), rounded up. A difference cannot be larger
    than the share of discordant pairs, so the discordance is taken as at least |diff|."""
    if diff == 0.0:
        raise ValueError("a difference of zero cannot be detected; give a non-zero difference")
    discordance = max(discordance, abs(diff))
    mcnemar_power(diff, discordance, 1, alpha)  # validates the inputs
    z_alpha, z_beta = _z(1.0 - alpha), float(special.ndtri(power))
    spread = math.sqrt(max(discordance - diff * diff, 0.0))
    n = (z_alpha * math.sqrt(discordance) + z_beta * spread) ** 2 / (diff * diff)
    return max(2, math.ceil(n - 1e-9))


def mcnemar_mde(discordance: float, n: int, alpha: float, power: float) -> float | None:
    """Smallest |difference| the test detects with ``power`` at ``n`` pairs when a share ``discordance`` of pairs
    differ, that share taken as at least the difference itself; ``None`` below two pairs."""
    if n < 2 or not 0.0 <= discordance <= 1.0:
        return None

    def shortfall(d: float) -> float:
        return mcnemar_power(d, max(discordance, d), n, alpha) - power

    return _root(shortfall, 1e-9, 1.0)


def _root(f: Any, low: float, high: float) -> float:
    low, high = max(low, -1.0 + _EDGE), min(high, 1.0 - _EDGE)
    f_low, f_high = f(low), f(high)
    if f_low == 0.0:
        return low
    if f_high == 0.0:
        return high
    if (f_low > 0.0) == (f_high > 0.0):  # no sign change inside: the bound is the end of the range
        return low if abs(f_low) < abs(f_high) else high
    return float(optimize.brentq(f, low, high, xtol=1e-14, rtol=1e-13))


def _z(level: float) -> float:
    return float(-special.ndtri((1.0 - level) / 2.0))


def _as_pass_fail(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    x = _as_values(values, name)
    if not _is_binary(x):
        raise ValueError(f"{name} must be pass/fail (bool or 0/1), found {x[(x != 0.0) & (x != 1.0)][0]}")
    return x == 1.0
