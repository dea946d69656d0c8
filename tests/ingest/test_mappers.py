"""The semantic-convention mappers, span by span, from OTLP protobuf built by hand."""

from __future__ import annotations

import json

from ingest_helpers import TRACE, make_span, resource_spans
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.ingest import (
    DEFAULT_MAPPERS,
    GENERIC,
    Mapper,
    any_value_to_python,
    map_resource_spans,
    map_span,
)
from evalsi.records import from_value
from evalsi.v1alpha1.record_pb2 import (
    STEP_STATUS_ERROR,
    STEP_STATUS_OK,
    STEP_TYPE_AGENT,
    STEP_TYPE_CHAIN,
    STEP_TYPE_EMBEDDING,
    STEP_TYPE_GENERIC,
    STEP_TYPE_LLM,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_ERROR,
    TOOL_CALL_STATUS_OK,
)

RESOURCE = {"service.name": "svc"}


def test_genai_chat_with_json_messages() -> None:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 64,
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}]),
        "gen_ai.output.messages": json.dumps([{
            "role": "assistant",
            "parts": [{"type": "text", "content": "Let me check."},
                      {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
            "finish_reason": "tool_call",
        }]),
    }
    mapped = map_span(make_span(attrs, name="chat gpt-4o", span_id=7, parent=1), RESOURCE)
    step = mapped.step
    assert mapped.mapper == "genai@1" and mapped.session_id == "conv-1" and mapped.service_name == "svc"
    assert step.type == STEP_TYPE_LLM and step.model == "gpt-4o-2024-08-06"
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.total_tokens) == (100, 20, 120)
    assert step.usage.cached_input_tokens == 64
    assert [(m.role, m.content) for m in step.input.messages.messages] == [("system", "Be brief."), ("user", "Hi")]
    (out,) = step.output.messages.messages
    assert (out.role, out.content) == ("assistant", "Let me check.")
    assert out.tool_calls[0].name == "get_weather" and from_value(out.tool_calls[0].arguments) == {"city": "Paris"}
    assert step.id == step.span_id == "0000000000000007" and step.parent_id == "0000000000000001"
    assert step.status == STEP_STATUS_OK and step.duration.ToNanoseconds() == 1_000
    # Nothing dropped: every raw attribute is kept on the step.
    assert set(attrs) <= set(step.attributes)
    assert step.attributes["evalsi.mapper"].string_value == "genai@1"


def test_genai_execute_tool_and_error_status() -> None:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"city": "Paris"}',
        "gen_ai.tool.call.result": '{"temp": 21}',
    }
    ok = map_span(make_span(attrs), RESOURCE).step
    assert ok.type == STEP_TYPE_TOOL and ok.tool_call.name == "get_weather" and ok.tool_call.id == "call_1"
    assert from_value(ok.tool_call.arguments) == {"city": "Paris"} and from_value(ok.tool_call.result) == {"temp": 21}
    assert ok.tool_call.status == TOOL_CALL_STATUS_OK
    failed = map_span(make_span(attrs, error="timeout"), RESOURCE).step
    assert failed.status == STEP_STATUS_ERROR and failed.error == "timeout"
    assert failed.tool_call.status == TOOL_CALL_STATUS_ERROR and failed.tool_call.error == "timeout"


def test_genai_error_message_from_exception_event() -> None:
    span = make_span({"gen_ai.operation.name": "chat"}, error="", events=[("exception", {"exception.message": "boom"})])
    assert map_span(span, RESOURCE).step.error == "boom"


def test_genai_event_forms() -> None:
    details = make_span({"gen_ai.operation.name": "chat"}, events=[(
        "gen_ai.client.inference.operation.details",
        {"gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Q"}]}]),
         "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "A"}]}])},
    )])
    step = map_span(details, RESOURCE).step
    assert step.input.messages.messages[0].content == "Q" and step.output.messages.messages[0].content == "A"
    legacy = make_span({"gen_ai.system": "openai", "gen_ai.request.model": "m"}, events=[
        ("gen_ai.system.message", {"content": "S"}),
        ("gen_ai.user.message", {"content": "U"}),
        ("gen_ai.choice", {"index": 0, "message": json.dumps({"role": "assistant", "content": "C"})}),
    ])
    step = map_span(legacy, RESOURCE).step
    assert step.type == STEP_TYPE_LLM
    assert [(m.role, m.content) for m in step.input.messages.messages] == [("system", "S"), ("user", "U")]
    assert [(m.role, m.content) for m in step.output.messages.messages] == [("assistant", "C")]
    assert "otel.events" in step.attributes  # the events themselves are kept too


