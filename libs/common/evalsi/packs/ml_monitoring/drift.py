"""Drift of one feature between the reference records and the current ones: PSI, KS and Jensen-Shannon.

Both samples come from the run's dataset: the records whose ``metadata.<split_key>`` is the reference split, and
every other record. A feature is numeric when every value is a number (or a numeric string, as CSV cells are);
otherwise its values are categories (compared as text). Numeric values are binned by the reference's quantiles
(``bins`` of them, numpy's linear interpolation; repeated edges merged): bin i holds [q_i, q_{i+1}), the first and
last open-ended, so a current value outside the reference's range still counts. Categories are their own bins.
The bins are fixed from the whole data; the bootstrap resamples which records fall in them (weights), so its
re-reduces sort nothing.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import Stacked
from evalsi.packs.ml_monitoring._features import SPLIT_PARAMS, is_reference
from evalsi.packs.ml_monitoring._features import feature as feature_value
from evalsi.v1alpha1.record_pb2 import Record

PACK = "ml-monitoring"
_DRIFT_PARAMS = {"feature": "The row feature compared.", "bins": "Quantile bins of a numeric feature (2 to 1000).",
                 **SPLIT_PARAMS}


def _numeric() -> ModuleType:
    from evalsi.packs.ml_monitoring import _binned  # numpy: loaded by the first reduce, not by the catalog

    return _binned


def _mapper(record: Record, *, feature: str, split_key: str = "split", reference_split: str = "reference",
            **_: Any) -> tuple[bool, Any]:
    return is_reference(record, split_key, reference_split), feature_value(record, feature)


def _check(*, feature: str, bins: int = 10, split_key: str = "split", reference_split: str = "reference") -> None:
    if not feature:
        raise BadInputError("param 'feature' must name a row feature")
    if not 2 <= bins <= 1_000:
        raise BadInputError(f"param 'bins' must be between 2 and 1000, got {bins}")


def _stack(pairs: list[tuple[bool, Any]]) -> Stacked:
    stacked: Stacked = _numeric().stack(pairs)
    return stacked


@evaluator(
    "builtin/psi",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[Output("psi", "number", 0.0, None, higher_is_better=False,
                    description="Population stability index of the feature (0.1: moderate, 0.25: large shift).")],
    params=_DRIFT_PARAMS,
)
def psi(values: Any, *, feature: str, bins: int = 10, split_key: str = "split",
        reference_split: str = "reference") -> float:
    """Population stability index: the sum over bins of (current - reference share) x ln(current / reference
    share), each share floored at 1e-4."""
    return float(_numeric().psi(values, bins))


@evaluator(
    "builtin/js-divergence",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[
        Output("distance", "number", 0.0, 1.0, higher_is_better=False,
               description="Jensen-Shannon distance, base 2: scipy.spatial.distance.jensenshannon."),
        Output("divergence", "number", 0.0, 1.0, higher_is_better=False,
               description="Jensen-Shannon divergence, base 2: the distance squared."),
    ],
    params=_DRIFT_PARAMS,
)
def js_divergence(values: Any, *, feature: str, bins: int = 10, split_key: str = "split",
                  reference_split: str = "reference") -> dict[str, float]:
    """Jensen-Shannon distance (scipy's ``jensenshannon(reference, current, base=2)``) between the binned shares
    of the two samples, and the divergence, its square."""
    figures: dict[str, float] = _numeric().js(values, bins)
    return figures


@evaluator(
    "builtin/ks",
    version="1.0.0",
    pack=PACK,
    scope="dataset",
    requires=["output"],
    mapper=_mapper,
    stack=_stack,
    check=_check,
    outputs=[
        Output("statistic", "number", 0.0, 1.0, higher_is_better=False,
               description="Two-sample Kolmogorov-Smirnov statistic: the largest gap between the samples' CDFs."),
        Output("pvalue", "number", 0.0, 1.0, description="Its two-sided p-value (scipy.stats.ks_2samp); no "
                                                          "interval: a p-value is no bootstrap quantity."),
    ],
    params={name: doc for name, doc in _DRIFT_PARAMS.items() if name != "bins"},
)
def ks(values: Any, *, feature: str, split_key: str = "split", reference_split: str = "reference"
       ) -> dict[str, float]:
    """The two-sample KS statistic of a numeric feature, reference against current, and its two-sided p-value:
    scipy's ``ks_2samp`` (method ``auto``). It compares the values themselves, so it takes no ``bins``."""
    figures: dict[str, float] = _numeric().ks(values, feature)
    return figures


EVALUATORS = (psi, js_divergence, ks)
