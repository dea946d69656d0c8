"""OTLP log records as rows beside the spans: GenAI events (``/v1/logs``) joined onto the step of their span.

The OTel GenAI instrumentations send message content as *events*, which are OTLP log records carrying the trace
and span id of the model call: ``gen_ai.client.inference.operation.details`` (the whole chat, as
``gen_ai.input.messages``/``gen_ai.output.messages``/``gen_ai.system_instructions`` attributes) or, in the older
conventions, one record per message (``gen_ai.system.message``, ``gen_ai.user.message``,
``gen_ai.assistant.message``, ``gen_ai.tool.message`` with the message in the body, and ``gen_ai.choice`` with
``{"index", "finish_reason", "message"}``).

Each log record becomes a ``MappedSpan`` row, so the trace stores keep it as they keep spans (no schema of
theirs changes, a retry upserts the same row):
- ``span_id``: 16 hex digits hashed from the record's identity and content, so a resent batch lands on the same
  rows and never collides with the ids a tracer generates in practice;
- ``parent_span_id``: the span the record belongs to, so it is never a root;
- ``mapper``: ``otel-log@1``; the step: GENERIC, named after the event (or ``log``), every attribute kept, with
  ``otel.log.body``, ``otel.log.severity_number``/``severity_text``, ``otel.log.event_name``, ``otel.log.flags``
  and ``otel.scope`` beside them; for GenAI events, the messages in ``input``/``output``.
``evalsi.traces.assembly`` then folds these rows into the step of their span (``merge_log_rows``). Records without a
valid trace id *and* span id have no step to join and no trace to belong to: they are rejected, with the reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs

from evalsi.records import to_value
from evalsi.traces.model import LOG_MAPPER, MappedSpan
from evalsi.traces.otlp import any_value_to_python, attributes_to_dict
from evalsi.v1alpha1.record_pb2 import STEP_STATUS_OK, STEP_TYPE_GENERIC, Messages, Step

from .mappers import SESSION_KEYS, MapResult
from .messages import messages_content, messages_from_json, parse_json
from .redaction import _redact_any, _redact_kvs

if TYPE_CHECKING:
    from .redaction import Redactor

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_CHOICE_EVENT = "gen_ai.choice"


def event_name(record: LogRecord, attrs: Mapping[str, Any]) -> str:
    """The record's event name: the OTLP field, else the ``event.name`` attribute older SDKs set."""
    return record.event_name or str(attrs.get("event.name") or "")


def valid_log_ids(record: LogRecord) -> str | None:
    """Why a log record cannot be joined to a step (its ids), or None when it can."""
    if len(record.trace_id) != 16 or not any(record.trace_id):
        return "log record without a trace_id: it belongs to no trace, and ingest stores traces"
    if len(record.span_id) != 8 or not any(record.span_id):
        return "log record without a span_id: it cannot be joined to a step of its trace"
    return None


def _row_id(record: LogRecord, index: int) -> str:
    # Content-derived, so a retried export upserts the same row; the position keeps two identical records
    # sent in one batch (a repeated log line) apart.
    digest = hashlib.blake2b(digest_size=8)
    digest.update(record.SerializeToString(deterministic=True))
    digest.update(index.to_bytes(4, "big"))
    row = digest.hexdigest()
    return row if any(c != "0" for c in row) else "0000000000000001"


def _message_event(name: str, body: Any) -> Messages | None:
    """One message of the older per-message events, from the record's body."""
    item = dict(body) if isinstance(body, Mapping) else ({"content": body} if body not in (None, "") else {})
    if name in _MESSAGE_EVENTS:
        item.setdefault("role", _MESSAGE_EVENTS[name])
        # The tool message carries its call id as "id" (the OpenAI instrumentation's body), not "tool_call_id".
        if item["role"] == "tool" and "id" in item and "tool_call_id" not in item:
            item["tool_call_id"] = item.pop("id")
        return messages_from_json([item])
    message = item.get("message")
    if isinstance(message, Mapping):  # the instrumentation writes "role": None when the response had none
        return messages_from_json([{**message, "role": message.get("role") or "assistant"}])
    return None


