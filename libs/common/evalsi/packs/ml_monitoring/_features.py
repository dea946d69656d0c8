"""Reading a record's features for the monitoring evaluators.

Features are a tabular row's (``Content.row.features``): the output's, or else the input's. A CSV cell arrives as
a string, so a numeric feature is a number or a string that parses as one. The reference sample of a drift metric
is the records of the run's own dataset whose ``metadata.<split_key>`` is the reference split: a served request
names no file, and the same data drives an embedded and a served run.
"""

from __future__ import annotations

import math
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import Record

SPLIT_PARAMS = {
    "split_key": "The metadata key that marks a record's split.",
    "reference_split": "The split value of the reference records; every other record is the current sample.",
}


def features(record: Record) -> dict[str, Any]:
    """The record's row features as plain values (the output's row, else the input's)."""
    for content in (record.output, record.input):
        if content.WhichOneof("kind") == "row":
            return {name: from_value(value) for name, value in content.row.features.items()}
    raise SkipRecord("no tabular row (Content.row) in the output or the input to read features from")


def row_feature(record: Record, name: str) -> Any:
    """``features(record).get(name)``, converting only that feature (a mapper reads one feature of every record)."""
    for content in (record.output, record.input):
        if content.WhichOneof("kind") == "row":
            found = content.row.features
            return from_value(found[name]) if name in found else None
    raise SkipRecord("no tabular row (Content.row) in the output or the input to read features from")


def feature(record: Record, name: str) -> Any:
    """One feature's value; a feature the row lacks (or holds as null) skips the record, naming it."""
    found = row_feature(record, name)
    if found is None:
        raise SkipRecord(f"feature {name!r} is missing from the row")
    return found


def as_number(value: Any) -> float | None:
    """A finite number from a number or a numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def is_reference(record: Record, split_key: str, reference_split: str) -> bool:
    if split_key not in record.metadata:
        return False
    value = record.metadata[split_key]
    return value.WhichOneof("kind") == "string_value" and value.string_value == reference_split
