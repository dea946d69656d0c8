"""``mlflow@1`` and ``logfire@1`` on spans shaped as those libraries export them, checked step by step.

MLflow: every attribute JSON-encoded by ``LiveSpan.set_attribute`` (mlflow/tracing/constant.py's
``SpanAttributeKey``), the OpenAI autolog's CHAT_MODEL span (inputs: the request kwargs; outputs: the
ChatCompletion), a ``@mlflow.trace`` TOOL span, and the older ``mlflow.chat.messages`` form.
Logfire: ``logfire.instrument_openai``'s chat span (``request_data``/``response_data`` plus the GenAI attributes in
newer versions, JSON-encoded with ``logfire.json_schema``), the older form without ``gen_ai.input.messages``, a
``@logfire.instrument`` span with its arguments and ``return``, and the ``pending_span`` placeholder.
"""

from __future__ import annotations

import json
from typing import Any

from ingest_helpers import make_span

from evalsi.ingest import map_span
from evalsi.records import from_value
from evalsi.traces import assemble_record
from evalsi.v1alpha1.record_pb2 import (
    STEP_TYPE_AGENT,
    STEP_TYPE_GENERIC,
    STEP_TYPE_LLM,
    STEP_TYPE_RETRIEVAL,
    STEP_TYPE_TOOL,
    TOOL_CALL_STATUS_OK,
)

RESOURCE = {"service.name": "weather-app"}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "system", "content": "You are terse."},
                                                 {"role": "user", "content": "Weather in Paris?"}]}


def mlflow_attrs(span_type: str, inputs: Any, outputs: Any, **extra: Any) -> dict[str, Any]:
    attrs = {"mlflow.traceRequestId": "tr-0af7651916cd43dd8448eb211c80319c", "mlflow.spanType": span_type,
             "mlflow.spanInputs": inputs, "mlflow.spanOutputs": outputs, **extra}
    return {key: json.dumps(value) for key, value in attrs.items()}


def completion(message: dict[str, Any], prompt: int, completion_tokens: int) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens,
                      "total_tokens": prompt + completion_tokens}}


