"""Inspect scorers as Evals.si evaluators (contract tests with inspect_ai installed, offline): over the records
imported from a real log, an adapted Inspect scorer gives what that scorer gave inside Inspect's own eval; a
model-graded scorer's model is the run's judge."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest
from inspect_ai.log import EvalLog
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    PARTIAL,
    Score,
    Scorer,
    Target,
    exact,
    f1,
    includes,
    model_graded_qa,
    scorer,
)
from inspect_ai.solver import TaskState

import evalsi
from evalsi.adapters.inspect import UPSTREAM, inspect_evaluator, inspect_judged_evaluator, log_rows, task_state
from evalsi.errors import BadInputError
from evalsi.evaluators import Pack, Registry
from evalsi.ports import free_ports
from evalsi.records import make_record
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.score_pb2 import ErrorKind, Outcome


def test_an_adapted_scorer_gives_what_it_gave_inside_inspect(capitals_log: EvalLog) -> None:
    rows = list(log_rows(capitals_log.location))
    evaluators = [inspect_evaluator(exact(), name="inspect/exact"),
                  inspect_evaluator(includes(), name="inspect/includes"),
                  inspect_evaluator(f1(), name="inspect/f1", kind="number")]
    results = evalsi.evaluate(rows, evaluators)
    ours = {(r.record_id, r.trial, r.evaluator): r.scores[0] for r in results.results}
    assert len(ours) == 27
    for row in rows:
        key = (row["id"], row["trial"])
        for name in ("exact", "includes"):
            assert ours[(*key, name)].passed == (row["metadata"][f"inspect.{name}"] == CORRECT), (key, name)
    assert {round(s.number, 6) for (_, _, e), s in ours.items() if e == "f1"} == {0.0, 1.0}
    # "Paris." is Inspect's exact() match: the adapted scorer says so too, where our exact-match would not.
    paris_dot = next(r for r in rows if r["output"] == "Paris.")
    assert ours[(paris_dot["id"], paris_dot["trial"], "exact")].passed


def test_the_task_state_a_scorer_gets_is_the_records() -> None:
    record = make_record(
        id="sum",
        input={"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"}]},
        output={"messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "add", "arguments": {"x": 2}}]},
            {"role": "tool", "content": "5", "tool_call_id": "c1", "name": "add"},
            {"role": "assistant", "content": "5"},
        ]},
        reference=["5", "five"],
        metadata={"inspect.model": "mockllm/model", "topic": "math"},
    )
    record.provenance.trial = 2
    state = task_state(record)
    assert (state.sample_id, state.epoch, str(state.model)) == ("sum", 3, "mockllm/model")
    assert [m.role for m in state.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert state.messages[2].tool_calls is not None and state.messages[2].tool_calls[0].arguments == {"x": 2}
    assert state.output.completion == "5" and list(state.target) == ["5", "five"]
    assert state.metadata["topic"] == "math" and state.input_text == "2+3?"
    text = task_state(make_record(id="t", input="Capital?", output="Paris"))
    assert text.input == "Capital?" and text.output.completion == "Paris" and list(text.target) == []


@scorer(metrics=[])
def graded_by_length() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score | None:
        text = state.output.completion
        if not text:
            return None
        return Score(value=CORRECT if len(text) < 5 else PARTIAL if len(text) < 8 else INCORRECT,
                     explanation=f"{len(text)} characters")

    return score


def test_values_map_to_the_declared_kind_and_no_score_skips() -> None:
    rows: list[dict[str, Any]] = [{"id": "a", "output": "Rome"}, {"id": "b", "output": "Paris!"},
                                  {"id": "c", "output": "Lyon, France"}, {"id": "d", "output": ""}]
    passed = evalsi.evaluate(rows, [inspect_evaluator(graded_by_length(), name="t/short")])
    by_id = {r.record_id: r for r in passed.results}
    assert by_id["a"].scores[0].passed and by_id["a"].scores[0].explanation == "4 characters"
    assert not by_id["c"].scores[0].passed
    # A partial is neither a pass nor a fail: an evaluator error, not a verdict; no score is a skip.
    assert by_id["b"].outcome == Outcome.OUTCOME_ERROR and by_id["b"].error_kind == ErrorKind.ERROR_KIND_EVALUATOR
    assert "declare kind='number'" in by_id["b"].reason
    assert by_id["d"].outcome == Outcome.OUTCOME_SKIPPED and "no score" in by_id["d"].reason
    summary = passed.metric("short")
    assert (summary.n, summary.errors, summary.skipped) == (2, 1, 1)
    numbers = evalsi.evaluate(rows, [inspect_evaluator(graded_by_length(), name="t/short", kind="number")])
    assert [r.scores[0].number for r in numbers.results if r.scores] == [1.0, 0.5, 0.0]
    labels = evalsi.evaluate(rows, [inspect_evaluator(graded_by_length(), name="t/short", kind="label")])
    assert [r.scores[0].label for r in labels.results if r.scores] == ["C", "P", "I"]


def test_the_installed_inspect_is_the_pinned_upstream_and_a_pack_of_adapted_scorers_is_wrapped() -> None:
    assert f"inspect-ai=={version('inspect-ai')}" == UPSTREAM
    pack = Pack(name="inspect", evaluators=(inspect_evaluator(exact(), name="inspect/exact"),), tier="wrapped",
                upstream=UPSTREAM)
    registry = Registry()
    registry.add_pack(pack)
    assert registry.packs["inspect"].tier == "wrapped"
    assert registry.resolve("inspect/exact").pack == "inspect"


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(BadInputError, match="kind: 'boolean' is not one of passed, number, label"):
        inspect_evaluator(exact(), name="inspect/exact", kind="boolean")  # type: ignore[arg-type]



def _grade(body: dict[str, Any]) -> str:
    prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
    return "The submission names another city. GRADE: I" if "[Submission]: Lyon" in prompt else "GRADE: C"


def test_a_model_graded_scorer_calls_the_runs_judge_cached() -> None:
    rows = [{"id": "a", "input": "Capital of France?", "output": "Paris", "reference": "Paris"},
            {"id": "b", "input": "Capital of France?", "output": "Lyon", "reference": "Paris"},
            {"id": "c", "input": "Capital of France?"}]
    graded_qa = inspect_judged_evaluator(lambda model: model_graded_qa(model=model), name="inspect/graded-qa")
    with ThreadedProvider(_grade) as server:
        judge = {"provider": "openai", "model": "judge-1", "base_url": server.base_url}
        results = evalsi.evaluate(rows, [graded_qa], judge=judge)
        by_id = {r.record_id: r for r in results.results}
        assert by_id["a"].scores[0].passed and not by_id["b"].scores[0].passed
        assert "another city" in by_id["b"].scores[0].explanation
        assert by_id["c"].outcome == Outcome.OUTCOME_SKIPPED and by_id["c"].reason == "missing output"
        assert len(server.requests) == 2 and {b["model"] for b in server.requests} == {"judge-1"}
        # The two records are graded concurrently: their requests may arrive in either order.
        assert any("[Submission]: Lyon" in b["messages"][0]["content"] for b in server.requests)
        again = evalsi.evaluate(rows, [graded_qa], judge=judge)
        assert [r.outcome for r in again.results] == [r.outcome for r in results.results]
        assert len(server.requests) == 2  # the judge's answers came from our judge cache
    unjudged = evalsi.evaluate(rows[:1], [graded_qa])
    assert unjudged.results[0].outcome == Outcome.OUTCOME_SKIPPED
    assert unjudged.results[0].reason.startswith("judge_pending")
    (port,) = free_ports(1)
    down = {"provider": "openai", "model": "judge-1", "base_url": f"http://127.0.0.1:{port}/v1", "max_retries": 0}
    failed = evalsi.evaluate(rows[:1], [graded_qa], judge=down, cache=False).results[0]
    assert failed.outcome == Outcome.OUTCOME_ERROR and failed.error_kind == ErrorKind.ERROR_KIND_INFRA