def test_genai_operation_types() -> None:
    for operation, expected in (("embeddings", STEP_TYPE_EMBEDDING), ("invoke_agent", STEP_TYPE_AGENT),
                                ("text_completion", STEP_TYPE_LLM), ("something_new", STEP_TYPE_GENERIC)):
        assert map_span(make_span({"gen_ai.operation.name": operation}), RESOURCE).step.type == expected
    agent = map_span(make_span({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"}), RESOURCE)
    assert agent.step.name == "travel"


def test_openinference_llm_with_indexed_messages_and_tool_calls() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o-mini",
        "llm.token_count.prompt": 12,
        "llm.token_count.completion": 5,
        "llm.token_count.total": 17,
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You add.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "2+2?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "calculator",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"expr": "2+2"}',
        "session.id": "s-9",
    }
    mapped = map_span(make_span(attrs), RESOURCE)
    step = mapped.step
    assert mapped.mapper == "openinference@1" and mapped.session_id == "s-9"
    assert step.type == STEP_TYPE_LLM and step.model == "gpt-4o-mini"
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.total_tokens) == (12, 5, 17)
    assert [m.content for m in step.input.messages.messages] == ["You add.", "2+2?"]
    call = step.output.messages.messages[0].tool_calls[0]
    assert (call.id, call.name, from_value(call.arguments)) == ("c1", "calculator", {"expr": "2+2"})


def test_openinference_tool_retriever_and_chain() -> None:
    tool = map_span(make_span({"openinference.span.kind": "TOOL", "tool.name": "calculator",
                               "tool.parameters": '{"type": "object"}', "input.value": '{"expr": "2+2"}',
                               "input.mime_type": "application/json", "output.value": "4"}), RESOURCE).step
    assert tool.type == STEP_TYPE_TOOL and tool.tool_call.name == "calculator"
    assert from_value(tool.tool_call.arguments) == {"expr": "2+2"} and from_value(tool.tool_call.result) == 4
    assert from_value(tool.input.json) == {"expr": "2+2"} and tool.output.text == "4"
    # No call arguments recorded: tool.parameters is what there is.
    bare = map_span(make_span({"openinference.span.kind": "TOOL", "tool.name": "t", "tool.parameters": '{"a": 1}'}),
                    RESOURCE).step
    assert from_value(bare.tool_call.arguments) == {"a": 1}
    retriever = map_span(make_span({
        "openinference.span.kind": "RETRIEVER", "input.value": "paris weather",
        "retrieval.documents.0.document.content": "Sunny", "retrieval.documents.0.document.score": 0.9,
    }), RESOURCE).step
    assert retriever.type == STEP_TYPE_RETRIEVAL and retriever.input.text == "paris weather"
    assert from_value(retriever.output.json) == [{"content": "Sunny", "score": 0.9}]
    chain = map_span(make_span({"openinference.span.kind": "CHAIN", "output.value": "done"}), RESOURCE).step
    assert chain.type == STEP_TYPE_CHAIN and chain.output.text == "done"
    unknown = map_span(make_span({"openinference.span.kind": "EVALUATOR"}), RESOURCE).step
    assert unknown.type == STEP_TYPE_GENERIC


def test_openllmetry_llm_and_framework_spans() -> None:
    llm = map_span(make_span({
        "gen_ai.system": "openai", "llm.request.type": "chat", "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.prompt_tokens": 40, "gen_ai.usage.completion_tokens": 10, "llm.usage.total_tokens": 50,
        "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Book a flight",
        "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.tool_calls.0.id": "t1", "gen_ai.completion.0.tool_calls.0.name": "book_flight",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"to": "NYC"}',
    }), RESOURCE)
    step = llm.step
    assert llm.mapper == "openllmetry@1" and step.type == STEP_TYPE_LLM and step.model == "gpt-4o"
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.total_tokens) == (40, 10, 50)
    assert step.input.messages.messages[0].content == "Book a flight"
    assert step.output.messages.messages[0].tool_calls[0].name == "book_flight"
    workflow = map_span(make_span({"traceloop.span.kind": "workflow", "traceloop.entity.name": "plan_trip",
                                   "traceloop.entity.input": '{"city": "NYC"}',
                                   "traceloop.association.properties.session_id": "sess-3"}), RESOURCE)
    assert workflow.step.type == STEP_TYPE_CHAIN and workflow.step.name == "plan_trip"
    assert workflow.session_id == "sess-3" and from_value(workflow.step.input.json) == {"city": "NYC"}
    tool = map_span(make_span({"traceloop.span.kind": "tool", "traceloop.entity.name": "book_flight",
                               "traceloop.entity.input": '{"args": [], "kwargs": {"to": "NYC"}}',
                               "traceloop.entity.output": '"booked"'}), RESOURCE).step
    assert tool.type == STEP_TYPE_TOOL and tool.tool_call.name == "book_flight"
    assert from_value(tool.tool_call.arguments) == {"to": "NYC"} and from_value(tool.tool_call.result) == "booked"
    agent = map_span(make_span({"traceloop.span.kind": "agent", "traceloop.entity.name": "a"}), RESOURCE).step
    assert agent.type == STEP_TYPE_AGENT


