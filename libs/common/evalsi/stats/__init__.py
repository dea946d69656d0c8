"""Statistics for Evals.si: every reported figure comes with an interval.

Pure functions over numpy arrays: no I/O, no global state, randomness only from an explicit seed.
Anything undefined (the mean of nothing, the spread of one value, an interval from one cluster) is
``None``, never NaN.

- ``intervals``: Wilson, Student-t and cluster-robust t intervals.
- ``bootstrap``: seeded percentile bootstrap, optionally by cluster.
- ``passk``: unbiased pass@k and pass^k per record, and their summaries.
- ``paired``: paired comparison of two runs on the same records (one test per metric kind), minimum detectable effect.
- ``paired_proportions``: paired pass/fail: McNemar's test, Tango's interval that inverts it, its power.
- ``multiplicity``: Holm and Benjamini-Hochberg adjustment of p-values across the metrics compared.
- ``power``: sample size and minimum detectable effect for the paired tests.
- ``summary``: ``summarize`` (mean, std, interval with an automatic method) and ``label_counts``.
- ``defaults``: ``DEFAULT_BOOTSTRAP_RESAMPLES`` and ``DEFAULT_CONFIDENCE``, the defaults every surface uses.
- ``weighted``: a dataset evaluator's mapped values stacked once as columns with a weight a row, which is how
  its bootstrap resamples are drawn (``evaluator(stack=...)``).

The submodules' names load on first use (numpy and scipy are slow to import).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES, DEFAULT_CONFIDENCE

if TYPE_CHECKING:
    from evalsi.stats.bootstrap import percentile_bootstrap
    from evalsi.stats.intervals import Bounds, Interval, cluster_robust_t, t_interval, wilson
    from evalsi.stats.multiplicity import adjust_p_values
    from evalsi.stats.paired import Comparison, Verdict, minimum_detectable_effect, paired_difference
    from evalsi.stats.paired_proportions import McNemar, mcnemar, tango_interval
    from evalsi.stats.passk import (
        pass_at_k,
        pass_at_k_array,
        pass_hat_k,
        pass_hat_k_array,
        summarize_pass_at_k,
        summarize_pass_hat_k,
    )
    from evalsi.stats.power import mcnemar_sample_size, t_sample_size
    from evalsi.stats.summary import Aggregate, IntervalMethod, LabelShare, label_counts, summarize

# The submodules import numpy and scipy (~1.5 s), so they load on first use: importing evalsi.stats for
# DEFAULT_BOOTSTRAP_RESAMPLES must not cost a CLI's start.
__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        ".bootstrap": ("percentile_bootstrap",),
        ".intervals": ("Bounds", "Interval", "cluster_robust_t", "t_interval", "wilson"),
        ".paired_proportions": ("McNemar", "mcnemar", "tango_interval"),
        ".multiplicity": ("adjust_p_values",),
        ".paired": ("Comparison", "Verdict", "minimum_detectable_effect", "paired_difference"),
        ".power": ("mcnemar_sample_size", "t_sample_size"),
        ".passk": (
            "pass_at_k",
            "pass_at_k_array",
            "pass_hat_k",
            "pass_hat_k_array",
            "summarize_pass_at_k",
            "summarize_pass_hat_k",
        ),
        ".summary": ("Aggregate", "IntervalMethod", "LabelShare", "label_counts", "summarize"),
    },
)


__all__ = [  # noqa: RUF022 - grouped by family, not sorted
    "DEFAULT_BOOTSTRAP_RESAMPLES",
    "DEFAULT_CONFIDENCE",
    # Summaries
    "Aggregate",
    "IntervalMethod",
    "LabelShare",
    "label_counts",
    "summarize",
    # Intervals
    "Bounds",
    "Interval",
    "cluster_robust_t",
    "percentile_bootstrap",
    "t_interval",
    "wilson",
    # pass@k and pass^k
    "pass_at_k",
    "pass_at_k_array",
    "pass_hat_k",
    "pass_hat_k_array",
    "summarize_pass_at_k",
    "summarize_pass_hat_k",
    # Paired comparison
    "Comparison",
    "McNemar",
    "Verdict",
    "mcnemar",
    "minimum_detectable_effect",
    "paired_difference",
    "tango_interval",
    "adjust_p_values",
    # Power
    "mcnemar_sample_size",
    "t_sample_size",
]
