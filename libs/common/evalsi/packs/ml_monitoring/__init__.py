"""The ml-monitoring pack: drift between a reference split and the current records (PSI, KS, Jensen-Shannon),
data quality against a declared schema, and group fairness. Opt-in."""

from evalsi.evaluators import Pack
from evalsi.packs.ml_monitoring import drift, fairness, quality

PACK = Pack(
    name="ml-monitoring",
    evaluators=(*drift.EVALUATORS, *quality.EVALUATORS, *fairness.EVALUATORS),
    description="Model monitoring over tabular rows: feature drift against the records of a reference split "
    "(PSI, KS with p-value, Jensen-Shannon), data quality (missing, out of range, type mismatches) and fairness "
    "(demographic parity, equalized odds). Reference: SciPy, fairlearn's formulas.",
    default_on=False,
)

__all__ = ["PACK"]
