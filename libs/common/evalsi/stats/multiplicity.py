"""Adjusting p-values when many metrics are compared at once.

Comparing m metrics at alpha each raises the chance of at least one false "worse" towards 1 - (1 - alpha)^m.
Holm's step-down method controls that family-wise error rate at alpha for any dependence between the metrics
(the default); Benjamini-Hochberg controls the expected share of false findings among the significant ones
(valid for independent or positively dependent tests), which is less strict when many metrics are compared.
Both equal ``statsmodels.stats.multitest.multipletests(p, method="holm" | "fdr_bh")[1]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from evalsi.stats.defaults import ADJUSTMENTS, DEFAULT_ADJUSTMENT

Adjustment = Literal["holm", "bh", "none"]  # ADJUSTMENTS


def adjust_p_values(p_values: Sequence[float], method: str = DEFAULT_ADJUSTMENT) -> list[float]:
    """The adjusted p-values, in the order given; a metric is significant when its adjusted p < alpha."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"unknown adjustment {method!r}; accepted: {', '.join(ADJUSTMENTS)}")
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1 or not np.all((p >= 0.0) & (p <= 1.0)):
        raise ValueError("p-values must be a flat sequence of numbers in [0, 1]")
    m = p.size
    if m == 0 or method == "none":
        return [float(v) for v in p]
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    if method == "holm":
        # Step down: the i-th smallest (0-based) is multiplied by m - i, then made non-decreasing.
        stepped = np.maximum.accumulate((m - np.arange(m)) * ranked)
    else:
        # Step up: the i-th smallest (1-based rank r) is multiplied by m / r, then made non-increasing from the top.
        stepped = np.minimum.accumulate((m / np.arange(1, m + 1) * ranked)[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in adjusted]
