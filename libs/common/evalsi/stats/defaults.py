"""Defaults of the statistics, in a module without numpy so limits, specs and the CLI can name them cheaply."""

from typing import Final

# Percentile-bootstrap resamples when a summary asks for none (0): the documented default (docs/statistics.md).
# Larger requests are bounded by limits.MAX_BOOTSTRAP_RESAMPLES, refused rather than lowered.
DEFAULT_BOOTSTRAP_RESAMPLES: Final = 2000

# The confidence level of every interval when a request, spec or summary asks for none (0).
DEFAULT_CONFIDENCE: Final = 0.95

# How p-values are adjusted across the metrics of one comparison (evalsi.stats.multiplicity): Holm by default.
ADJUSTMENTS: Final = ("holm", "bh", "none")
DEFAULT_ADJUSTMENT: Final = "holm"
