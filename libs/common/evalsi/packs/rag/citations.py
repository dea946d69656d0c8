"""Citation accuracy: do the output's citations point at context items, and at the ones that support it?

Accepted citation syntaxes, in square brackets: ``[1]``, ``[^1]`` (a footnote), ``[1, 3]`` or ``[1; 3]``, ranges
``[1-3]`` and ``[2–4]``, and document ids ``[doc-a]`` / ``[doc-a, doc-b]``. Numbers are 1-based positions in the
record's context. Ids name a context item by the ``id`` of a JSON context item (``{"id": "doc-a", "text": ...}``)
or by the record's ``metadata.context_ids`` list (one id per context item). A markdown link ``[text](url)`` is
not a citation; non-numeric bracket text counts as a citation only when the context has ids to resolve it against.

Which items support the answer comes from ``metadata.supporting`` (positions or ids), when the record has it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from google.protobuf import struct_pb2

from evalsi.errors import SkipRecord
from evalsi.evaluators import Output, evaluator
from evalsi.records import content_text
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import Score

IDS_KEY = "context_ids"
SUPPORTING_KEY = "supporting"
MAX_RANGE = 100  # items one range citation may name ([1-100])
_SEPARATORS = (",", ";")


# Bracket text up to 200 characters, and whether a "(" follows (a markdown link, not a citation). Python's engine
# is safe on this fixed pattern: the class excludes the closing bracket, so each start scans at most 201 characters
# and nothing backtracks beyond that; RE2's wrapper costs more per match than the whole scan here.
_BRACKETS = re.compile(r"\[\^?([^\[\]\n]{1,200})\](\()?")


def _range(token: str) -> list[str] | None:
    for dash in ("-", "\u2013"):
        low, sep, high = token.partition(dash)
        if sep and low.strip().isdecimal() and high.strip().isdecimal():
            first, last = int(low), int(high)
            if first <= last and last - first < MAX_RANGE:
                return [str(n) for n in range(first, last + 1)]
    return None


def citations(text: str, with_ids: bool | Callable[[], bool]) -> list[str]:
    """The citation tokens in ``text``, in order (numbers as decimal strings, ranges expanded, ids as written).
    ``with_ids``: whether the context has ids, or a function saying so, asked only when a bracket holds a word."""
    found: list[str] = []
    if "[" not in text:
        return found
    for body, link in _BRACKETS.findall(text):
        if link:
            continue
        if body.isdecimal():  # [3], the usual citation: what the general path below makes of it
            found.append(body)
            continue
        for separator in _SEPARATORS[1:]:
            body = body.replace(separator, _SEPARATORS[0])
        tokens = [t.strip() for t in body.split(_SEPARATORS[0])]
        if not all(tokens):
            continue
        expanded: list[str] = []
        for token in tokens:
            spanned = _range(token)
            if spanned is not None:
                expanded.extend(spanned)
            elif token.isdecimal() or (" " not in token and (with_ids() if callable(with_ids) else with_ids)):
                expanded.append(token)
            else:
                expanded = []
                break
        found.extend(expanded)
    return found


def context_ids(record: Record) -> list[str]:
    """One id per context item ("" where it has none): ``metadata.context_ids``, else each JSON item's ``id``."""
    if IDS_KEY in record.metadata:
        value = record.metadata[IDS_KEY]
        items = list(value.list_value.values) if value.WhichOneof("kind") == "list_value" else []
        if len(items) != len(record.context) or not all(v.WhichOneof("kind") == "string_value" for v in items):
            raise ValueError(f"metadata.{IDS_KEY} must be a list of {len(record.context)} strings, one per "
                             "context item")
        return [v.string_value for v in items]
    ids = []
    for item in record.context:
        fields = item.json.struct_value.fields if item.WhichOneof("kind") == "json" else None
        named = fields.get("id") if fields is not None else None
        ids.append(named.string_value if named is not None and named.WhichOneof("kind") == "string_value" else "")
    return ids


