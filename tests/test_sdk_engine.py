"""evaluate() on the run engine: what only a call in code can give the in-process run (judges configured in code,
evaluator objects, a second result set) and what a cancel keeps."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import evalsi
from evalsi import Output, evaluator
from evalsi.errors import BadInputError
from evalsi.judges import JudgeConfig
from evalsi.judges.config import SecretRef
from evalsi.sdk import evaluate_async
from evalsi.testing import FakeOpenAI
from evalsi.v1alpha1.run_pb2 import RUN_STATE_CANCELLED, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, OUTCOME_SCORED, OUTCOME_SKIPPED

ROWS = [{"id": f"q{i}", "input": f"question {i}", "output": "a" * i, "reference": "aaa"} for i in range(6)]


@evaluator("test/longer", scope="comparative", requires=["output"], outputs=[Output("longer", "boolean")])
def longer(records: Any) -> bool:
    return len(records[0].output.text) > len(records[1].output.text)


def test_compare_to_pairs_each_record_with_its_counterpart_by_id() -> None:
    theirs = [{"id": f"q{i}", "output": "aa"} for i in range(5)]  # q5 has no counterpart
    results = evalsi.evaluate(ROWS, [longer], compare_to=theirs)
    by_record = {r.record_id: r for r in results.results}
    assert [by_record[f"q{i}"].scores[0].passed for i in range(5)] == [False, False, False, True, True]
    assert by_record["q5"].outcome == OUTCOME_SKIPPED
    assert by_record["q5"].reason == "no counterpart in the other result set"
    summary = results.metric("longer")
    assert (summary.n, summary.mean, summary.skipped) == (5, pytest.approx(0.4), 1)
    assert results.run.state == RUN_STATE_SUCCEEDED


def test_a_comparative_evaluator_without_a_second_set_is_refused_before_anything_runs() -> None:
    with pytest.raises(BadInputError, match="longer is comparative: give a second result set"):
        evalsi.evaluate(ROWS, ["exact-match", longer])


async def test_a_judge_configured_in_code_is_used_as_given(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-test-in-a-file\n", encoding="utf-8")
    reply = json.dumps({"reasoning": "fine", "score": 4})
    async with FakeOpenAI(lambda _body: reply, api_key="sk-test-in-a-file") as server:
        # A credential reference and a param left unsent: neither survives the judge's wire form (JudgeSpec), so
        # the run's tasks must reach this very config.
        judge = JudgeConfig(model="judge-model", base_url=server.base_url, secret=SecretRef(file=str(key_file)),
                            params={"temperature": None}, max_retries=0)
        results = await evaluate_async(ROWS[:3], ["llm-judge"], judge=judge, cache=False)
        bodies = list(server.requests)
    assert [r.outcome for r in results.results] == [OUTCOME_SCORED] * 3
    assert len(bodies) == 3 and all("temperature" not in body for body in bodies)
    assert results.run.spec.judges["default"].model == "judge-model"
    assert results.run.manifest.judges["default"].startswith("openai:judge-model @ http://127.0.0.1")


async def test_a_cancel_lets_calls_in_flight_finish_keeps_them_and_cancels_the_rest() -> None:
    release = asyncio.Event()
    waiting: list[str] = []

    @evaluator("test/slow-from-3", requires=["output"], outputs=[Output("ok", "boolean")])
    async def slow_from_3(record: Any) -> bool:
        if int(record.id[1:]) >= 3:
            waiting.append(record.id)
            await release.wait()
        return True

    cancel = asyncio.Event()
    rows = [{"id": f"q{i}", "output": "x"} for i in range(10)]
    run = asyncio.create_task(evaluate_async(rows, [slow_from_3], concurrency=2, cancel=cancel))
    while len(waiting) < 2:  # q3 and q4 are in flight, q0..q2 done
        await asyncio.sleep(0.01)
    cancel.set()
    await asyncio.sleep(0.2)  # the cancel is seen: nothing new starts
    release.set()
    results = await asyncio.wait_for(run, timeout=30)
    outcomes = {r.record_id: r.outcome for r in results.results}
    assert {rid for rid, o in outcomes.items() if o == OUTCOME_SCORED} == {"q0", "q1", "q2", "q3", "q4"}
    assert {rid for rid, o in outcomes.items() if o == OUTCOME_CANCELLED} == {f"q{i}" for i in range(5, 10)}
    assert results.run.state == RUN_STATE_CANCELLED
    assert results.run.message == "cancelled; 5 evaluations did not run, the figures are partial"
    assert (results.run.progress.scored, results.run.progress.cancelled) == (5, 5)
    assert results.metric("slow-from-3").n == 5


async def test_concurrency_bounds_the_calls_in_flight_across_the_tasks_of_an_evaluation() -> None:
    in_flight: list[int] = [0]
    most: list[int] = [0]

    @evaluator("test/counted", requires=["output"], outputs=[Output("ok", "boolean")])
    async def counted(record: Any) -> bool:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.001)
        in_flight[0] -= 1
        return True

    rows = [{"id": f"q{i}", "output": "x"} for i in range(200)]  # several tasks of 16 rounds of 3 calls
    results = await evaluate_async(rows, [counted], concurrency=3)
    assert results.metric("counted").n == 200
    assert len({r.record_id for r in results.results}) == 200
    assert most[0] == 3


def test_evalsi_eval_compare_to_grades_pairwise_preference_with_the_judge(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalsi.cli.main import cli
    from evalsi.testing.threaded import ThreadedProvider

    ours, theirs = tmp_path / "ours.jsonl", tmp_path / "theirs.jsonl"
    ours.write_text("".join(json.dumps({"id": f"q{i}", "input": "capital of France?", "output": "CANDIDATE: Paris"})
                            + "\n" for i in range(3)), encoding="utf-8")
    theirs.write_text("".join(json.dumps({"id": f"q{i}", "input": "capital of France?", "output": "BASELINE: Lyon"})
                              + "\n" for i in range(3)), encoding="utf-8")

    def reply(body: dict[str, Any]) -> str:  # prefers the candidate in either order
        prompt = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        first = "A" if prompt.index("CANDIDATE") < prompt.index("BASELINE") else "B"
        return json.dumps({"reasoning": "Paris is right", "score": first})

    with ThreadedProvider(reply) as server:
        result = CliRunner().invoke(cli, ["eval", "--data", str(ours), "-e", "pairwise-preference",
                                          "--compare-to", str(theirs), "--judge-model", "judge-1",
                                          "--judge-base-url", server.base_url, "--no-cache", "--format", "json"])
        calls = len(server.requests)
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    labels = [s["label"] for r in document["results"] for s in r["scores"] if s["name"] == "preference"]
    assert labels == ["win"] * 3 and calls == 6  # each pair judged in both orders