def test_mlflow_agent_trace() -> None:
    answer = {"role": "assistant", "content": "It is 21 C in Paris."}
    spans = [
        make_span(mlflow_attrs("AGENT", {"question": "Weather in Paris?"}, "It is 21 C in Paris.",
                               **{"mlflow.spanFunctionName": "run_agent"}), name="run_agent", span_id=1),
        make_span(mlflow_attrs("CHAT_MODEL", {**REQUEST, "tools": [{"type": "function"}]},
                               completion({"role": "assistant", "content": None, "tool_calls": [CALL]}, 6, 2),
                               **{"mlflow.chat.tokenUsage": {"input_tokens": 6, "output_tokens": 2, "total_tokens": 8},
                                  "mlflow.llm.model": "gpt-4o-mini", "mlflow.message.format": "openai"}),
                  name="Completions", span_id=2, parent=1, start=1_100),
        make_span(mlflow_attrs("TOOL", {"city": "Paris"}, {"temp_c": 21},
                               **{"mlflow.spanFunctionName": "get_weather"}),
                  name="weather lookup", span_id=3, parent=1, start=1_200),
        make_span(mlflow_attrs("CHAT_MODEL", {"model": "gpt-4o-mini", "messages": [
            *REQUEST["messages"], {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'}]}, completion(answer, 8, 6)),
                  name="Completions", span_id=4, parent=1, start=1_300),
        make_span(mlflow_attrs("RETRIEVER", "paris weather", [{"page_content": "Paris is mild", "metadata": {}}]),
                  name="search", span_id=5, parent=1, start=1_400),
    ]
    mapped = [map_span(span, {**RESOURCE, "session.id": "s-1"}) for span in spans]
    assert {m.mapper for m in mapped} == {"mlflow@1"}
    agent, first, tool, second, search = assemble_record(mapped).trajectory.steps
    assert [s.type for s in (agent, first, tool, second, search)] == [
        STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL, STEP_TYPE_LLM, STEP_TYPE_RETRIEVAL]
    assert from_value(agent.input.json) == {"question": "Weather in Paris?"}
    assert agent.output.text == "It is 21 C in Paris."
    # The model from mlflow.llm.model, else the response's; tokens from tokenUsage, else the response's usage.
    assert [first.model, second.model] == ["gpt-4o-mini", "gpt-4o-mini-2024-07-18"]
    assert [(s.usage.input_tokens, s.usage.output_tokens, s.usage.total_tokens) for s in (first, second)] == [
        (6, 2, 8), (8, 6, 14)]
    assert [(m.role, m.content) for m in first.input.messages.messages] == [
        ("system", "You are terse."), ("user", "Weather in Paris?")]
    (call,) = first.output.messages.messages[0].tool_calls
    assert (call.id, call.name, from_value(call.arguments)) == ("call_1", "get_weather", {"city": "Paris"})
    assert (tool.name, tool.tool_call.name) == ("weather lookup", "get_weather")
    assert from_value(tool.tool_call.arguments) == {"city": "Paris"} and from_value(tool.tool_call.result) == {
        "temp_c": 21}
    assert tool.tool_call.status == TOOL_CALL_STATUS_OK
    assert [m.role for m in second.input.messages.messages] == ["system", "user", "assistant", "tool"]
    assert second.input.messages.messages[3].tool_call_id == "call_1"
    assert [(m.role, m.content) for m in second.output.messages.messages] == [("assistant", "It is 21 C in Paris.")]
    assert search.input.text == "paris weather" and from_value(search.output.json)[0]["page_content"] == "Paris is mild"
    assert from_value(search.attributes["mlflow.spanType"]) == '"RETRIEVER"'  # raw attributes kept as sent
    record = assemble_record(mapped)
    assert (record.usage.input_tokens, record.usage.output_tokens) == (14, 8)
    assert record.input.text == "Weather in Paris?" and record.output.text == "It is 21 C in Paris."
    assert record.trajectory.session_id == "s-1"


def test_mlflow_chat_messages_attribute_holds_the_whole_exchange() -> None:
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    span = make_span(mlflow_attrs("LLM", {"prompt": "Hi"}, "Hello!", **{"mlflow.chat.messages": chat}))
    step = map_span(span, RESOURCE).step
    assert step.type == STEP_TYPE_LLM
    assert [(m.role, m.content) for m in step.input.messages.messages] == [("user", "Hi")]
    assert [(m.role, m.content) for m in step.output.messages.messages] == [("assistant", "Hello!")]
    parser = map_span(make_span(mlflow_attrs("PARSER", "raw", {"parsed": True})), RESOURCE).step
    assert parser.type == STEP_TYPE_GENERIC and from_value(parser.output.json) == {"parsed": True}


def logfire_attrs(template: str, span_type: str = "span", **data: Any) -> dict[str, Any]:
    """As Logfire writes them: objects and arrays JSON-encoded, and named in logfire.json_schema."""
    encoded = {key: json.dumps(value) if isinstance(value, dict | list) else value for key, value in data.items()}
    schema = {"type": "object", "properties": {
        key: {"type": "object" if isinstance(value, dict) else "array"} if isinstance(value, dict | list) else {}
        for key, value in data.items()}}
    return {"logfire.span_type": span_type, "logfire.msg_template": template, "logfire.msg": template,
            "logfire.json_schema": json.dumps(schema), "code.function": "answer", **encoded}


def test_logfire_openai_spans_new_and_old() -> None:
    response = {"message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
                "usage": {"prompt_tokens": 6, "completion_tokens": 2, "total_tokens": 8}}
    newer = logfire_attrs(
        "Chat Completion with {request_data[model]!r}", request_data=REQUEST, response_data=response, **{
            "gen_ai.provider.name": "openai", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": 6,
            "gen_ai.usage.output_tokens": 2,
            "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}],
            "gen_ai.system_instructions": [{"type": "text", "content": "You are terse."}],
            "gen_ai.output.messages": [{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
                "finish_reason": "tool_calls"}]})
    older = logfire_attrs("Chat Completion with {request_data[model]!r}", request_data=REQUEST,
                          response_data=response, **{"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o-mini"})
    for attrs in (newer, older):
        mapped = map_span(make_span(attrs, name="Chat Completion with {request_data[model]!r}"), RESOURCE)
        step = mapped.step
        assert mapped.mapper == "logfire@1" and step.type == STEP_TYPE_LLM
        assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.total_tokens) == (6, 2, 8)
        assert [(m.role, m.content) for m in step.input.messages.messages] == [
            ("system", "You are terse."), ("user", "Weather in Paris?")]
        (call,) = step.output.messages.messages[0].tool_calls
        assert (call.name, from_value(call.arguments)) == ("get_weather", {"city": "Paris"})
    assert map_span(make_span(newer), RESOURCE).step.model == "gpt-4o-mini-2024-07-18"
    assert map_span(make_span(older), RESOURCE).step.model == "gpt-4o-mini"


def test_logfire_function_spans_tools_and_pending_placeholders() -> None:
    root = make_span(logfire_attrs("answer {question=}", question="Weather?", options={"units": "C"},
                                   **{"return": "It is 21 C."}), name="answer {question=}", span_id=1)
    pending = make_span({**logfire_attrs("answer {question=}", "pending_span", question="Weather?"),
                         "logfire.pending_parent_id": "0000000000000000"},
                        name="answer {question=}", span_id=9, parent=1, start=1_000, end=1_000)
    tool = make_span(logfire_attrs("running tool: {gen_ai.tool.name}", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_1",
        "tool_arguments": '{"city": "Paris"}', "tool_response": "21 C"}), name="running tool", span_id=2, parent=1,
        start=1_100)
    note = make_span(logfire_attrs("cache miss for {city}", "log", city="Paris"), span_id=3, parent=1, start=1_200)
    mapped = [map_span(span, RESOURCE) for span in (root, pending, tool, note)]
    assert {m.mapper for m in mapped} == {"logfire@1"}
    steps = assemble_record(mapped).trajectory.steps
    assert [s.span_id for s in steps] == [f"{i:016x}" for i in (1, 2, 3)]  # the placeholder left out
    answer, run_tool, log = steps
    assert answer.type == STEP_TYPE_GENERIC and from_value(answer.input.json) == {
        "question": "Weather?", "options": {"units": "C"}}
    assert answer.output.text == "It is 21 C."
    assert run_tool.type == STEP_TYPE_TOOL and run_tool.tool_call.name == "get_weather"
    assert from_value(run_tool.tool_call.arguments) == {"city": "Paris"} and from_value(
        run_tool.tool_call.result) == "21 C"
    assert log.type == STEP_TYPE_GENERIC and from_value(log.input.json) == {"city": "Paris"}
    # Its real span missing (the app crashed mid-span), the placeholder is all there is: it stays.
    (only,) = assemble_record([mapped[1]]).trajectory.steps
    assert from_value(only.attributes["evalsi.placeholder"]) is True