def test_unknown_span_is_generic_with_every_attribute_type() -> None:
    attrs = {
        "db.system": "postgresql", "flag": True, "count": 3, "big": 2**62, "ratio": 0.25, "nan": float("nan"),
        "inf": float("-inf"), "tags": ["a", "b"], "mixed": [1, "x", False], "nested": {"k": {"deep": [1, 2]}},
        "raw": b"\x00\xff", "empty": None,
    }
    mapped = map_span(make_span(attrs, name="db.query"), {"service.name": "svc", "session.id": "from-resource"})
    step = mapped.step
    assert mapped.mapper == "generic@1" and step.type == STEP_TYPE_GENERIC and step.name == "db.query"
    assert mapped.session_id == "from-resource"
    got = {key: from_value(step.attributes[key]) for key in attrs}
    assert got == {
        "db.system": "postgresql", "flag": True, "count": 3, "big": str(2**62), "ratio": 0.25, "nan": "NaN",
        "inf": "-Infinity", "tags": ["a", "b"], "mixed": [1, "x", False], "nested": {"k": {"deep": [1, 2]}},
        "raw": "AP8=", "empty": None,
    }
    assert step.attributes["otel.span.kind"].string_value == "SPAN_KIND_UNSPECIFIED"


def test_any_value_of_every_kind() -> None:
    from ingest_helpers import any_value

    assert any_value_to_python(any_value({"a": [b"\x01", 1.5, True]})) == {"a": ["AQ==", 1.5, True]}
    assert any_value_to_python(any_value(None)) is None


def test_links_are_kept() -> None:
    span = make_span({})
    span.links.add(trace_id=TRACE, span_id=b"\x00" * 7 + b"\x05")
    assert from_value(map_span(span, RESOURCE).step.attributes["otel.links"])[0]["span_id"] == "0000000000000005"


def test_a_failing_mapper_falls_back_to_generic() -> None:
    def explode(attrs, span, step) -> None:  # type: ignore[no-untyped-def]
        raise KeyError("oops")

    broken = Mapper("broken", "2", lambda attrs: "x" in attrs, explode)
    mapped = map_span(make_span({"x": 1}), RESOURCE, mappers=(broken, *DEFAULT_MAPPERS))
    assert mapped.mapper == GENERIC.ref and mapped.step.type == STEP_TYPE_GENERIC
    assert "broken@2: KeyError" in mapped.step.attributes["evalsi.mapper_error"].string_value
    assert from_value(mapped.step.attributes["x"]) == 1


def test_spans_without_usable_ids_are_rejected_with_reasons() -> None:
    good = make_span({}, span_id=1)
    no_trace = make_span({}, span_id=2, trace_id=b"")
    zero_trace = make_span({}, span_id=3, trace_id=b"\x00" * 16)
    no_span = Span(trace_id=TRACE, name="x")
    result = map_resource_spans(resource_spans([good, no_trace, zero_trace, no_span]))
    assert [s.span_id for s in result.spans] == ["0000000000000001"] and result.rejected == 3
    assert result.reasons == ["trace_id missing or not 16 bytes", "span_id missing or not 8 bytes"]