class _Ids:
    """A record's context ids, read when first needed: most records cite by number and name their support by
    number, and reading each context item's kind costs more than the rest of the evaluation. Ids in metadata are
    read at once, so that a bad list is the record's error whatever the output cites."""

    def __init__(self, record: Record) -> None:
        self._record = record
        self._ids = context_ids(record) if IDS_KEY in record.metadata else None

    def __call__(self) -> list[str]:
        if self._ids is None:
            self._ids = context_ids(self._record)
        return self._ids

    def any(self) -> bool:
        return any(self())


def resolve(token: str, count: int, ids: Sequence[str] | Callable[[], Sequence[str]]) -> int | None:
    """The 0-based context index a citation names, or None when it names none."""
    if token.isdecimal():
        index = int(token) - 1
        return index if 0 <= index < count else None
    named = ids() if callable(ids) else ids
    return named.index(token) if token in named else None


def supporting(record: Record, ids: Sequence[str] | Callable[[], Sequence[str]], count: int | None = None
               ) -> set[int] | None:
    """The context indexes in ``metadata.supporting`` (1-based positions or ids), None when it is absent.
    ``count``: the record's number of context items, when the caller has it."""
    metadata = record.metadata
    if SUPPORTING_KEY not in metadata:
        return None
    count = len(record.context) if count is None else count
    value = metadata[SUPPORTING_KEY]
    items: list[struct_pb2.Value] = (list(value.list_value.values) if value.WhichOneof("kind") == "list_value"
                                     else [value])
    found = set()
    for item in items:
        kind = item.WhichOneof("kind")
        token = (str(int(item.number_value)) if kind == "number_value" and item.number_value.is_integer()
                 else item.string_value if kind == "string_value" else "")
        index = resolve(token, count, ids) if token else None
        if index is None:
            raise ValueError(f"metadata.{SUPPORTING_KEY} names {from_item(item)}, which is no context item "
                             f"(1..{count} or an id)")
        found.add(index)
    return found


def from_item(item: struct_pb2.Value) -> str:
    kind = item.WhichOneof("kind")
    return repr(item.string_value) if kind == "string_value" else f"{item.number_value:g}" if kind else "nothing"


@evaluator(
    "builtin/citation-accuracy",
    version="1.0.0",
    requires=("output", "context"),
    cheap=True,
    outputs=[
        Output("valid", "number", min=0.0, max=1.0,
               description="Citations that point at an existing context item / citations"),
        Output("precision", "number", min=0.0, max=1.0,
               description="Cited items that are supporting / cited items (needs metadata.supporting)"),
        Output("recall", "number", min=0.0, max=1.0,
               description="Supporting items cited / supporting items (needs metadata.supporting)"),
    ],
    pack="rag",
)
def citation_accuracy(record: Record) -> list[Score]:
    """Deterministic: the output's citations ([1], [1, 3], [2-4], [^1], or a document id in brackets) must point at
    existing context items (``valid``); with ``metadata.supporting`` naming the items that support the answer, the
    precision and recall of the cited items against them. Outputs that cannot be computed for a record are left out.
    """
    ids = _Ids(record)
    tokens = citations(content_text(record.output), with_ids=ids.any)
    count = len(record.context)
    resolved = [resolve(token, count, ids) for token in tokens]
    cited = {index for index in resolved if index is not None}
    scores = []
    if tokens:
        dangling = [token for token, index in zip(tokens, resolved, strict=True) if index is None]
        valid = Score(name="valid", number=(len(tokens) - len(dangling)) / len(tokens),
                      explanation=f"{len(tokens) - len(dangling)} of {len(tokens)} citations point at a context item")
        if dangling:
            valid.explanation += f"; dangling: {', '.join(dict.fromkeys(dangling))}"
        scores.append(valid)
    needed = supporting(record, ids, count)
    if needed is not None:
        hit = cited & needed
        if cited:
            scores.append(Score(name="precision", number=len(hit) / len(cited),
                                explanation=f"{len(hit)} of {len(cited)} cited items are supporting"))
        if needed:
            scores.append(Score(name="recall", number=len(hit) / len(needed),
                                explanation=f"{len(hit)} of {len(needed)} supporting items cited"))
    if not scores:
        raise SkipRecord("no citations in the output and no metadata.supporting: nothing to score")
    return scores


EVALUATORS = (citation_accuracy,)
