"""What the ml-classic evaluators read from a record: class labels, numbers, class probabilities, ranked ids.

A prediction is the record's output: a tabular row's ``prediction`` (``Content.row``; without one, the class of
highest probability), a text, or a JSON scalar. A label is the record's reference, read the same way. Labels are
compared as text (``records.content_text``: a string as is, a number or bool as canonical JSON), so the label
``1`` of a JSON file and the ``"1"`` of a CSV cell are one class, and the keys of ``probabilities`` (strings) name
the same classes. Whatever cannot be read is a ``SkipRecord`` naming the field and what is accepted, never a 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from evalsi.errors import SkipRecord
from evalsi.records import content_text, content_value, from_value
from evalsi.v1alpha1.record_pb2 import Content

MAX_CLASSES = 1_000  # a record's probabilities: more classes than this is not a classifier's output
MAX_RANKED = 10_000  # ids in a ranked output or a relevance judgement
def label(content: Content, field: str) -> str:
    """A class label: text, a JSON scalar, or a row's prediction (its most probable class when it has none)."""
    kind = content.WhichOneof("kind")
    if kind == "row":
        row = content.row
        if row.HasField("prediction") and row.prediction.WhichOneof("kind") not in ("struct_value", "list_value"):
            return content_text(content)
        if row.probabilities:
            probabilities = dict(row.probabilities)
            return max(sorted(probabilities), key=probabilities.__getitem__)  # ties: the first class in order
        raise SkipRecord(f"{field}: the row has no prediction and no probabilities")
    if kind == "text":
        return content.text
    if kind == "json" and content.json.WhichOneof("kind") not in ("struct_value", "list_value"):
        return content_text(content)
    raise SkipRecord(f"{field}: expected a class label (text, a JSON scalar or a row's prediction), got {kind}")


def number(content: Content, field: str) -> float:
    """A finite number: a JSON number, a text or JSON string that parses as one, or a row's numeric prediction."""
    value: Any
    if content.WhichOneof("kind") == "row":
        value = from_value(content.row.prediction) if content.row.HasField("prediction") else None
    else:
        value = content_value(content)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise SkipRecord(f"{field}: {value[:40]!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SkipRecord(f"{field}: expected a number, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise SkipRecord(f"{field}: {number} is not a finite number")
    return number


def probabilities(content: Content) -> dict[str, float]:
    """The class probabilities of a row's output (``Content.row.probabilities``), each in [0, 1]."""
    if content.WhichOneof("kind") != "row" or not content.row.probabilities:
        raise SkipRecord("output: no class probabilities (a row output's probabilities: "
                         '{"row": {"probabilities": {"<class>": p, ...}}})')
    given = content.row.probabilities
    found = {name: given[name] for name in given}  # dict(given) reads protobuf's map through Mapping's Python views
    if len(found) > MAX_CLASSES:
        raise SkipRecord(f"output: {len(found)} class probabilities, more than {MAX_CLASSES}")
    for name, probability in found.items():
        if not 0.0 <= probability <= 1.0:  # NaN fails this too
            raise SkipRecord(f"output: probability of {name!r} is {probability}, not in [0, 1]")
    return found


def ranked_ids(content: Content) -> list[str]:
    """A ranked list of ids, best first: a JSON list, or a text holding one (ids compared as text)."""
    value = content_value(content)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SkipRecord("output: expected a ranked JSON list of ids, got text that is not JSON") from None
    if not isinstance(value, list):
        raise SkipRecord(f"output: expected a ranked JSON list of ids, got {type(value).__name__}")
    if len(value) > MAX_RANKED:
        raise SkipRecord(f"output: {len(value)} ranked ids, more than {MAX_RANKED}")
    return [_id_text(item) for item in value]


def relevances(content: Content) -> dict[str, float]:
    """Relevance judgements: a list (or set) of relevant ids (each relevance 1), or ``{id: graded relevance}``."""
    value = content_value(content)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]  # one relevant id as plain text
    if isinstance(value, list):
        graded = {_id_text(item): 1.0 for item in value}
    elif isinstance(value, Mapping):
        graded = {}
        for key, grade in value.items():
            if isinstance(grade, bool) or not isinstance(grade, int | float) or not math.isfinite(grade) or grade < 0:
                raise SkipRecord(f"reference: relevance of {key!r} must be a finite number >= 0, got {grade!r}")
            graded[str(key)] = float(grade)
    else:
        raise SkipRecord("reference: expected relevant ids (a JSON list) or graded relevances ({id: grade}), "
                         f"got {type(value).__name__}")
    if len(graded) > MAX_RANKED:
        raise SkipRecord(f"reference: {len(graded)} judged ids, more than {MAX_RANKED}")
    return graded


def _id_text(item: object) -> str:
    return item if isinstance(item, str) else json.dumps(item, sort_keys=True)
