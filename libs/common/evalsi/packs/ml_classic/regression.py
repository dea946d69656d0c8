"""Regression: MAE, MSE, RMSE, R² and MAPE of a numeric prediction against a numeric label, in one pass.

Equal to scikit-learn's ``mean_absolute_error``, ``mean_squared_error``, ``root_mean_squared_error``,
``r2_score`` (a constant label: 1.0 for a perfect prediction, else 0.0, as its ``force_finite``) and
``mean_absolute_percentage_error`` (a label of 0 divides by machine epsilon, as there) on the same numbers.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from evalsi.evaluators import Output, evaluator
from evalsi.evaluators._evaluator import Stacked
from evalsi.packs.ml_classic._values import number
from evalsi.v1alpha1.record_pb2 import Record


def _numeric() -> ModuleType:
    from evalsi.packs.ml_classic import _errors  # numpy: loaded by the first reduce, not by the catalog

    return _errors


def _pair(record: Record, **_: Any) -> tuple[float, float]:
    return number(record.reference, "reference"), number(record.output, "output")


def _stack(pairs: list[tuple[float, float]]) -> Stacked:
    stacked: Stacked = _numeric().stack(pairs)
    return stacked


@evaluator(
    "builtin/regression",
    version="1.0.0",
    pack="ml-classic",
    scope="dataset",
    requires=["output", "reference"],
    mapper=_pair,
    stack=_stack,
    outputs=[
        Output("mae", "number", 0.0, None, higher_is_better=False, description="Mean absolute error."),
        Output("mse", "number", 0.0, None, higher_is_better=False, description="Mean squared error."),
        Output("rmse", "number", 0.0, None, higher_is_better=False, description="Root mean squared error."),
        Output("r2", "number", None, 1.0, description="Coefficient of determination (two records at least)."),
        Output("mape", "number", 0.0, None, higher_is_better=False,
               description="Mean absolute percentage error, as a fraction (0.1 is 10%)."),
    ],
)
def regression(values: Any) -> dict[str, float]:
    """Error of a numeric prediction (a row's prediction, a number, or text that parses as one) against the
    numeric label; R² is left out with fewer than two records, where it is undefined."""
    figures: dict[str, float] = _numeric().figures(values)
    return figures


EVALUATORS = (regression,)
