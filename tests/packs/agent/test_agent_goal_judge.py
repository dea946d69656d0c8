"""builtin/goal-judge: a session judged against the user's goal, through the runner and a local fake provider."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

import evalsi
from evalsi.errors import BadInputError
from evalsi.evaluators import JUDGE_PENDING, EvalContext
from evalsi.evaluators.runner import run_evaluators
from evalsi.judges import JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.packs.agent.judged import ARGUMENT_CHARS, goal_judge, goal_template, transcript
from evalsi.records import from_value, make_record
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_EVALUATOR,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
    Score,
)

MODEL = "goal-judge-model"


async def no_sleep(_seconds: float) -> None:
    return None


def answer(score: Any, reasoning: str = "the booking was made") -> str:
    return json.dumps({"reasoning": reasoning, "score": score})


@asynccontextmanager
async def judge_for(server: FakeOpenAI, cache_dir: Path) -> AsyncIterator[JudgeClient]:
    config = JudgeConfig(model=MODEL, provider="openai", base_url=server.base_url, max_retries=1)
    client = JudgeClient(config, limiter=RateLimiter(sleep=no_sleep), cache=JudgeCache(cache_dir), sleep=no_sleep,
                         environ={})
    async with client:
        yield client


async def judge_session(
    records: Sequence[Record], judge: JudgeClient | None, **params: Any
) -> EvaluationResult:
    [result] = await run_evaluators(records, [goal_judge.bind(params)], lambda _bound: EvalContext(judge=judge))
    return result


def tool(name: str, status: str = "OK", error: str = "", **arguments: Any) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "arguments": arguments, "status": f"TOOL_CALL_STATUS_{status}"}
    if error:
        call["error"] = error
    return {"type": "STEP_TYPE_TOOL", "name": name, "toolCall": call}


def turn(id: str, turn_no: int, user: Any, agent: str, *steps: dict[str, Any], **metadata: Any) -> Record:
    rec = make_record(id=id, input=user, output=agent, metadata={"session_id": "s1", "turn": turn_no, **metadata})
    if steps:
        json_format.ParseDict({"trajectory": {"steps": list(steps)}}, rec)
    return rec


def booking_session() -> list[Record]:
    """Three turns given out of order: the judge must see them ordered by metadata turn."""
    return [
        turn("t3", 3, "Yes, book it.", "Booked TP123; confirmation sent.", tool("book", flight="TP123")),
        turn("t1", 1, {"messages": [{"role": "system", "content": "be brief"},
                                    {"role": "user", "content": "Find me a flight to Lisbon on Friday."}]},
             "I found TP123 at 9:00. Shall I book it?",
             tool("search", status="ERROR", error="timeout", to="LIS"), tool("search", to="LIS", day="fri")),
        turn("t2", 2, "Pay with my card on file.", "I need approval to charge the card.",
             tool("charge", status="BLOCKED", amount=120)),
    ]


def user_prompt(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def by_name(result: EvaluationResult) -> dict[str, Score]:
    return {s.name: s for s in result.scores}


def meta(score: Score) -> dict[str, Any]:
    return {key: from_value(value) for key, value in score.metadata.items()}


# --- pass, fail, unparseable, no judge -----------------------------------------------------------------------


async def test_a_session_that_reached_its_goal_passes(tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _body: answer(5)) as server, judge_for(server, tmp_path) as judge:
        result = await judge_session(booking_session(), judge)
        [body] = server.requests
    assert result.outcome == OUTCOME_SCORED, result.reason
    assert result.record_id == "s1"
    scores = by_name(result)
    assert scores["passed"].passed is True and scores["score"].number == 1.0
    assert scores["passed"].explanation == scores["score"].explanation == "the booking was made"
    template = goal_template()
    assert meta(scores["score"]) == {
        "raw_score": 5, "judge_model": MODEL, "cached": False, "template": "goal-judge@1",
        "template_hash": template.hash, "turns": 3, "goal_source": "input",
    }
    # the judge's tokens are counted once per result
    assert scores["passed"].cost.input_tokens > 0 and scores["score"].cost.total_tokens == 0
    prompt = user_prompt(body)
    assert "<goal>\nFind me a flight to Lisbon on Friday.\n</goal>" in prompt
    assert prompt.index("## Turn 1") < prompt.index("## Turn 2") < prompt.index("## Turn 3")
    assert "User: Find me a flight to Lisbon on Friday.\n" in prompt and "be brief" not in prompt
    assert 'Tool call: search({"to":"LIS"}) -> error: timeout' in prompt
    assert 'Tool call: search({"day":"fri","to":"LIS"}) -> ok' in prompt
    assert 'Tool call: charge({"amount":120}) -> blocked (did not run)' in prompt
    assert "Agent: Booked TP123; confirmation sent." in prompt
    assert '"score": <1-5>' in body["messages"][0]["content"] and body["messages"][0]["role"] == "system"


@pytest.mark.parametrize(("raw", "number"), [(1, 0.0), (2, 0.25), (3, 0.5)])
async def test_a_low_score_fails(raw: int, number: float, tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _body: answer(raw, "no booking was made")) as server, \
            judge_for(server, tmp_path) as judge:
        result = await judge_session(booking_session(), judge)
    scores = by_name(result)
    assert scores["passed"].passed is False and scores["score"].number == number
    assert scores["passed"].explanation == "no booking was made"


async def test_pass_score_moves_the_bar(tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _body: answer(3)) as server, judge_for(server, tmp_path) as judge:
        lenient = await judge_session(booking_session(), judge, pass_score=3)
        default = await judge_session(booking_session(), judge)
    assert by_name(lenient)["passed"].passed is True and by_name(default)["passed"].passed is False
    assert by_name(lenient)["score"].number == by_name(default)["score"].number == 0.5


@pytest.mark.parametrize("text", ["The agent did well overall.", answer(9)])
async def test_an_unparseable_answer_is_an_evaluator_error_with_the_reason(text: str, tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _body: text) as server, judge_for(server, tmp_path) as judge:
        result = await judge_session(booking_session(), judge)
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert not result.scores  # neither a fail nor a 0
    assert result.reason.startswith("UnparseableAnswer: ") and result.reason.endswith(f"the answer began: {text!r}")


async def test_without_a_judge_the_session_is_pending_never_passed() -> None:
    result = await judge_session(booking_session(), None)
    assert result.outcome == OUTCOME_SKIPPED and result.reason.startswith(JUDGE_PENDING)
    assert not result.scores


async def test_a_cached_answer_spends_nothing(tmp_path: Path) -> None:
    async with FakeOpenAI(lambda _body: answer(4)) as server, judge_for(server, tmp_path) as judge:
        first = await judge_session(booking_session(), judge)
        second = await judge_session(booking_session(), judge)
        assert len(server.requests) == 1
    assert meta(by_name(first)["passed"])["cached"] is False and meta(by_name(second)["passed"])["cached"] is True
    assert by_name(second)["passed"].cost.total_tokens == 0 and by_name(second)["score"].number == 0.75


# --- the goal ------------------------------------------------------------------------------------------------


async def test_the_goal_param_wins_over_metadata(tmp_path: Path) -> None:
    records = booking_session()
    records[1].metadata["goal"].string_value = "Book the cheapest Friday flight to Lisbon."
    async with FakeOpenAI(lambda _body: answer(4)) as server, judge_for(server, tmp_path) as judge:
        from_metadata = await judge_session(records, judge)
        from_param = await judge_session(records, judge, goal="Cancel my hotel.")
        metadata_prompt, param_prompt = (user_prompt(b) for b in server.requests)
    assert "<goal>\nBook the cheapest Friday flight to Lisbon.\n</goal>" in metadata_prompt
    assert "<goal>\nCancel my hotel.\n</goal>" in param_prompt
    assert meta(by_name(from_metadata)["score"])["goal_source"] == "metadata"
    assert meta(by_name(from_param)["score"])["goal_source"] == "param"


async def test_no_goal_anywhere_is_skipped_without_a_call(tmp_path: Path) -> None:
    records = [make_record(id="a", output="Hello!", metadata={"session_id": "s9"})]
    async with FakeOpenAI(lambda _body: answer(5)) as server, judge_for(server, tmp_path) as judge:
        result = await judge_session(records, judge)
        assert server.requests == []
    assert result.outcome == OUTCOME_SKIPPED
    assert result.reason.startswith("no goal: set param 'goal'")


async def test_a_non_string_goal_in_metadata_fails_that_session(tmp_path: Path) -> None:
    records = booking_session()
    records[1].metadata["goal"].number_value = 3
    async with FakeOpenAI(lambda _body: answer(5)) as server, judge_for(server, tmp_path) as judge:
        result = await judge_session(records, judge)
        assert server.requests == []
    assert result.outcome == OUTCOME_ERROR and result.error_kind == ERROR_KIND_EVALUATOR
    assert "metadata 'goal' of record 't1' must be a non-empty string" in result.reason


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"pass_score": 0}, "param 'pass_score' must be between 1 and 5, got 0"),
        ({"pass_score": 6}, "param 'pass_score' must be between 1 and 5, got 6"),
        ({"pass_score": "4"}, "param 'pass_score' must be int"),
        ({"goal": "  "}, "param 'goal' is empty"),
    ],
)
def test_bad_params_are_bad_input_at_bind(params: dict[str, Any], message: str) -> None:
    with pytest.raises(BadInputError, match="builtin/goal-judge") as caught:
        goal_judge.bind(params)
    assert message in str(caught.value)


def test_tool_arguments_are_shown_compactly() -> None:
    rec = turn("a", 1, "summarize", "done", tool("write", text="x" * 1000))
    shown = transcript([rec])
    assert f'Tool call: write({{"text":"{"x" * (ARGUMENT_CHARS - 9)}...) -> ok' in shown
    assert len(shown) < 400


# --- through evalsi.evaluate ---------------------------------------------------------------------------------


def _session_rows() -> list[dict[str, Any]]:
    return [
        {"id": "a1", "input": "Book a table for two tonight.", "output": "Booked for 8pm.", "session_id": "won",
         "turn": 1, "trajectory": {"steps": [tool("reserve", people=2)]}},
        {"id": "b1", "input": "Refund order 7.", "output": "I can't find it.", "session_id": "lost", "turn": 1,
         "trajectory": {"steps": [tool("lookup_order", status="ERROR", error="not found", id=7)]}},
        {"id": "b2", "input": "It is order 7!", "output": "Still nothing, sorry.", "session_id": "lost", "turn": 2},
    ]


async def test_evaluate_reports_goal_judge_metrics(tmp_path: Path) -> None:
    def reply(body: dict[str, Any]) -> str:
        won = "Book a table" in user_prompt(body)
        return answer(5 if won else 1, "table booked" if won else "no refund")

    async with FakeOpenAI(reply) as server:
        results = await evalsi.evaluate_async(
            _session_rows(), ["goal-judge"], cache_dir=tmp_path,
            judge={"provider": "openai", "model": MODEL, "base_url": server.base_url},
        )
        assert len(server.requests) == 2
    passed = results.metric("goal-judge.passed")
    assert passed.n == 2 and passed.mean == pytest.approx(0.5)
    score = results.metric("goal-judge.score")
    assert score.n == 2 and score.mean == pytest.approx(0.5)
    explanations = {r.record_id: r.scores[0].explanation for r in results if r.evaluator == "goal-judge"}
    assert explanations == {"won": "table booked", "lost": "no refund"}


async def test_evaluate_without_a_judge_skips_every_session_as_pending() -> None:
    results = await evalsi.evaluate_async(_session_rows(), ["goal-judge"])
    summary = results.metric("goal-judge.passed")
    assert summary.n == 0 and summary.skipped == 2
    assert all(r.reason.startswith(JUDGE_PENDING) for r in results if r.evaluator == "goal-judge")
