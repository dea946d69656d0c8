"""The mapped output of a rich OTLP request, pinned: what ``ExportHandler`` hands the store for it (every mapper,
attributes of every value type, events, links, repeated keys, invalid ids, and redaction hits in attributes,
events, links, status messages and mapped content) must stay what it was when this file was written.

The pinned document (``pinned_mapped_spans.json``) was produced by the mapping code before its per-span cost was
cut; an optimisation that changes any field of any span fails here. Each span is pinned as what the store writes
and what a reader sees: its index columns, the step without the OTLP span (``bare_step``), the stored OTLP span
(decoded, so equal messages pass whatever their byte order), the step a read merges, and its summary row.

Regenerate only for an intended change of the mapped output:
``.venv/bin/python tests/ingest/test_mapped_output_pinned.py --write``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from ingest_helpers import kvs, make_span
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from evalsi.ingest import AssemblingSink, ExportHandler, Redactor, TraceAssembler
from evalsi.stores.traces.summaries import span_row
from evalsi.traces.model import MappedSpan

PINNED = Path(__file__).with_name("pinned_mapped_spans.json")
MAIL = "ana.silva@example.com"
KEY = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1"

RULES = {
    "*": ["email"],
    "shop": [
        {"builtin": "credit_card", "replacement": "[CARD]"},
        {"pattern": "sk-[A-Za-z0-9]{20,}", "replacement": "[KEY]", "attributes": ["gen_ai.*", "llm.*"]},
        {"pattern": "secret-[0-9]+", "name": "secret"},
        "cpf",
    ],
}


def _j(value: Any) -> str:
    return json.dumps(value)


def _every_type() -> dict[str, Any]:
    return {"s": f"write to {MAIL}", "empty": "", "i": 42, "neg": -7, "big": 2**60, "f": 0.25, "nan": float("nan"),
            "inf": float("inf"), "ninf": float("-inf"), "t": True, "no": False, "raw": b"\x00\x01" + MAIL.encode(),
            "arr": ["a", 1, 2.5, False, [MAIL]], "kv": {"k": MAIL, "n": 3, "nested": {"x": [1, "secret-12"]}},
            "json": _j({"to": MAIL, "escaped": "ana\\u0040example.com"}), "none": None}


def _spans(trace: bytes) -> list[Span]:
    def span(attrs: dict[str, Any], i: int, parent: int | None = 1, name: str = "", **kw: Any) -> Span:
        return make_span(attrs, name=name or f"span-{i}", span_id=i, parent=parent, trace_id=trace,
                         start=1_000 + i * 10, end=5_000 - i, **kw)

    request = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"mail {MAIL}"}]}
    response = {"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "send", "arguments": _j({"to": MAIL})}}]},
        "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}}
    spans = [
        span({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "session.id": "s1",
              **_every_type()}, 1, None, "agent"),
        # GenAI chat, JSON messages in both shapes, usage with cache and reasoning.
        span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-1",
              "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5,
              "gen_ai.usage.cache_read.input_tokens": 3, "gen_ai.usage.reasoning.output_tokens": 2,
              "gen_ai.system_instructions": _j([{"type": "text", "content": "Be terse."}]),
              "gen_ai.input.messages": _j([{"role": "user", "parts": [{"type": "text", "content": f"to {MAIL}"}]},
                                          {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1",
                                           "name": "send", "arguments": {"to": MAIL, "key": KEY}}]},
                                          {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                           "response": "sent"}]}]),
              "gen_ai.output.messages": _j([{"role": "assistant", "content": "4111 1111 1111 1111 is the card",
                                            "tool_calls": [{"id": "c2", "function": {"name": "n",
                                                                                     "arguments": "{}"}}]}]),
              "gen_ai.request.api_key": KEY}, 2, name="chat gpt-4o"),
        # GenAI with the per-message events, and one with the details event.
        span({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.prompt_tokens": "12",
              "gen_ai.usage.completion_tokens": 1.0},
             3, events=[("gen_ai.system.message", {"content": "sys"}),
                        ("gen_ai.user.message", {"content": f"hi {MAIL}"}),
                        ("gen_ai.choice", {"message": _j({"content": "yo secret-99", "role": "assistant"})})]),
        span({"gen_ai.operation.name": "text_completion", "gen_ai.request.model": "m"}, 4,
             events=[("gen_ai.client.inference.operation.details",
                      {"gen_ai.input.messages": _j([{"role": "user", "content": MAIL}]),
                       "gen_ai.output.messages": _j([{"role": "assistant", "content": "ok"}]),
                       "gen_ai.system_instructions": "plain system"})]),
        # GenAI tool, arguments and result JSON and text; an error with an exception event.
        span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send", "gen_ai.tool.call.id": "t1",
              "gen_ai.tool.call.arguments": _j({"to": MAIL, "n": [1, 2]}), "gen_ai.tool.call.result": "sent 1"}, 5),
        span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fail"}, 6, error="",
             events=[("exception", {"exception.type": "ValueError", "exception.message": f"bad {MAIL}"})]),
        span({"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "e", "gen_ai.usage.input_tokens": 4},
             7, error=f"status for {MAIL}"),
        # OpenInference: LLM with indexed messages and tool calls, a retriever, a tool.
        span({"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "llm.token_count.prompt": 9,
              "llm.token_count.completion": 3, "llm.token_count.total": 12,
              "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": f"hi {MAIL}",
              "llm.input_messages.1.message.role": "assistant",
              "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "f",
              "llm.input_messages.1.message.tool_calls.0.tool_call.function.arguments": _j({"k": KEY}),
              "llm.output_messages.0.message.role": "assistant", "llm.output_messages.0.message.content": "done",
              "input.value": _j(request), "input.mime_type": "application/json", "llm.api_key": KEY}, 8),
        span({"openinference.span.kind": "RETRIEVER", "input.value": "refunds",
              "retrieval.documents.0.document.content": f"policy {MAIL}", "retrieval.documents.0.document.score": 0.9,
              "retrieval.documents.1.document.id": "d2"}, 9),
        span({"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": _j({"q": "x"}),
              "output.value": "found", "tool.parameters": _j({"type": "object"})}, 10),
        span({"openinference.span.kind": "weird", "output.value": "[1, 2"}, 11),
        # OpenLLMetry: workflow, tool with decorator arguments, an indexed LLM span.
        span({"traceloop.span.kind": "workflow", "traceloop.entity.name": "flow",
              "traceloop.entity.input": _j({"args": [], "kwargs": {"q": MAIL}}),
              "traceloop.association.properties.session_id": "s9"}, 12),
        span({"traceloop.span.kind": "tool", "traceloop.entity.name": "calc",
              "traceloop.entity.input": _j({"args": [], "kwargs": {"x": 1}}), "traceloop.entity.output": "2"}, 13),
        span({"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-3.5",
              "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": f"hi {MAIL}",
              "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "hello",
              "gen_ai.completion.0.tool_calls.0.name": "f", "gen_ai.completion.0.tool_calls.0.arguments": "{}",
              "llm.usage.total_tokens": 30}, 14),
        # MLflow and Logfire.
        span({"mlflow.spanType": _j("CHAT_MODEL"), "mlflow.spanInputs": _j(request),
              "mlflow.spanOutputs": _j({"choices": [response]}), "mlflow.llm.model": _j("gpt-4o-mini"),
              "mlflow.chat.tokenUsage": _j({"input_tokens": 6, "output_tokens": 2, "total_tokens": 8})}, 15),
        span({"mlflow.spanType": _j("TOOL"), "mlflow.spanInputs": _j({"to": MAIL}), "mlflow.spanOutputs": _j("ok"),
              "mlflow.spanFunctionName": _j("send")}, 16),
        span({"logfire.span_type": "span", "logfire.msg_template": "chat", "logfire.msg": "chat",
              "logfire.json_schema": _j({"type": "object", "properties": {"request_data": {"type": "object"},
                                                                        "response_data": {"type": "object"}}}),
              "request_data": _j(request), "response_data": _j(response), "gen_ai.request.model": "gpt-4o-mini"}, 17),
        span({"logfire.span_type": "pending_span", "logfire.msg_template": "answer", "logfire.msg": "answer",
              "logfire.pending_parent_id": "0000000000000000"}, 18),
        # Generic spans: nothing known, a CPF and a secret, a repeated key (the last value wins).
        span({"http.method": "GET", "note": "cpf 123.456.789-09 and secret-42", "db.statement": f"-- {MAIL}"}, 19,
             error="secret-7 failed"),
    ]
    repeated = span({"x": "first", "user": MAIL}, 20)
    repeated.attributes.extend(kvs({"x": f"second {MAIL}"}))
    spans.append(repeated)
    linked = span({"plain": "nothing here"}, 21)
    linked.trace_state = "vendor=secret"
    link = linked.links.add(trace_id=trace, span_id=(1).to_bytes(8, "big"), trace_state="k=v")
    link.attributes.extend(kvs({"why": f"follows {MAIL}", "n": 1}))
    linked.kind = Span.SPAN_KIND_CLIENT
    linked.status.code = Status.STATUS_CODE_OK
    spans.append(linked)
    spans.append(span({"gen_ai.request.model": "m", "gen_ai.input.messages": "not json", "i": 2**53 + 1}, 22))
    return spans


def _request() -> ExportTraceServiceRequest:
    shop, other = bytes.fromhex("0af7651916cd43dd8448eb211c80319c"), bytes.fromhex("1af7651916cd43dd8448eb211c80319d")
    request = ExportTraceServiceRequest()
    for trace, resource in ((shop, {"service.name": "shop-agent", "evalsi.project": "shop", "owner": MAIL,
                                     "session.id": "rs", "n": 1}),
                            (other, {"service.name": "other", "gen_ai.conversation.id": "conv-1"})):
        resource_spans = ResourceSpans()
        resource_spans.resource.attributes.extend(kvs(resource))
        for scope_name, spans in (("first", _spans(trace)[:11]), ("second", _spans(trace)[11:])):
            scope = resource_spans.scope_spans.add()
            scope.scope.name = scope_name
            scope.spans.extend(spans)
        request.resource_spans.append(resource_spans)
    # Unusable ids: counted as rejected, with their reasons.
    bad = request.resource_spans[1].scope_spans[0].spans
    bad.add(trace_id=b"short", span_id=(1).to_bytes(8, "big"), name="bad trace")
    bad.add(trace_id=other, span_id=b"", name="bad span")
    bad.add(trace_id=other, span_id=(99).to_bytes(8, "big"), parent_span_id=b"x", name="bad parent")
    return request


def _message(message: Any) -> Any:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def _span(project: str, mapped: MappedSpan) -> dict[str, Any]:
    pinned = {"project": project, "trace_id": mapped.trace_id, "span_id": mapped.span_id,
              "parent_span_id": mapped.parent_span_id, "name": mapped.name, "start_ns": mapped.start_ns,
              "end_ns": mapped.end_ns, "error": mapped.error, "session_id": mapped.session_id, "mapper": mapped.mapper,
              "service_name": mapped.service_name, "resource": mapped.resource, "scope": mapped.scope,
              "bare_step": _message(mapped.bare_step), "otlp": _message(Span.FromString(mapped.otlp_bytes())),
              "summary_row": list(span_row(mapped))}
    pinned["step"] = _message(mapped.step)  # last: reading the step merges the OTLP span into it
    return pinned


class _Collecting:
    def __init__(self) -> None:
        self.batches: list[tuple[str, Sequence[MappedSpan]]] = []

    async def consume(self, project: str, spans: Sequence[MappedSpan]) -> None:
        self.batches.append((project, spans))


async def _mapped() -> dict[str, Any]:
    sink = _Collecting()
    handler = ExportHandler(AssemblingSink(sink, TraceAssembler()), redactor=Redactor.from_mapping(RULES, "rules"))
    response = await handler.export(_request())
    # Through JSON, so the comparison is with what the file can hold (NaN-free: the mapper names non-finite numbers).
    return json.loads(json.dumps({
        "rejected": response.partial_success.rejected_spans, "error_message": response.partial_success.error_message,
        "spans": [_span(project, mapped) for project, spans in sink.batches for mapped in spans]}))


async def test_the_mapped_output_of_a_rich_request_is_what_it_was() -> None:
    got = await _mapped()
    want = json.loads(PINNED.read_text())
    assert (got["rejected"], got["error_message"]) == (want["rejected"], want["error_message"])
    assert len(got["spans"]) == len(want["spans"]) == 44
    for mine, pinned in zip(got["spans"], want["spans"], strict=True):
        assert mine == pinned, f"span {pinned['project']}/{pinned['span_id']} ({pinned['name']}) differs"
    # The pin holds what it should: every mapper, and every secret gone from every stored byte.
    assert {span["mapper"] for span in got["spans"]} == {"genai@1", "openinference@1", "openllmetry@1", "mlflow@1",
                                                         "logfire@1", "generic@1"}
    text = json.dumps(got)
    shop = json.dumps([span for span in got["spans"] if span["project"] == "shop"])
    assert MAIL not in text and KEY not in shop and KEY in text  # the key rule is the shop's alone
    assert "[REDACTED]" in text and "[KEY]" in shop and "[CARD]" in shop and "cpf 123" not in shop


if __name__ == "__main__":
    import asyncio

    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: {sys.argv[0]} --write  (regenerates {PINNED.name} from the current mapping code)")
    PINNED.write_text(json.dumps(asyncio.run(_mapped()), indent=1, sort_keys=True) + "\n")
