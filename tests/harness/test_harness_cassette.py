"""Record then replay: the same Record and the same agent-pack scores, with the model server stopped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from harness_helpers import make_config

from evalsi.harness import CassetteMismatch, Harness, Task, read_cassette, replay
from evalsi.sdk import evaluate_async
from evalsi.testing import FakeOpenAI

EVALUATORS = ["builtin/tool-call-accuracy", "builtin/step-efficiency", "builtin/tool-errors", "builtin/task-success"]
REFERENCE = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}, "add"], "success": True}


async def _record(tmp_path: Path) -> tuple:
    async with FakeOpenAI() as server:
        server.enqueue(
            ("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}},
                            {"name": "add", "arguments": {"a": 2, "b": 3}}]),
            ("tool_calls", [{"name": "lookup", "arguments": {"q": "x"}}]),
            ("text", "21 and 5"),
        )
        config = make_config(server.base_url, system="Be brief.", seed=3,
                             tools={"python": ["harness_tools:get_weather", "harness_tools:add"]},
                             mocks={"lookup": {"result": {"hit": True}}},
                             faults=[{"tool": "add", "kind": "error", "calls": [1]}])
        async with Harness.open(config) as harness:
            live = await harness.run(Task(id="w1", input="weather and sum", reference=REFERENCE), run_id="rec",
                                     trial=1)
        requests = len(server.requests)
    path = tmp_path / "w1.trial-1.jsonl"
    assert live.cassette is not None
    live.cassette.write(path)
    return config, live, path, requests


def _scores(results) -> dict:
    return {(r.evaluator, s.name): (s.WhichOneof("value"), getattr(s, s.WhichOneof("value")))
            for r in results for s in r.scores}


async def test_replay_rebuilds_the_record_and_scores_without_a_model(tmp_path: Path) -> None:
    config, live, path, requests = await _record(tmp_path)
    assert requests == 3
    # The server is gone: any model call would fail with a connection error (an infra error, not a mismatch).
    replayed = await replay(read_cassette(path), config)
    assert replayed.error is None and replayed.stop_reason == live.stop_reason == "final_answer"
    assert replayed.record == live.record
    assert replayed.cassette is None  # a replay records nothing

    live_scores = _scores(await evaluate_async([live.record], EVALUATORS))
    replay_scores = _scores(await evaluate_async([replayed.record], EVALUATORS))
    assert live_scores == replay_scores
    assert live_scores[("tool-call-accuracy", "recall")] == ("number", 1.0)
    # The fault injected on add's first call: one of three calls errored, and add was never retried.
    assert live_scores[("tool-errors", "error_rate")] == ("number", 1 / 3)
    assert live_scores[("tool-errors", "recovered")] == ("passed", False)
    assert live_scores[("task-success", "passed")] == ("passed", True)


async def test_replay_is_deterministic_across_reads(tmp_path: Path) -> None:
    config, _live, path, _ = await _record(tmp_path)
    first = await replay(read_cassette(path), config)
    second = await replay(read_cassette(path), config)
    assert first.record == second.record


async def test_a_changed_request_is_a_mismatch_naming_the_step(tmp_path: Path) -> None:
    config, _live, path, _ = await _record(tmp_path)
    changed = dataclasses.replace(config, system="Be verbose.")
    with pytest.raises(CassetteMismatch, match=r"w1.trial-1.jsonl: step 1: the model request differs from the "
                                               r"recorded one at messages\[0\].content: recorded \"Be brief.\", "
                                               r"now \"Be verbose.\""):
        await replay(read_cassette(path), changed)
    fewer_steps = dataclasses.replace(config, max_steps=2)
    with pytest.raises(CassetteMismatch, match=r"the replay ended \(max_steps\) where the recording has a model entry"):
        await replay(read_cassette(path), fewer_steps)


async def test_a_budget_stop_replays_as_recorded(tmp_path: Path) -> None:
    async with FakeOpenAI() as server:
        server.enqueue(("tool_calls", [{"name": "slow", "arguments": {"seconds": 1}}]), ("text", "late"))
        config = make_config(server.base_url, tools={"python": ["harness_tools:slow"]},
                             budget={"wall_clock": "200ms"})
        async with Harness.open(config) as harness:
            live = await harness.run(Task(id="slow", input="wait"))
    assert live.stop_reason == "budget_wall_clock"
    live.cassette.write(tmp_path / "slow.jsonl")
    replayed = await replay(read_cassette(tmp_path / "slow.jsonl"), config)
    assert replayed.stop_reason == "budget_wall_clock" and replayed.record == live.record


def test_a_cassette_without_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"type": "model"}\n')
    with pytest.raises(Exception, match=r"bad.jsonl:1: a cassette starts with its header line"):
        read_cassette(path)
