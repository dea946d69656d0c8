"""Faults on the spine: killed workers and schedulers, cancel and resume, a provider answering 429 and 500.

Every test drives a model target (a local OpenAI-compatible server that answers slowly) so the run is still
going when the fault happens, then checks that every evaluation is scored exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import wait_for

import evalsi
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import RUN_STATE_CANCELLED, RUN_STATE_PENDING, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED

RECORDS = 600
EVALUATORS = ("exact-match", "contains")


def answer(body: dict[str, Any]) -> str:
    """The capital the question asks for, so exact-match scores are deterministic."""
    question = body["messages"][-1]["content"]
    return question.rsplit(" ", 1)[-1].rstrip("?")


@pytest.fixture
def provider() -> Iterator[Any]:
    with ThreadedProvider(answer) as server:
        yield server


def connection(base_url: str, model: str = "fake", **settings: Any) -> dict[str, Any]:
    """The judges: section of the stack: one connection to the fake provider (requests name it, never its URL)."""
    return {model: {"connector": "openai-compatible", "base_url": base_url, "model": model, **settings}}


def write_spec(tmp_path: Path, *, records: int = RECORDS) -> Path:
    data = tmp_path / "datasets" / "capitals.jsonl"
    data.parent.mkdir(exist_ok=True)
    with data.open("w") as f:
        for i in range(records):
            f.write(json.dumps({"id": f"q{i}", "input": f"Name city {i % 50}?", "reference": str(i % 50)}) + "\n")
    spec = tmp_path / "datasets" / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: faults}\nspec:\n"
        "  target: {model: {connection: fake}}\n"
        "  dataset: {path: capitals.jsonl}\n  evaluators:\n"
        + "".join(f"    - {{ref: builtin/{name}, params: {{}}}}\n" for name in EVALUATORS)
    )
    return spec


def slow_down(server: Any, seconds: float, calls: int) -> None:
    server.enqueue(*[("delay", seconds)] * calls)


def assert_scored_exactly_once(client: evalsi.Client, run_id: str, project: str = "default") -> None:
    results = list(client.runs.results(run_id, project=project))
    keys = [(r.record_id, r.trial, r.evaluator) for r in results]
    assert len(keys) == len(set(keys)) == RECORDS * len(EVALUATORS)
    assert all(r.outcome == OUTCOME_SCORED for r in results), {r.reason for r in results if r.outcome != OUTCOME_SCORED}


def test_a_worker_killed_mid_run_loses_nothing_and_counts_nothing_twice(tmp_path: Path, provider: Any) -> None:
    os.environ["EVALSI_WORKER_ACK_WAIT"] = "2"
    stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", restart=True,
                  judges=connection(provider.base_url)).start()
    try:
        slow_down(provider, 0.01, RECORDS)
        spec = write_spec(tmp_path)
        with evalsi.Client(stack.grpc) as client:
            handle = client.runs.create(spec)
            wait_for(lambda: len(provider.requests) > 100)
            stack.supervisor.child("worker-judge-0").process.send_signal(signal.SIGKILL)
            run = handle.wait()
            assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
            assert run.progress.scored == RECORDS * len(EVALUATORS)
            assert_scored_exactly_once(client, run.id)
        assert len(provider.requests) > RECORDS  # the killed worker's generation was redone elsewhere
    finally:
        os.environ.pop("EVALSI_WORKER_ACK_WAIT", None)
        stack.stop()


def _runs_driven(log_path: Path) -> set[str]:
    """The runs a scheduler's JSON log says it drove (ids are log fields, not part of the message)."""
    driven = set()
    for line in log_path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and str(entry.get("event", "")).startswith("driving run"):
                driven.add(str(entry.get("run_id", "")))
    return driven


def test_a_killed_scheduler_run_is_adopted_by_another(tmp_path: Path, provider: Any) -> None:
    stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", schedulers=2, restart=False, lease_ttl_s=2.0,
                  judges=connection(provider.base_url)).start()
    try:
        slow_down(provider, 0.01, RECORDS)
        spec = write_spec(tmp_path)
        from evalsi.stores import open_metadata_store

        async def owner(run_id: str) -> str | None:
            store = await open_metadata_store(stack.config.metadata_url)
            try:
                return await store.lease_owner(f"run:{run_id}")
            finally:
                await store.close()

        with evalsi.Client(stack.grpc) as client:
            handle = client.runs.create(spec)
            wait_for(lambda: asyncio.run(owner(handle.id)) is not None)
            first = asyncio.run(owner(handle.id))
            victim = next(
                c
                for c in stack.supervisor.children
                if c.name.startswith("scheduler") and first.endswith(f"-{c.process.pid}")
            )
            victim.process.send_signal(signal.SIGKILL)
            run = handle.wait()
            assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
            assert_scored_exactly_once(client, run.id)
        (survivor,) = [c for c in stack.supervisor.children if c.name.startswith("scheduler") and c is not victim]
        assert handle.id in _runs_driven(survivor.log_path)
    finally:
        stack.stop()


