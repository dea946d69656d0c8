"""Data quality of a record's row features against a declared schema: missing, out of range, wrong type.

The schema is the ``features`` param, inline (a served request names no file): ``{name: {"type": "number" |
"string" | "bool", "min": m, "max": M, "values": [allowed, ...], "required": true}}``, every key but ``type``
optional. Per record, each rate is the share of the declared features with that problem, so the run's mean of each
is the rate over every (record, feature) pair: a missing feature is neither out of range nor mistyped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from evalsi.errors import BadInputError
from evalsi.evaluators import Output, evaluator
from evalsi.packs.ml_monitoring._features import as_number
from evalsi.packs.ml_monitoring._features import features as row_features
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

_TYPES = ("number", "string", "bool")
_RULES = ("type", "min", "max", "values", "required")
MAX_FEATURES = 1_000


def _check(*, features: Mapping[str, Any]) -> None:
    if not features or len(features) > MAX_FEATURES:
        raise BadInputError(f"evaluator builtin/data-quality: param 'features' must declare 1 to {MAX_FEATURES} "
                            "features")
    for name, rule in features.items():
        where = f"evaluator builtin/data-quality: param features.{name}"
        if not isinstance(rule, Mapping):
            raise BadInputError(f"{where} must be an object like {{\"type\": \"number\", \"min\": 0}}")
        unknown = sorted(set(rule) - set(_RULES))
        if unknown:
            raise BadInputError(f"{where}: unknown key(s) {', '.join(unknown)} (accepted: {', '.join(_RULES)})")
        if rule.get("type") not in _TYPES:
            raise BadInputError(f"{where}.type must be one of {', '.join(_TYPES)}, got {rule.get('type')!r}")
        for bound in ("min", "max"):
            value = rule.get(bound)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value)):
                raise BadInputError(f"{where}.{bound} must be a finite number, got {value!r}")
        if "values" in rule and not isinstance(rule["values"], list):
            raise BadInputError(f"{where}.values must be a list of the allowed values")


def _problem(value: Any, rule: Mapping[str, Any]) -> str | None:
    """``"type"``, ``"range"`` or None for a present value."""
    kind = rule["type"]
    if kind == "number":
        number = as_number(value)
        if number is None:
            return "type"
        low, high = rule.get("min"), rule.get("max")
        if (low is not None and number < low) or (high is not None and number > high):
            return "range"
    elif kind == "bool":
        if not isinstance(value, bool) and not (isinstance(value, str) and value.lower() in ("true", "false")):
            return "type"
    elif not isinstance(value, str):
        return "type"
    allowed = rule.get("values")
    if allowed is not None and value not in allowed and str(value) not in map(str, allowed):
        return "range"
    return None


@evaluator(
    "builtin/data-quality",
    version="1.0.0",
    pack="ml-monitoring",
    cheap=True,  # one pass over the declared features, bounded by MAX_FEATURES
    check=_check,
    outputs=[
        Output("missing_rate", "number", 0.0, 1.0, higher_is_better=False,
               description="Share of declared features absent or null (those marked required: false excepted)."),
        Output("out_of_range_rate", "number", 0.0, 1.0, higher_is_better=False,
               description="Share outside [min, max] or not among the allowed values."),
        Output("type_mismatch_rate", "number", 0.0, 1.0, higher_is_better=False,
               description="Share whose value is not of the declared type."),
        Output("clean", "boolean", description="No declared feature has a problem."),
    ],
    params={"features": "The schema: {name: {type: number|string|bool, min, max, values, required}}."},
)
def data_quality(record: Record, *, features: Mapping[str, Any]) -> list[Score]:
    """Missing, out-of-range and mistyped features of the record's row against the schema; the explanation names
    each problem. A number may be a numeric string (CSV cells are strings), a bool ``true``/``false``."""
    row = row_features(record)
    counts = {"missing": 0, "range": 0, "type": 0}
    problems: list[str] = []
    for name, rule in features.items():
        value = row.get(name)
        if value is None:
            if rule.get("required", True):
                counts["missing"] += 1
                problems.append(f"{name}: missing")
            continue
        problem = _problem(value, rule)
        if problem is not None:
            counts[problem] += 1
            problems.append(f"{name}: {'out of range' if problem == 'range' else 'not a ' + rule['type']} "
                            f"({repr(value)[:40]})")
    total = len(features)
    explanation = "; ".join(problems[:20])
    return [
        Score(name="missing_rate", number=counts["missing"] / total),
        Score(name="out_of_range_rate", number=counts["range"] / total),
        Score(name="type_mismatch_rate", number=counts["type"] / total),
        Score(name="clean", passed=not problems, explanation=explanation),
    ]


EVALUATORS = (data_quality,)
