"""Trace summaries from span rows, and the span rows of the traces a ClickHouse store summarized last (pure).

A summary pass or a completion in ClickHouse used to read a trace's spans back (``spans FINAL``) whenever the
trace had a summary already: at a completion, about 19 ms of server CPU and 9 ms of the ingest process's per 400
traces. ``KnownTraces`` keeps, for the traces this store summarized, the rows it summed and the version of the
summary row it wrote. While that row is still the newest (no other writer summarized the trace since) and no other
process or replica stored spans of it (the assembler knows: they tell the owner), those rows plus the spans this
store wrote since are all the trace's spans, and nothing needs reading back.
"""

from __future__ import annotations

from collections import OrderedDict
from operator import itemgetter
from typing import Any

from evalsi.traces.model import MappedSpan, counts_toward_usage
from evalsi.v1alpha1.record_pb2 import Step

# A span's summary columns: trace_id, span_id, parent_span_id, name, service_name, session_id, start_ns, end_ns,
# error, input_tokens, output_tokens.
SpanRow = tuple[Any, ...]
_START_AND_SPAN = itemgetter(6, 1)  # (start_ns, span_id): the order of a trace's spans


_NO_TOKENS = (0, 0)


def usage_tokens(step: Step) -> tuple[int, int]:
    """The input and output tokens a step adds to its trace's sums (the ``spans`` columns of those names)."""
    if counts_toward_usage(step) and step.HasField("usage"):
        usage = step.usage
        return usage.input_tokens, usage.output_tokens
    return _NO_TOKENS


def span_row(span: MappedSpan) -> SpanRow:
    """A span's summary columns, as the ClickHouse store writes them (``spans`` columns of the same names): what
    another ingest process sends a trace's owner, so the owner sums the trace without reading it back."""
    return (span.trace_id, span.span_id, span.parent_span_id, span.name, span.service_name, span.session_id,
            span.start_ns, span.end_ns, int(span.error), *usage_tokens(span.bare_step))


def sums(rows: list[SpanRow]) -> tuple[Any, ...]:
    """A trace's summary columns from root_span_id to output_tokens, from its spans' rows."""
    rows.sort(key=_START_AND_SPAN)  # (start_ns, span_id), as the SQLite store orders
    root = next((r for r in rows if r[2] == ""), None)
    first = rows[0]
    session = next((r[5] for r in rows if r[5] != ""), "")
    # One pass for the sums (this runs for every trace summarized): columns 7 to 10 are end_ns, error and tokens.
    end, errors, tokens_in, tokens_out = zip(*(r[7:11] for r in rows), strict=True)
    return (root[1] if root else "", root[3] if root else "", root[4] if root else first[4], session, first[6],
            max(end), len(rows), sum(errors), sum(tokens_in), sum(tokens_out))


class KnownTraces:
    """The span rows (by span id) behind the last summary row this store wrote for each trace, and that row's
    version; for the most recently summarized traces, ``limit`` rows in all (some 600 bytes each: a trace forgotten
    is read back, never guessed, so the bound costs reads, not answers)."""

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self._traces: OrderedDict[tuple[str, str], tuple[int, dict[str, SpanRow]]] = OrderedDict()
        self._rows = 0

    def __len__(self) -> int:
        return len(self._traces)

    def rows(self, project: str, trace_id: str, newest_version: int) -> dict[str, SpanRow] | None:
        """The rows summed into this trace's newest summary row (``newest_version``), if this store wrote it."""
        known = self._traces.get((project, trace_id))
        return known[1] if known is not None and known[0] == newest_version else None

    @property
    def rows_held(self) -> int:
        return self._rows

    def remember(self, project: str, trace_id: str, version: int, rows: dict[str, SpanRow]) -> None:
        key = (project, trace_id)
        before = self._traces.pop(key, None)
        if before is not None:
            self._rows -= len(before[1])
        self._traces[key] = (version, rows)
        self._rows += len(rows)
        while self._rows > self.limit:
            _, (_, dropped) = self._traces.popitem(last=False)
            self._rows -= len(dropped)
