"""Trace assembly into a Record, and the completed-trace rule with a hand-stepped clock."""

from __future__ import annotations

import json

import pytest
from ingest_helpers import make_span

from evalsi.ingest import CompletionConfig, TraceAssembler, map_span
from evalsi.ingest.completion import traces_of
from evalsi.records import from_value
from evalsi.traces import MappedSpan, assemble_record
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL


def _chat(span_id: int, start: int, user: str | None, answer: str, tokens: tuple[int, int]) -> MappedSpan:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
             "gen_ai.usage.input_tokens": tokens[0], "gen_ai.usage.output_tokens": tokens[1],
             "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": answer}])}
    if user is not None:
        attrs["gen_ai.input.messages"] = json.dumps([{"role": "system", "content": "sys"},
                                                     {"role": "user", "content": user}])
    return map_span(make_span(attrs, span_id=span_id, parent=1, start=start, end=start + 10), {"service.name": "s"})


def _trace() -> list[MappedSpan]:
    root = map_span(make_span({"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c-1",
                               "gen_ai.usage.input_tokens": 999}, span_id=1, start=100, end=500),
                    {"service.name": "agent-svc"})
    tool = map_span(make_span({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
                              span_id=3, parent=1, start=200, end=210), {"service.name": "s"})
    # Out of order on purpose: assembly sorts by start time.
    return [_chat(4, 300, None, "Final answer.", (30, 7)), tool, root, _chat(2, 110, "Question?", "", (10, 2))]


def test_assemble_record() -> None:
    record = assemble_record(_trace(), project="shop")
    steps = record.trajectory.steps
    assert [s.span_id[-1] for s in steps] == ["1", "2", "3", "4"]
    assert [s.type for s in steps] == [STEP_TYPE_AGENT, STEP_TYPE_LLM, STEP_TYPE_TOOL, STEP_TYPE_LLM]
    assert [s.parent_id for s in steps] == ["", *["0000000000000001"] * 3]
    assert record.id == record.trajectory.trace_id == record.provenance.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert record.trajectory.session_id == "c-1" == record.provenance.session_id
    assert record.input.text == "Question?" and record.output.text == "Final answer."
    # The agent span's own usage is not counted again: only LLM and embedding steps add up.
    assert (record.usage.input_tokens, record.usage.output_tokens, record.usage.total_tokens) == (40, 9, 49)
    assert record.usage.latency.ToNanoseconds() == 400
    assert record.provenance.project == "shop" and record.provenance.span_id == "0000000000000001"
    assert from_value(record.metadata["service.name"]) == "agent-svc"
    assert from_value(record.metadata["span_count"]) == 4 and from_value(record.metadata["error_count"]) == 0


def test_record_falls_back_to_root_content_and_tolerates_a_missing_root() -> None:
    root = map_span(make_span({"openinference.span.kind": "AGENT", "input.value": "in", "output.value": "out"},
                              span_id=1), {})
    record = assemble_record([root])
    assert record.input.text == "in" and record.output.text == "out"
    orphan = assemble_record([_chat(5, 10, "q", "a", (1, 1))])
    assert orphan.provenance.span_id == "" and from_value(orphan.metadata["complete_root"]) is False
    with pytest.raises(ValueError):
        assemble_record([])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_completion_waits_for_root_plus_grace() -> None:
    clock = Clock()
    assembler = TraceAssembler(CompletionConfig(grace_s=5, max_wait_s=60), clock=clock)
    spans = _trace()
    children = [s for s in spans if s.parent_span_id]
    root = [s for s in spans if not s.parent_span_id]
    assembler.observe("p", children)
    clock.now = 30
    assert assembler.pop_completed() == []  # no root yet
    assembler.observe("p", root)
    clock.now = 34.9
    assert assembler.pop_completed() == []
    clock.now = 35
    (done,) = assembler.pop_completed()
    assert (done.project, done.trace_id, done.root_seen) == ("p", spans[0].trace_id, True)
    assert len(assembler) == 0
    # A late span re-completes the trace after the grace period, from its own arrival.
    clock.now = 100
    assembler.observe("p", children[:1])
    clock.now = 104
    assert assembler.pop_completed() == []
    clock.now = 105
    assert [t.trace_id for t in assembler.pop_completed()] == [spans[0].trace_id]


def test_a_trace_without_root_completes_after_max_wait() -> None:
    clock = Clock()
    assembler = TraceAssembler(CompletionConfig(grace_s=1, max_wait_s=10), clock=clock)
    assembler.observe("p", [s for s in _trace() if s.parent_span_id])
    clock.now = 9.99
    assert assembler.pop_completed() == []
    clock.now = 10
    (done,) = assembler.pop_completed()
    assert done.root_seen is False


def test_a_trace_another_process_stored_spans_of_is_not_local() -> None:
    clock = Clock()
    assembler = TraceAssembler(CompletionConfig(grace_s=0), clock=clock)
    assembler.observe("p", _trace())
    assembler.note("p", "ab" * 16, has_root=True)
    assembler.note("p", "ab" * 16, has_root=False, foreign=True)  # told by another process
    assert {t.trace_id: t.local for t in assembler.pop_completed()} == {_trace()[0].trace_id: True, "ab" * 16: False}
    assembler.note("p", "ab" * 16, has_root=False)  # a late span, here alone this time
    assert [t.local for t in assembler.pop_completed()] == [True]


def test_projects_are_separate_traces() -> None:
    clock = Clock()
    assembler = TraceAssembler(CompletionConfig(grace_s=0), clock=clock)
    assembler.observe("a", _trace())
    assembler.observe("b", _trace())
    assert sorted(t.project for t in assembler.pop_completed()) == ["a", "b"]


def test_completion_config_is_validated() -> None:
    with pytest.raises(ValueError, match="grace_s"):
        CompletionConfig(grace_s=-1).validate()
    with pytest.raises(ValueError, match="max_wait_s"):
        TraceAssembler(CompletionConfig(grace_s=10, max_wait_s=5))


def test_traces_of_names_each_trace_once_with_whether_its_root_came() -> None:
    a, b = b"\x0a" * 16, b"\x0b" * 16
    spans = [map_span(make_span(span_id=2, parent=1, trace_id=a), {}), map_span(make_span(span_id=3, trace_id=b), {}),
             map_span(make_span(span_id=1, trace_id=a), {}), map_span(make_span(span_id=4, parent=3, trace_id=b), {})]
    assert traces_of(spans) == {a.hex(): True, b.hex(): True}
    assert list(traces_of(spans)) == [a.hex(), b.hex()]  # in order of first appearance
    assert traces_of(spans[:1] + spans[3:]) == {a.hex(): False, b.hex(): False}
