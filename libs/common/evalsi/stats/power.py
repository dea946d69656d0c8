"""Sample size and minimum detectable effect for the paired tests ``paired_difference`` uses.

"How many records do I need to see a difference of d?" depends on the test: for pass/fail metrics McNemar's
(sized by the share of discordant pairs, Connor 1987), for numbers the paired t test (sized by the standard
deviation of the per-record differences; equal to statsmodels' ``TTestPower``).
"""

from __future__ import annotations

import math

from scipy import stats

from evalsi.stats.paired import minimum_detectable_effect
from evalsi.stats.paired_proportions import mcnemar_mde, mcnemar_sample_size


def t_power(diff: float, sd_diff: float, n: int, alpha: float) -> float:
    """Power of the two-sided paired t test at ``n`` pairs for a true mean difference ``diff``."""
    df = n - 1
    crit = float(stats.t.isf(alpha / 2.0, df))
    shift = abs(diff) / sd_diff * math.sqrt(n)
    return float(stats.nct.sf(crit, df, shift) + stats.nct.sf(crit, df, -shift))


def t_sample_size(diff: float, sd_diff: float, alpha: float, power: float) -> int:
    """Pairs the paired t test needs to detect ``diff`` with ``power`` (the smallest such n)."""
    if diff == 0.0:
        raise ValueError("a difference of zero cannot be detected; give a non-zero difference")
    if not (math.isfinite(sd_diff) and sd_diff > 0.0):
        raise ValueError(f"the standard deviation of the differences must be positive, got {sd_diff!r}")
    if t_power(diff, sd_diff, 2, alpha) >= power:
        return 2
    low, high = 2, 4  # power rises with n: double until enough, then bisect for the smallest n that is
    while t_power(diff, sd_diff, high, alpha) < power:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if t_power(diff, sd_diff, middle, alpha) >= power:
            high = middle
        else:
            low = middle
    return high


__all__ = ["mcnemar_mde", "mcnemar_sample_size", "minimum_detectable_effect", "t_power", "t_sample_size"]