def genai_content(name: str, attrs: Mapping[str, Any], body: Any) -> tuple[Messages | None, Messages | None]:
    """The (input, output) messages a GenAI event carries; (None, None) for any other record."""
    if name == DETAILS_EVENT:
        return (messages_from_json(attrs.get("gen_ai.input.messages"), system=attrs.get("gen_ai.system_instructions")),
                messages_from_json(attrs.get("gen_ai.output.messages")))
    if name in _MESSAGE_EVENTS:
        return _message_event(name, body), None
    if name == _CHOICE_EVENT:
        return None, _message_event(name, body)
    return None, None


def map_log_record(record: LogRecord, resource: Mapping[str, Any], scope: str, index: int,
                   received_ns: int) -> MappedSpan:
    """One log record (whose ids ``valid_log_ids`` accepted) as a row keyed to its span."""
    attrs = attributes_to_dict(record.attributes)
    body = any_value_to_python(record.body) if record.HasField("body") else None
    body = parse_json(body)  # some SDKs send a JSON body as a string
    name = event_name(record, attrs)
    # Without its own time a record would drag the trace's start to 1970: fall back to when it was seen.
    when = record.time_unix_nano or record.observed_time_unix_nano or received_ns
    row_id = _row_id(record, index)
    parent = record.span_id.hex()
    step = Step(id=row_id, span_id=row_id, parent_id=parent, name=name or "log", type=STEP_TYPE_GENERIC,
                status=STEP_STATUS_OK)
    step.start_time.FromNanoseconds(when)
    for key, value in attrs.items():
        step.attributes[key].CopyFrom(to_value(value))
    extra: dict[str, Any] = {
        "otel.log.body": body,
        "otel.log.event_name": name,
        "otel.log.severity_number": int(record.severity_number),
        "otel.log.severity_text": record.severity_text,
        "otel.log.flags": record.flags,
        # Records of one call may share a timestamp; their position in the batch keeps them in order.
        "otel.log.index": index,
        "otel.scope": scope,
        "evalsi.mapper": LOG_MAPPER,
    }
    for key, value in extra.items():
        if value not in (None, ""):
            step.attributes[key].CopyFrom(to_value(value))
    inputs, outputs = genai_content(name, attrs, body)
    if (content := messages_content(inputs)) is not None:
        step.input.CopyFrom(content)
    if (content := messages_content(outputs)) is not None:
        step.output.CopyFrom(content)
    session = next((attrs[key] for key in SESSION_KEYS if attrs.get(key) not in (None, "")), None) or next(
        (resource[key] for key in SESSION_KEYS if resource.get(key) not in (None, "")), "")
    return MappedSpan(
        trace_id=record.trace_id.hex(), span_id=row_id, parent_span_id=parent, name=step.name, start_ns=when,
        end_ns=when, error=False, session_id=str(session), mapper=LOG_MAPPER,
        service_name=str(resource.get("service.name") or ""), step=step, resource=dict(resource), scope=scope,
    )


def map_resource_logs(resource_logs: ResourceLogs, received_ns: int) -> MapResult:
    """Map every record of one ResourceLogs; records without usable ids are counted as rejected, with the reason."""
    resource = attributes_to_dict(resource_logs.resource.attributes)
    result = MapResult([], 0, [])
    index = 0
    for scope_logs in resource_logs.scope_logs:
        for record in scope_logs.log_records:
            index += 1
            reason = valid_log_ids(record)
            if reason is not None:
                result.rejected += 1
                if reason not in result.reasons:
                    result.reasons.append(reason)
                continue
            result.spans.append(map_log_record(record, resource, scope_logs.scope.name, index, received_ns))
    return result


# --- redaction of the raw records, before mapping ---------------------------------------------------------


def redact_resource_logs(redactor: Redactor, project: str, resource_logs: ResourceLogs) -> None:
    """Redact one resource's raw log records in place, as ``Redactor.redact_resource_spans`` does spans.

    Rules without ``attributes`` apply to every string of the resource, the records' attributes and bodies; a
    rule with ``attributes`` globs applies to the matching attributes and to a body whose event name matches
    (the body of ``gen_ai.choice`` is that event's content), ``log.body`` standing for a record without one.
    """
    rules = redactor.for_project(project)
    if not rules:
        return
    _redact_kvs(resource_logs.resource.attributes, rules)
    for scope_logs in resource_logs.scope_logs:
        for record in scope_logs.log_records:
            _redact_kvs(record.attributes, rules)
            if record.HasField("body"):
                key = event_name(record, attributes_to_dict(record.attributes)) or "log.body"
                matching = [rule for rule in rules if rule.applies_to(key)]
                if matching:
                    _redact_any(record.body, matching)
