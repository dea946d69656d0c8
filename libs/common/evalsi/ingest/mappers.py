"""Semantic-convention mappers: one OTLP span in, one canonical ``Step`` out. Pure functions.

Every span keeps its identity, timing, status and *all* its raw attributes (``Step.attributes``), whichever
mapper reads it; a mapper only adds what it understands: the step type, model, usage, tool call, input and
output. The raw attributes (with the span's kind, events and links) travel as the OTLP span itself beside the
step (``MappedSpan``), merged into ``Step.attributes`` when the step is read, not copied value by value here.

The first mapper whose ``matches`` holds maps the span, in this order:

- ``openinference@1``: ``openinference.span.kind`` (LLM, TOOL, RETRIEVER, CHAIN, AGENT, EMBEDDING, RERANKER,
  GUARDRAIL), ``llm.model_name``, ``llm.token_count.*``, ``llm.cost.*`` (USD: the total, else prompt plus
  completion), ``llm.input_messages.*``/``llm.output_messages.*``,
  ``input.value``/``output.value``, ``tool.name``, ``tool.parameters``, ``retrieval.documents.*``;
- ``openllmetry@1``: ``traceloop.*`` on framework spans (``traceloop.span.kind`` workflow, agent, task, tool),
  and on its LLM spans ``gen_ai.*`` with ``llm.request.type`` and indexed ``gen_ai.prompt.*``/``gen_ai.completion.*``;
- ``mlflow@1`` (``mlflow_mapper``): MLflow Tracing's JSON-encoded ``mlflow.spanType``/``spanInputs``/``spanOutputs``;
- ``logfire@1`` (``logfire_mapper``): Pydantic Logfire's spans (``logfire.span_type``), its LLM spans'
  ``request_data``/``response_data`` beside the GenAI attributes;
- ``genai@1`` (``genai_mapper``, whose usage and content helpers every mapper shares): the OTel GenAI
  conventions (``gen_ai.operation.name``, ``gen_ai.request.model``/``response.model``, ``gen_ai.usage.*``,
  ``gen_ai.tool.*``, ``gen_ai.input.messages``/``gen_ai.output.messages`` as attributes or on the
  ``gen_ai.client.inference.operation.details`` event, and the older per-message span events);
- ``generic@1``: anything else, as a ``STEP_TYPE_GENERIC`` step with its raw attributes.

The session comes from ``gen_ai.conversation.id``, ``session.id`` or OpenLLMetry's association property, for
every mapper. A mapper that raises (a bug, never bad input) falls back to ``generic@1`` with the error noted in
the ``evalsi.mapper_error`` attribute, so a span is never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any

from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from evalsi.records import to_value
from evalsi.traces.model import MappedSpan
from evalsi.traces.otlp import attributes_to_dict
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_STATUS_OK,
    STEP_TYPE_AGENT,
    STEP_TYPE_CHAIN,
    STEP_TYPE_EMBEDDING,
    STEP_TYPE_GENERIC,
    STEP_TYPE_GUARDRAIL,
    STEP_TYPE_LLM,
    STEP_TYPE_RERANK,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
    Content,
    Step,
    StepType,
)

from . import genai_mapper, logfire_mapper, mlflow_mapper
from .genai_mapper import first, set_cost, set_field, set_usage, to_int
from .messages import (
    content_of,
    indexed,
    messages_content,
    messages_from_indexed,
    parse_json,
    tool_call,
)

if TYPE_CHECKING:
    from .redaction import SpanRedaction

SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "traceloop.association.properties.session_id")


@dataclass(frozen=True)
class Mapper:
    """A versioned mapper: ``matches(attrs)`` picks it, ``fill(attrs, span, step)`` writes what it knows.

    ``keys_only``: ``matches`` reads the attribute keys alone, never their values, so spans with the same keys get
    the same mapper and the choice can be made once for them (``_Chooser``).
    """

    name: str
    version: str
    matches: Callable[[Mapping[str, Any]], bool]
    fill: Callable[[Mapping[str, Any], Span, Step], None]
    keys_only: bool = False
    ref: str = field(init=False)  # name@version, stamped on every span it maps

    def __post_init__(self) -> None:
        object.__setattr__(self, "ref", f"{self.name}@{self.version}")


# --- shared helpers ---------------------------------------------------------------------------------------


def _tool_status(step: Step) -> None:
    if step.HasField("tool_call"):
        failed = step.status == STEP_STATUS_ERROR
        step.tool_call.status = TOOL_CALL_STATUS_ERROR if failed else TOOL_CALL_STATUS_OK
        if failed:
            step.tool_call.error = step.error


def _arguments(value: Any) -> Any:
    """Tool arguments: decorator-style ``{"args": [...], "kwargs": {...}}`` collapses to the kwargs when it can."""
    parsed = parse_json(value)
    if isinstance(parsed, Mapping) and parsed and set(parsed) <= {"args", "kwargs"}:
        args, kwargs = parsed.get("args") or [], parsed.get("kwargs") or {}
        if not args:
            return kwargs
    return parsed


# --- OpenInference ------------------------------------------------------------------------------------------

_OPENINFERENCE_TYPES: dict[str, StepType] = {
    "LLM": STEP_TYPE_LLM,
    "TOOL": STEP_TYPE_TOOL,
    "CHAIN": STEP_TYPE_CHAIN,
    "RETRIEVER": STEP_TYPE_RETRIEVAL,
    "RERANKER": STEP_TYPE_RERANK,
    "EMBEDDING": STEP_TYPE_EMBEDDING,
    "AGENT": STEP_TYPE_AGENT,
    "GUARDRAIL": STEP_TYPE_GUARDRAIL,
}


def _openinference_matches(attrs: Mapping[str, Any]) -> bool:
    return "openinference.span.kind" in attrs


def _fill_openinference(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    kind = str(attrs.get("openinference.span.kind") or "").upper()
    step.type = _OPENINFERENCE_TYPES.get(kind, STEP_TYPE_GENERIC)
    step.model = str(first(attrs, "llm.model_name", "embedding.model_name", "reranker.model_name") or "")
    set_usage(
        step,
        attrs.get("llm.token_count.prompt"),
        attrs.get("llm.token_count.completion"),
        attrs.get("llm.token_count.total"),
        attrs.get("llm.token_count.prompt_details.cache_read"),
        attrs.get("llm.token_count.completion_details.reasoning"),
    )
    if "llm.cost.total" in attrs or "llm.cost.prompt" in attrs or "llm.cost.completion" in attrs:
        set_cost(step, attrs.get("llm.cost.total"), attrs.get("llm.cost.prompt"), attrs.get("llm.cost.completion"))
    inputs = messages_from_indexed(indexed(attrs, "llm.input_messages"), inner="message.")
    outputs = messages_from_indexed(indexed(attrs, "llm.output_messages"), inner="message.")
    set_field(step, "input",
              messages_content(inputs) or content_of(attrs.get("input.value"), attrs.get("input.mime_type")))
    set_field(step, "output",
              messages_content(outputs) or content_of(attrs.get("output.value"), attrs.get("output.mime_type")))
    if step.type == STEP_TYPE_RETRIEVAL and not attrs.get("output.value"):
        documents = [{key.removeprefix("document."): value for key, value in doc.items()}
                     for doc in indexed(attrs, "retrieval.documents")]
        if documents:
            step.output.CopyFrom(Content(json=to_value(documents)))
    if step.type == STEP_TYPE_TOOL or "tool.name" in attrs:
        arguments = first(attrs, "tool_call.function.arguments")
        if arguments is None:
            parsed = parse_json(attrs.get("input.value"))
            arguments = parsed if isinstance(parsed, Mapping) else attrs.get("tool.parameters")
        tool_call(
            attrs.get("tool_call.id"),
            first(attrs, "tool.name", "tool_call.function.name") or span.name,
            arguments,
            attrs.get("output.value"),
            into=step.tool_call,
        )


# --- OpenLLMetry --------------------------------------------------------------------------------------------

_TRACELOOP_TYPES: dict[str, StepType] = {
    "workflow": STEP_TYPE_CHAIN,
    "task": STEP_TYPE_CHAIN,
    "agent": STEP_TYPE_AGENT,
    "tool": STEP_TYPE_TOOL,
}
_LLM_REQUEST_TYPES: dict[str, StepType] = {
    "chat": STEP_TYPE_LLM,
    "completion": STEP_TYPE_LLM,
    "embedding": STEP_TYPE_EMBEDDING,
    "rerank": STEP_TYPE_RERANK,
}


_OPENLLMETRY_PREFIXES = ("traceloop.", "gen_ai.prompt.", "gen_ai.completion.", "llm.request.type")


def _openllmetry_matches(attrs: Mapping[str, Any]) -> bool:
    return any(map(str.startswith, attrs, repeat(_OPENLLMETRY_PREFIXES)))


def _fill_openllmetry(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    kind = str(attrs.get("traceloop.span.kind") or "")
    if kind in _TRACELOOP_TYPES:
        step.type = _TRACELOOP_TYPES[kind]
        step.name = str(attrs.get("traceloop.entity.name") or span.name)
        set_field(step, "input", content_of(attrs.get("traceloop.entity.input")))
        set_field(step, "output", content_of(attrs.get("traceloop.entity.output")))
        if step.type == STEP_TYPE_TOOL:
            tool_call(None, step.name, None, attrs.get("traceloop.entity.output"), into=step.tool_call)
            arguments = _arguments(attrs.get("traceloop.entity.input"))
            if arguments is not None:
                step.tool_call.arguments.CopyFrom(to_value(arguments))
        return
    # An LLM span: OTel GenAI attributes, in the current JSON form or OpenLLMetry's indexed one.
    genai_mapper.fill(attrs, span, step)
    request_type = str(attrs.get("llm.request.type") or "")
    if request_type in _LLM_REQUEST_TYPES and "gen_ai.operation.name" not in attrs:
        step.type = _LLM_REQUEST_TYPES[request_type]
    elif step.type == STEP_TYPE_GENERIC:
        step.type = STEP_TYPE_LLM
    if not step.HasField("input"):
        set_field(step, "input", messages_content(messages_from_indexed(indexed(attrs, "gen_ai.prompt"))))
    if not step.HasField("output"):
        set_field(step, "output", messages_content(messages_from_indexed(indexed(attrs, "gen_ai.completion"))))
    if not step.usage.total_tokens and attrs.get("llm.usage.total_tokens"):
        step.usage.total_tokens = to_int(attrs["llm.usage.total_tokens"])


def _fill_generic(attrs: Mapping[str, Any], span: Span, step: Step) -> None:
    step.type = STEP_TYPE_GENERIC


GENAI = Mapper("genai", "1", genai_mapper.matches, genai_mapper.fill, keys_only=True)
OPENINFERENCE = Mapper("openinference", "1", _openinference_matches, _fill_openinference, keys_only=True)
OPENLLMETRY = Mapper("openllmetry", "1", _openllmetry_matches, _fill_openllmetry, keys_only=True)
GENERIC = Mapper("generic", "1", lambda _attrs: True, _fill_generic, keys_only=True)
MLFLOW = Mapper("mlflow", "1", mlflow_mapper.matches, mlflow_mapper.fill, keys_only=True)
LOGFIRE = Mapper("logfire", "1", logfire_mapper.matches, logfire_mapper.fill, keys_only=True)
# MLflow and Logfire come after the instrumentation-specific conventions (Logfire marks every span its tracer
# starts, OpenInference's and OpenLLMetry's included) and before genai@1 (their spans carry gen_ai.* as well).
DEFAULT_MAPPERS: tuple[Mapper, ...] = (OPENINFERENCE, OPENLLMETRY, MLFLOW, LOGFIRE, GENAI, GENERIC)


# --- the span-level entry points ----------------------------------------------------------------------------


def _base_step(span: Span, span_id: str, parent_id: str) -> Step:
    # What the OTLP span says verbatim (its times, attributes, kind, events and links) is not copied here: it
    # travels as the span itself beside the step and is merged in when read (``evalsi.traces.otlp.merge_span``).
    step = Step(id=span_id, span_id=span_id, parent_id=parent_id, name=span.name)
    if span.status.code == Status.STATUS_CODE_ERROR:
        step.status = STEP_STATUS_ERROR
        step.error = span.status.message or _exception_message(span)
    else:
        step.status = STEP_STATUS_OK
    return step


def _exception_message(span: Span) -> str:
    for event in span.events:
        if event.name == "exception":
            attrs = attributes_to_dict(event.attributes)
            return str(attrs.get("exception.message") or attrs.get("exception.type") or "")
    return ""


@dataclass(frozen=True)
class _Resource:
    """What every span of one resource shares, worked out once per resource rather than per span."""

    attributes: dict[str, Any]  # one copy, shared by the resource's MappedSpans (nothing mutates it)
    service_name: str
    session_id: str

    @classmethod
    def of(cls, resource: Mapping[str, Any]) -> _Resource:
        return cls(dict(resource), str(resource.get("service.name") or ""), str(first(resource, *SESSION_KEYS) or ""))


class _Chooser:
    """The first of ``mappers`` whose ``matches`` holds for a span's attributes (None when none does).

    Where every matcher reads keys alone (``Mapper.keys_only``), the choice is remembered by the attributes' keys:
    the spans of one request share a few key sets, so the matchers (a prefix scan of every key, for some) run once
    a key set rather than once a span. One chooser serves one request, so what it remembers is bounded by it.
    """

    __slots__ = ("_chosen", "_mappers")

    def __init__(self, mappers: Sequence[Mapper]) -> None:
        self._mappers = tuple(mappers)
        self._chosen: dict[tuple[str, ...], Mapper | None] | None = (
            {} if all(mapper.keys_only for mapper in self._mappers) else None)

    def __call__(self, attrs: Mapping[str, Any]) -> Mapper | None:
        chosen = self._chosen
        if chosen is None:
            return self._first(attrs)
        keys = tuple(attrs)
        try:
            return chosen[keys]
        except KeyError:
            found = chosen[keys] = self._first(attrs)
            return found

    def _first(self, attrs: Mapping[str, Any]) -> Mapper | None:
        for mapper in self._mappers:
            if mapper.matches(attrs):
                return mapper
        return None


def map_span(
    span: Span,
    resource: Mapping[str, Any],
    scope: str = "",
    mappers: Sequence[Mapper] = DEFAULT_MAPPERS,
) -> MappedSpan:
    """Map one span (whose trace and span ids the caller has checked) with the first mapper that matches."""
    return _map_span(span, _Resource.of(resource), scope, _Chooser(mappers))


def _map_span(span: Span, resource: _Resource, scope: str, choose: _Chooser,
              redaction: SpanRedaction | None = None) -> MappedSpan:
    # The OTLP span is stored as it is beside the step, as the bytes serialized here (again only where redaction
    # changed it). Its trace state, kept nowhere else, is dropped rather than stored unscreened.
    if span.trace_state:
        span.trace_state = ""
    if span.links:
        for link in span.links:
            link.trace_state = ""
    attrs = attributes_to_dict(span.attributes)
    otlp = span.SerializeToString()
    # What redaction changed goes back into the span (and a repeated key, of which the dict kept only the last
    # value, is written once) and the span is serialized again; most spans are cleared by one screen of ``otlp``.
    if redaction is not None:
        otlp = redaction.span(span, attrs, otlp)
    # The hex ids once per span: the step and the MappedSpan both carry them.
    span_id, parent_id = span.span_id.hex(), span.parent_span_id.hex()
    step = _base_step(span, span_id, parent_id)
    used = GENERIC
    mapper = choose(attrs)
    if mapper is not None:
        try:
            mapper.fill(attrs, span, step)
            used = mapper
        except Exception as exc:  # a mapper bug must not lose the span
            step = _base_step(span, span_id, parent_id)
            step.type = STEP_TYPE_GENERIC
            step.attributes["evalsi.mapper_error"].string_value = f"{mapper.ref}: {type(exc).__name__}: {exc}"
    if step.type == STEP_TYPE_TOOL:
        _tool_status(step)
    ref = used.ref  # the step's evalsi.mapper attribute when read
    # Most spans carry none of the session keys: three lookups rather than a call.
    session = (first(attrs, *SESSION_KEYS) if SESSION_KEYS[0] in attrs or SESSION_KEYS[1] in attrs
               or SESSION_KEYS[2] in attrs else None)
    # Positional: this runs for every span (MappedSpan's parameters, in order).
    return MappedSpan(span.trace_id.hex(), span_id, parent_id, step.name, span.start_time_unix_nano,
                      span.end_time_unix_nano, step.status == STEP_STATUS_ERROR,
                      str(session) if session else resource.session_id, ref, resource.service_name, step,
                      resource.attributes, scope, otlp)


@dataclass
class MapResult:
    spans: list[MappedSpan]
    rejected: int
    reasons: list[str]


_NO_TRACE_ID, _NO_SPAN_ID = bytes(16), bytes(8)  # all zeros: invalid (OTLP)


def valid_ids(span: Span) -> str | None:
    """Why a span cannot be stored (its ids), or None when it can."""
    trace_id, span_id, parent_id = span.trace_id, span.span_id, span.parent_span_id
    if len(trace_id) != 16 or trace_id == _NO_TRACE_ID:
        return "trace_id missing or not 16 bytes"
    if len(span_id) != 8 or span_id == _NO_SPAN_ID:
        return "span_id missing or not 8 bytes"
    if parent_id and len(parent_id) != 8:
        return "parent_span_id not 8 bytes"
    return None


def map_resource_spans(resource_spans: ResourceSpans, mappers: Sequence[Mapper] = DEFAULT_MAPPERS,
                       redaction: SpanRedaction | None = None) -> MapResult:
    """Map every span of one ResourceSpans; spans with unusable ids are counted as rejected, with the reason.

    ``redaction`` (``Redactor.span_redaction``) redacts the resource's decoded attributes, and each span before any
    mapper reads it.
    """
    resource_attributes = attributes_to_dict(resource_spans.resource.attributes)
    if redaction is not None:
        redaction.attributes(resource_attributes)
    resource = _Resource.of(resource_attributes)
    choose = _Chooser(mappers)
    result = MapResult([], 0, [])
    for scope_spans in resource_spans.scope_spans:
        scope = scope_spans.scope.name
        for span in scope_spans.spans:
            reason = valid_ids(span)
            if reason is not None:
                result.rejected += 1
                if reason not in result.reasons:
                    result.reasons.append(reason)
                continue
            result.spans.append(_map_span(span, resource, scope, choose, redaction))
    return result
