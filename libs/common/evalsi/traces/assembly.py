"""Record assembly: the mapped spans of one trace into a ``Record``. Pure: a function of the spans alone.

The record of a trace:
- ``trajectory``: every step, ordered by start time (then span id), with parent ids, the trace id and the
  first session id found;
- ``input``: the first user message of the first step that has one, else the root step's input;
- ``output``: the last non-empty assistant message of the last step that has one, else the root step's output; a
  tabular prediction (``evalsi.row.*`` attributes on the root span) is the output row instead;
- ``usage``: tokens summed over LLM and embedding steps only (``counts_toward_usage``), latency from the first
  start to the last end;
- ``provenance`` and ``metadata``: trace, root span, project, session, service, span and error counts.

OTLP log records stored beside the spans (``is_log_row``) fold into the step of their span (``merge_log_rows``).
This is the read side of the trace model: the trace stores answer ``get_trace`` with it and online policies
select on it, so it lives with the model, not in ingest (which only writes spans).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evalsi.projects import DEFAULT_PROJECT
from evalsi.records import ROW_ATTRIBUTE, from_value, row_from_attributes, tabular_row, to_value
from evalsi.v1alpha1.record_pb2 import Content, Messages, Record, Step, Usage

from .model import PLACEHOLDER, MappedSpan, counts_toward_usage, is_log_row

_LOGS_KEY = "otel.logs"  # where assembly lists a step's log records


def root_of(spans: Sequence[MappedSpan]) -> MappedSpan | None:
    """The earliest span without a parent, else (a trace whose root has not arrived) None."""
    roots = [span for span in spans if not span.parent_span_id]
    return min(roots, key=lambda s: (s.start_ns, s.span_id)) if roots else None


def _first_user_text(steps: Iterable[Step]) -> str | None:
    for step in steps:
        if step.input.WhichOneof("kind") == "messages":
            for message in step.input.messages.messages:
                if message.role == "user" and message.content:
                    return message.content
    return None


def _last_assistant_text(steps: Sequence[Step]) -> str | None:
    for step in reversed(steps):
        if step.output.WhichOneof("kind") == "messages":
            for message in reversed(step.output.messages.messages):
                if message.role == "assistant" and message.content:
                    return message.content
    return None


def sum_usage(steps: Iterable[Step]) -> Usage:
    usage = Usage()
    for step in steps:
        if counts_toward_usage(step) and step.HasField("usage"):
            usage.input_tokens += step.usage.input_tokens
            usage.output_tokens += step.usage.output_tokens
            usage.total_tokens += step.usage.total_tokens
            usage.cached_input_tokens += step.usage.cached_input_tokens
            usage.reasoning_tokens += step.usage.reasoning_tokens
            if step.usage.HasField("cost_usd"):  # a trace's cost is known when any step's is
                usage.cost_usd += step.usage.cost_usd
    return usage


def assemble_record(spans: Sequence[MappedSpan], *, project: str = DEFAULT_PROJECT) -> Record:
    """The Record of one trace from all of its spans received so far (any order)."""
    if not spans:
        raise ValueError("a trace needs at least one span")
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    if any(PLACEHOLDER in span.step.attributes for span in ordered):
        # Logfire's pending spans announce a span that started; once the real one (their parent) is here they
        # only repeat it. Kept in the store, left out of the trajectory.
        ids = {span.span_id for span in ordered}
        ordered = [span for span in ordered
                   if not (PLACEHOLDER in span.step.attributes and span.parent_span_id in ids)]
    log_rows = [span for span in ordered if is_log_row(span)]
    if log_rows:  # log records (GenAI events) fold into their span's step; those whose span is missing stay
        ordered = [span for span in ordered if not is_log_row(span)]
        by_span = {span.span_id: span.step for span in ordered}
        ordered = sorted([*ordered, *merge_log_rows(by_span, log_rows)], key=lambda s: (s.start_ns, s.span_id))
        steps = [by_span.get(span.span_id, span.step) for span in ordered]
    else:
        steps = [span.step for span in ordered]
    root = root_of(ordered)
    trace_id = ordered[0].trace_id
    session = next((span.session_id for span in ordered if span.session_id), "")
    record = Record(id=trace_id)
    record.trajectory.trace_id = trace_id
    record.trajectory.session_id = session
    record.trajectory.steps.extend(steps)

    user = _first_user_text(steps)
    if user is not None:
        record.input.CopyFrom(Content(text=user))
    elif root is not None and root.step.HasField("input"):
        record.input.CopyFrom(root.step.input)
    answer = _last_assistant_text(steps)
    if answer is not None:
        record.output.CopyFrom(Content(text=answer))
    elif root is not None and root.step.HasField("output"):
        record.output.CopyFrom(root.step.output)
    row_error = _tabular_output(record, root)

    record.usage.CopyFrom(sum_usage(steps))
    start = min(span.start_ns for span in ordered)
    end = max(span.end_ns for span in ordered)
    record.usage.latency.FromNanoseconds(max(0, end - start))

    record.provenance.trace_id = trace_id
    record.provenance.project = project
    record.provenance.session_id = session
    if root is not None:
        record.provenance.span_id = root.span_id
    service = (root or ordered[0]).service_name
    metadata = {
        "service.name": service,
        "root.name": root.name if root is not None else "",
        "span_count": len(ordered),
        "error_count": sum(1 for span in ordered if span.error),
        "complete_root": root is not None,
    }
    if row_error:
        metadata["row_error"] = row_error
    for key, value in metadata.items():
        record.metadata[key].CopyFrom(to_value(value))
    return record


def _tabular_output(record: Record, root: MappedSpan | None) -> str:
    """A traced tabular prediction (``evalsi.row.*`` attributes on the root span, ``records.row_from_attributes``)
    becomes the record's output row; what was wrong with it ("" when nothing), for the record's metadata."""
    if root is None:
        return ""
    attributes = root.step.attributes
    parts = row_from_attributes({key: from_value(attributes[key]) for key in attributes
                                 if key.startswith(ROW_ATTRIBUTE)})
    if parts is None:
        return ""
    try:
        record.output.CopyFrom(Content(row=tabular_row(parts)))
    except ValueError as exc:
        return str(exc)
    return ""


# --- log rows folded into their span's step -------------------------------------------------------------


def _log_entry(row: MappedSpan) -> dict[str, Any]:
    attrs = row.step.attributes
    entry: dict[str, Any] = {"time_unix_nano": str(row.start_ns)}
    for key in ("otel.log.event_name", "otel.log.body", "otel.log.severity_number", "otel.log.severity_text"):
        if key in attrs:
            entry[key.removeprefix("otel.log.")] = from_value(attrs[key])
    entry["attributes"] = {key: from_value(value) for key, value in attrs.items()
                           if not key.startswith(("otel.log.", "otel.scope", "evalsi."))}
    return entry


def _order(row: MappedSpan) -> tuple[int, int, str]:
    index = row.step.attributes.get("otel.log.index")
    return row.start_ns, int(index.number_value) if index is not None else 0, row.span_id


def _joined(rows: Iterable[MappedSpan], field: str) -> Messages | None:
    out = Messages()
    for row in rows:
        content = getattr(row.step, field)
        if content.WhichOneof("kind") == "messages":
            out.messages.extend(content.messages.messages)
    return out if out.messages else None


def merge_log_rows(steps_by_span: dict[str, Step], rows: Sequence[MappedSpan]) -> list[MappedSpan]:
    """Fold log rows into the steps of their spans; returns the rows whose span has not arrived.

    A step that receives records is replaced in ``steps_by_span`` by a merged copy: the spans' own steps are
    left as they are, so assembling twice gives the same Record.

    A step gets the records' messages as its input/output only where its span had none (content on the span
    wins: with both enabled the same messages would appear twice), and every record, GenAI or not, under the
    ``otel.logs`` attribute, so nothing the app sent is lost from the Record.
    """
    by_parent: dict[str, list[MappedSpan]] = {}
    for row in sorted(rows, key=_order):
        by_parent.setdefault(row.parent_span_id, []).append(row)
    orphans: list[MappedSpan] = []
    for parent, children in by_parent.items():
        original = steps_by_span.get(parent)
        if original is None:
            orphans.extend(children)
            continue
        step = steps_by_span[parent] = Step()
        step.CopyFrom(original)
        for field in ("input", "output"):
            if not step.HasField(field) and (messages := _joined(children, field)) is not None:
                getattr(step, field).messages.CopyFrom(messages)
        step.attributes[_LOGS_KEY].CopyFrom(to_value([_log_entry(row) for row in children]))
    return orphans
