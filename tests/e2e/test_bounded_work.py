"""Bounded work per request on a real stack: a regex bomb stalls nothing, and a call past its deadline is
stopped on the worker, which then answers the next call at once.

The stack has one cpu worker, so "the worker is free again" is about that one process. Evaluators that sleep
come from a third-party pack installed the way pip would (a dist-info with an ``evalsi.packs`` entry point on
PYTHONPATH), so the api and the worker load it exactly like any other pack.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from e2e_helpers import environment

import evalsi
from evalsi.errors import InfraError
from evalsi.records import make_record
from evalsi.service.config import WorkerConfig
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_EVALUATOR, OUTCOME_ERROR, OUTCOME_SCORED

BOMB = "a" * 29 + "!"
CALL_TIMEOUT_S = 1.0
SLOW_PACK = '''
import asyncio
import time

from evalsi.evaluators import Pack, evaluator


@evaluator("slow/sleep", version="1.0.0", requires=["output"], params={"seconds": "how long to block"})
def sleep(record, *, seconds: float = 0.0) -> bool:
    time.sleep(seconds)
    return True


@evaluator("slow/sleep-async", version="1.0.0", requires=["output"], params={"seconds": "how long to wait"})
async def sleep_async(record, *, seconds: float = 0.0) -> bool:
    await asyncio.sleep(seconds)
    return True


PACK = Pack(name="slow", evaluators=(sleep, sleep_async))
'''


def _install_slow_pack(site: Path) -> None:
    (site / "slowpack").mkdir(parents=True)
    (site / "slowpack" / "__init__.py").write_text(textwrap.dedent(SLOW_PACK))
    info = site / "slowpack-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slowpack\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text("[evalsi.packs]\nslow = slowpack:PACK\n")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("bounded")
    _install_slow_pack(tmp / "site")
    datasets = tmp / "datasets"
    datasets.mkdir()
    rows = [{"id": "bomb", "output": BOMB}, {"id": "as", "output": "aaaa"}, {"id": "b", "output": "b"}]
    (datasets / "bounded.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    python_path = os.pathsep.join(p for p in (str(tmp / "site"), os.environ.get("PYTHONPATH")) if p)
    with environment(PYTHONPATH=python_path, EVALSI_WORKER_CALL_TIMEOUT=str(CALL_TIMEOUT_S)):
        running = Stack(tmp, datasets_dir=datasets, workers=[WorkerConfig("cpu", 1, 8)]).start()
    try:
        _wait_for_the_worker(running)
        yield running
    finally:
        running.stop()


def _wait_for_the_worker(stack: Stack, timeout_s: float = 60.0) -> None:
    """/readyz speaks for the api; the worker subscribes to evaluate.cpu on its own time."""
    deadline = time.monotonic() + timeout_s
    body = {"evaluators": [{"ref": "exact-match"}], "records": [{"id": "x", "output": {"text": "x"}}]}
    while (status := _post(stack, body)[0]) == 503 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert status == 200, stack.logs()


def _request(ref: str, params: dict, outputs: list[str]) -> EvaluateRequest:
    request = EvaluateRequest()
    request.evaluators.append(EvaluatorRef(ref=ref))
    request.evaluators[0].params.update(params)
    request.records.extend(make_record(id=f"r{i}", output=output) for i, output in enumerate(outputs))
    return request


def _post(stack: Stack, body: dict, *, timeout_header: str | None = None) -> tuple[int, dict, float]:
    headers = {"content-type": "application/json"}
    if timeout_header is not None:
        headers["x-evalsi-timeout"] = timeout_header
    started = time.monotonic()
    request = urllib.request.Request(
        stack.http + "/v1alpha1/evaluate", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read()), time.monotonic() - started
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), time.monotonic() - started


def _ordinary(stack: Stack) -> float:
    """Seconds an ordinary exact-match Evaluate takes; asserts its answer."""
    body = {"evaluators": [{"ref": "exact-match"}], "records": [{"id": "x", "output": {"text": "Paris"},
                                                                 "reference": {"text": "Paris"}}]}
    status, answer, seconds = _post(stack, body)
    assert status == 200, answer
    assert answer["results"][0]["scores"][0]["passed"] is True
    return seconds


def test_a_regex_bomb_is_matched_in_linear_time_while_other_calls_are_answered(stack: Stack) -> None:
    bomb = {"evaluators": [{"ref": "regex-match", "params": {"pattern": "(a+)+$"}}],
            "records": [{"id": f"b{i}", "output": {"text": BOMB}} for i in range(200)]
            + [{"id": "as", "output": {"text": "aaaa"}}]}
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        bombs = [pool.submit(_post, stack, bomb) for _ in range(2)]
        ordinary = _ordinary(stack)
        answers = [future.result() for future in bombs]
    assert ordinary < 1.0
    for status, answer, seconds in answers:
        assert status == 200, answer
        assert seconds < 5.0  # the backtracking engine took ~95 s for ONE such record
        passed = [result["scores"][0].get("passed", False) for result in answer["results"]]
        assert passed == [False] * 200 + [True]  # (a+)+$ needs an a at the end: "...a!" has none, "aaaa" has


def test_a_pattern_only_a_backtracking_engine_can_run_is_refused_naming_the_param(stack: Stack) -> None:
    body = {"evaluators": [{"ref": "regex-match", "params": {"pattern": r"(a)\1"}}],
            "records": [{"id": "x", "output": {"text": "aa"}}]}
    status, answer, _ = _post(stack, body)
    assert status == 400
    assert "evaluators[0].params: evaluator builtin/regex-match: param 'pattern'" in answer["message"]
    assert "backreferences are not supported" in answer["message"]


@pytest.mark.parametrize("ref", ["slow/sleep", "slow/sleep-async"])
def test_an_evaluate_past_its_deadline_is_stopped_and_the_worker_answers_the_next_at_once(
    stack: Stack, ref: str
) -> None:
    body = {"evaluators": [{"ref": ref, "params": {"seconds": 20}}], "records": [{"id": "x", "output": {"text": "y"}}]}
    status, answer, seconds = _post(stack, body, timeout_header="0.5")
    assert status == 504, answer
    assert answer["code"] == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert seconds < 2.0
    with evalsi.Client(stack.grpc, timeout=0.5) as client, pytest.raises(InfraError, match="DEADLINE_EXCEEDED"):
        client.evaluate(_request(ref, {"seconds": 20}, ["y"]))
    assert _ordinary(stack) < 1.0


def test_requests_abandoned_at_their_deadline_free_every_request_slot(stack: Stack) -> None:
    # More abandoned calls than the worker has request slots (concurrency 8 x 4): had the slots stayed taken,
    # the ordinary call after them would wait the full 20 s.
    body = {"evaluators": [{"ref": "slow/sleep-async", "params": {"seconds": 20}}],
            "records": [{"id": "x", "output": {"text": "y"}}]}
    with concurrent.futures.ThreadPoolExecutor(40) as pool:
        statuses = [status for status, _, _ in pool.map(lambda _: _post(stack, body, timeout_header="0.5"),
                                                        range(40))]
    assert statuses == [504] * 40
    assert _ordinary(stack) < 1.0


def test_a_run_with_a_regex_bomb_and_a_hung_evaluator_completes(stack: Stack) -> None:
    spec = {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "bounded"},
        "spec": {
            "target": {"outputs": {}},
            "dataset": {"path": "bounded.jsonl"},
            "evaluators": [
                {"ref": "builtin/regex-match", "params": {"pattern": "(a+)+$"}},
                {"ref": "slow/sleep", "params": {"seconds": 8}},
            ],
        },
    }
    started = time.monotonic()
    with evalsi.Client(stack.grpc) as client:
        run = client.runs.create(spec).wait()
        results = list(client.runs.results(run.id))
    assert run.state == RUN_STATE_SUCCEEDED, run.message
    assert time.monotonic() - started < 30  # three abandoned 8 s calls, not three finished ones, and no retries
    regex = {r.record_id: (r.outcome, r.scores[0].passed) for r in results if r.evaluator == "regex-match"}
    assert regex == {"bomb": (OUTCOME_SCORED, False), "as": (OUTCOME_SCORED, True), "b": (OUTCOME_SCORED, False)}
    slow = sorted((r.record_id, r.outcome, r.error_kind) for r in results if r.evaluator == "sleep")
    assert slow == [(rid, OUTCOME_ERROR, ERROR_KIND_EVALUATOR) for rid in ("as", "b", "bomb")]
    assert all(f"within {CALL_TIMEOUT_S:g}s" in r.reason for r in results if r.evaluator == "sleep")
    summaries = {s.metric: (s.n, s.errors) for s in run.summaries}
    assert summaries["regex-match"] == (3, 0)
    assert summaries["sleep"] == (0, 3)
