"""Regression: MAE, MSE, RMSE, R² and MAPE of a numeric prediction against a numeric label, in one pass.

Equal to scikit-learn's ``mean_absolute_error``, ``mean_squared_error``, ``root_mean_squared_error``,
``r2_score`` (a constant label: 1.0 for a perfect prediction, else 0.0, as its ``force_finite``) and
``mean_absolute_percentage_error`` (a label of 0 divides by machine epsilon, as there) on the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_classic._values import number
from evalsi.packs.ml_classic._weighted import Weighted, ones, weighted
from evalsi.v1alpha1.record_pb2 import Record

_EPS = float(np.finfo(np.float64).eps)
Pairs = tuple[NDArray[np.float64], NDArray[np.float64]]


def _pair(record: Record, **_: Any) -> tuple[float, float]:
    return number(record.reference, "reference"), number(record.output, "output")


def _stack(pairs: list[tuple[float, float]]) -> Weighted[Pairs]:
    both = np.asarray(pairs, dtype=np.float64)
    return ones((both[:, 0], both[:, 1]), len(pairs))


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
    data = weighted(values, "a numeric label in its reference and a numeric prediction in its output")
    truths, predictions = data.columns
    weights = data.weights
    total = weights.sum()
    errors = truths - predictions
    squared = float((weights * errors**2).sum())
    mse = squared / total
    figures = {
        "mae": float((weights * np.abs(errors)).sum() / total),
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mape": float((weights * np.abs(errors) / np.maximum(np.abs(truths), _EPS)).sum() / total),
    }
    if np.count_nonzero(weights) >= 2:
        spread = float((weights * (truths - (weights * truths).sum() / total) ** 2).sum())
        figures["r2"] = 1.0 - squared / spread if spread != 0 else (1.0 if squared == 0 else 0.0)
    return figures


EVALUATORS = (regression,)
