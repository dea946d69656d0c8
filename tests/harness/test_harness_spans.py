"""Spans: an agent span per trial, a child per model and tool call, tagged and in GenAI conventions."""

from __future__ import annotations

import json

from harness_helpers import make_config
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from evalsi.harness import Harness, Task, read_cassette, replay
from evalsi.ingest.mappers import map_resource_spans
from evalsi.records import from_value
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL, TOOL_CALL_STATUS_ERROR


def _tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


async def test_spans_are_tagged_and_map_back_through_ingest(tmp_path) -> None:
    tracer, exporter = _tracer()
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "add", "arguments": {"a": 1, "b": 2}},
                                       {"name": "broken", "arguments": {"reason": "no"}}]), ("text", "3"))
        config = make_config(server.base_url, tools={"python": ["harness_tools:add", "harness_tools:broken"]})
        async with Harness.open(config, tracer=tracer) as harness:
            result = await harness.run(Task(id="span-task", input="1+2"), run_id="run-7", trial=3)

    spans = exporter.get_finished_spans()
    by_op = {}
    for span in spans:
        by_op.setdefault(span.attributes["gen_ai.operation.name"], []).append(span)
    assert {k: len(v) for k, v in by_op.items()} == {"invoke_agent": 1, "chat": 2, "execute_tool": 2}
    agent = by_op["invoke_agent"][0]
    for span in spans:
        assert span.attributes["evalsi.run_id"] == "run-7"
        assert span.attributes["evalsi.trial"] == 3
        assert span.attributes["evalsi.task_id"] == "span-task"
        assert span.context.trace_id == agent.context.trace_id
        if span is not agent:
            assert span.parent.span_id == agent.context.span_id
    chat = by_op["chat"][0]
    assert chat.attributes["gen_ai.request.model"] == "fake-model"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    tools = {s.attributes["gen_ai.tool.name"]: s for s in by_op["execute_tool"]}
    assert json.loads(tools["add"].attributes["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert tools["broken"].status.status_code == StatusCode.ERROR
    assert agent.attributes["evalsi.harness.stop_reason"] == "final_answer"
    # The Record names the trace; its steps name the spans.
    assert result.record.trajectory.trace_id == format(agent.context.trace_id, "032x")
    span_ids = {format(s.context.span_id, "016x") for s in spans}
    assert {s.span_id for s in result.record.trajectory.steps if s.span_id} <= span_ids

    # Through OTLP and the project's own ingest mappers, the spans become the same kinds of steps.
    (resource_spans,) = encode_spans(spans).resource_spans
    mapped = {m.step.name: m.step for m in map_resource_spans(resource_spans).spans}
    assert mapped["evalsi-harness"].type == STEP_TYPE_AGENT
    assert mapped["chat fake-model"].type == STEP_TYPE_LLM
    add_step = mapped["execute_tool add"]
    assert add_step.type == STEP_TYPE_TOOL and add_step.tool_call.name == "add"
    assert from_value(add_step.tool_call.arguments) == {"a": 1, "b": 2}
    assert mapped["execute_tool broken"].tool_call.status == TOOL_CALL_STATUS_ERROR

    # A replay emits the same spans with the recorded timings, marked as a replay.
    result.cassette.write(tmp_path / "c.jsonl")
    exporter.clear()
    await replay(read_cassette(tmp_path / "c.jsonl"), config, tracer=tracer)
    replayed = exporter.get_finished_spans()
    assert sorted((s.name, s.start_time, s.end_time) for s in replayed) == sorted(
        (s.name, s.start_time, s.end_time) for s in spans)
    assert all(s.attributes["evalsi.replay"] is True for s in replayed)