def test_cancel_then_resume_finishes_without_redoing_completed_work(tmp_path: Path, provider: Any) -> None:
    stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", judges=connection(provider.base_url)).start()
    try:
        slow_down(provider, 0.02, RECORDS)
        spec = write_spec(tmp_path)
        with evalsi.Client(stack.grpc) as client:
            handle = client.runs.create(spec)
            wait_for(lambda: client.runs.get(handle.id).progress.completed >= 1)  # a shard is generated
            client.runs.cancel(handle.id)
            cancelled = handle.wait()
            assert cancelled.state == RUN_STATE_CANCELLED
            # Cancelled tasks are not completed ones: the run shows how far it got.
            assert 1 <= cancelled.progress.completed < cancelled.progress.total_tasks
            assert len(provider.requests) < RECORDS + 50  # work stopped at the cancel, bar calls in flight
            resumed = client.runs.resume(handle.id)
            assert (resumed.state, resumed.message) == (RUN_STATE_PENDING, "resume requested")
            wait_for(lambda: client.runs.get(handle.id).state not in (RUN_STATE_CANCELLED,), timeout=30)
            run = handle.wait()
            assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
            assert run.progress.completed == run.progress.total_tasks == 2 * (1 + len(EVALUATORS))
            assert_scored_exactly_once(client, run.id)
        # The shard generated before the cancel is not asked again (shards are 500 and 100 records).
        assert len(provider.requests) < 2 * RECORDS
    finally:
        stack.stop()


def test_a_provider_answering_429_and_500_is_retried_never_scored_as_a_failure(tmp_path: Path, provider: Any) -> None:
    stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", judges=connection(provider.base_url)).start()
    try:
        provider.enqueue(("status", 429, {"Retry-After": "1"}), ("status", 500), ("status", 500))
        spec = write_spec(tmp_path)
        with evalsi.Client(stack.grpc) as client:
            run = client.runs.create(spec).wait()
            assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
            assert run.progress.errors == 0
            assert_scored_exactly_once(client, run.id)
            exact = next(s for s in run.summaries if s.metric == "exact-match")
            assert exact.n == RECORDS and exact.mean == 1.0
    finally:
        stack.stop()


def test_a_run_over_its_token_budget_stops_and_says_so(tmp_path: Path, provider: Any) -> None:
    stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", judges=connection(provider.base_url)).start()
    try:
        slow_down(provider, 0.01, RECORDS)
        spec = write_spec(tmp_path)
        spec.write_text(spec.read_text() + "  budget: {tokens: 300}\n")
        evalsi_bin = Path(sys.executable).parent / "evalsi"
        done = subprocess.run(
            [str(evalsi_bin), "run", "-f", str(spec), "--server", stack.grpc],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 3, done.stdout + done.stderr + stack.logs()
        assert "budget_exceeded" in done.stdout and "tokens" in done.stdout
        with evalsi.Client(stack.grpc) as client:
            (run,) = list(client.runs.list())
            # Usage is counted per finished task, so the stop comes after the task that crossed the budget.
            assert run.progress.usage.total_tokens >= 300
    finally:
        stack.stop()


def test_judges_on_the_server_share_their_cache_across_runs(tmp_path: Path) -> None:
    with ThreadedProvider(lambda body: '{"reasoning": "fine", "score": 5}') as judge:
        stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets", judges=connection(judge.base_url, "judge")).start()
        try:
            data = tmp_path / "datasets" / "qa.jsonl"
            data.write_text(
                "".join(
                    json.dumps({"id": f"q{i}", "input": f"q{i}?", "output": "a", "reference": "a"}) + "\n"
                    for i in range(20)
                )
            )
            spec = tmp_path / "datasets" / "judged.yaml"
            spec.write_text(
                "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: judged}\nspec:\n"
                "  dataset: {path: qa.jsonl}\n  evaluators: [{ref: builtin/llm-judge}]\n"
                "  judges: {default: {connection: judge}}\n"
            )
            with evalsi.Client(stack.grpc) as client:
                first = client.runs.create(spec).wait()
                assert first.state == RUN_STATE_SUCCEEDED, first.message + stack.logs()
                assert len(judge.requests) == 20
                second = client.runs.create(spec).wait()
            assert len(judge.requests) == 20  # every answer came from the shared cache
            (summary,) = second.summaries
            assert summary.metric == "llm-judge" and summary.n == 20 and summary.mean == 1.0
        finally:
            stack.stop()


def test_a_judge_failing_past_its_retries_is_retried_as_a_task_not_scored(tmp_path: Path) -> None:
    with ThreadedProvider(lambda body: '{"reasoning": "fine", "score": 5}') as judge:
        stack = Stack(tmp_path, datasets_dir=tmp_path / "datasets",
                      judges=connection(judge.base_url, "judge", max_retries=1)).start()
        try:
            judge.enqueue(("status", 500), ("status", 500))  # both attempts of the first call fail
            (tmp_path / "datasets" / "one.jsonl").write_text('{"id": "q", "input": "q?", "output": "a"}\n')
            spec = tmp_path / "datasets" / "judged.yaml"
            spec.write_text(
                "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: judged}\nspec:\n"
                "  dataset: {path: one.jsonl}\n  evaluators: [{ref: builtin/llm-judge}]\n"
                "  judges: {default: {connection: judge}}\n"
            )
            with evalsi.Client(stack.grpc) as client:
                run = client.runs.create(spec).wait()
            assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
            (summary,) = run.summaries
            assert summary.n == 1 and summary.errors == 0 and summary.mean == 1.0
            assert len(judge.requests) == 3  # two failed attempts, then the retried task's answer
        finally:
            stack.stop()
