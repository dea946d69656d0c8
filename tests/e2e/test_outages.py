"""Outages of the stores and the bus mid-run, on real Postgres, NATS and SeaweedFS: nothing is lost, nothing is
counted twice, no run changes state for it, and dead letters never loop.

Each run generates its outputs through a local model server that answers slowly, so the outage lands while
tasks are in flight; 1,200 records make three shards (nine tasks). Every result row and summary is checked
against values computed from the input. The client speaks HTTP: these tests fork (pg_ctl, nats-server) while it
is open, and a child forked from a process with live gRPC channels can abort in gRPC's fork handlers.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import postgres_and_s3, wait_for

import evalsi
from evalsi.bus.codec import encode
from evalsi.bus.v1alpha1.bus_pb2 import TASK_STATUS_DONE, Task, TaskResult
from evalsi.service.supervisor import metrics_url
from evalsi.testing.services import PostgresServer, SeaweedS3
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, RUN_STATE_SUCCEEDED, Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, EvaluationResult, Score

RECORDS = 1_200
TASKS = 9  # 3 shards × (generate + 2 evaluators)
EVALUATORS = ("exact-match", "contains")


def reference(i: int) -> str:
    """Every fourth reference is wrong, every fourth a prefix: exact-match and contains disagree on some."""
    answer = str(i % 50)
    return {0: "nope", 1: answer[0]}.get(i % 4, answer)


def expected() -> dict[tuple[str, str], bool]:
    """(record id, evaluator) → passed, as the evaluators must find it for the model's answer ``i % 50``."""
    out: dict[tuple[str, str], bool] = {}
    for i in range(RECORDS):
        answer, ref = str(i % 50), reference(i)
        out[(f"q{i}", "exact-match")] = answer == ref
        out[(f"q{i}", "contains")] = ref.casefold() in answer.casefold()
    return out


def answer(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"].rsplit(" ", 1)[-1].rstrip("?"))


@pytest.fixture(scope="module")
def backends() -> Iterator[tuple[PostgresServer, SeaweedS3]]:
    with postgres_and_s3("evalsi-outages") as both:
        yield both


@pytest.fixture(scope="module")
def provider() -> Iterator[Any]:
    with ThreadedProvider(answer) as server:
        yield server


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, backends: tuple[PostgresServer, SeaweedS3], provider: Any
) -> Iterator[Stack]:
    """One stack for the module (starting and stopping one costs ~25 s): tests compare counts and logs with
    what they were before, and each run is checked on its own rows."""
    postgres, s3 = backends
    base = tmp_path_factory.mktemp("outages")
    running = Stack(
        base, metadata_url=postgres.dsn, objects_url=s3.url("objects"), datasets_dir=base / "datasets",
        harness_workers=0,
        judges={"fake": {"connector": "openai-compatible", "base_url": provider.base_url, "model": "fake"}},
    ).start()  # fmt: skip
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def postgres_up(backends: tuple[PostgresServer, SeaweedS3]) -> None:
    if backends[0].pid is None:  # an earlier test failed while Postgres was down
        backends[0].resume()


def datasets(stack: Stack) -> Path:
    return Path(stack.config.datasets_dir)


def write_spec(stack: Stack) -> Path:
    data = datasets(stack) / "capitals.jsonl"
    with data.open("w") as f:
        for i in range(RECORDS):
            f.write(json.dumps({"id": f"q{i}", "input": f"Name city {i % 50}?", "reference": reference(i)}) + "\n")
    spec = datasets(stack) / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: outages}\nspec:\n"
        "  target: {model: {connection: fake}}\n"
        "  dataset: {path: capitals.jsonl}\n  evaluators:\n"
        + "".join(f"    - {{ref: builtin/{name}, params: {{}}}}\n" for name in EVALUATORS)
    )
    return spec


def finished(client: evalsi.Client, run_id: str, timeout: float = 120.0) -> Run:
    run = client.runs.get(run_id)
    deadline = time.monotonic() + timeout
    while run.state == RUN_STATE_RUNNING or not run.end_time.seconds:
        assert time.monotonic() < deadline, f"run {run_id} still {run.state} after {timeout}s"
        time.sleep(0.5)
        run = client.runs.get(run_id)
    return run


def assert_exact(client: evalsi.Client, run: Run, stack: Stack) -> None:
    """Every evaluation stored once with the value the input implies; summaries and counts to match."""
    assert run.state == RUN_STATE_SUCCEEDED and run.message == "", run.message + stack.logs()
    results = list(client.runs.results(run.id))
    rows = {(r.record_id, r.evaluator): r for r in results}
    assert len(results) == len(rows) == RECORDS * len(EVALUATORS)
    bad = collections.Counter((r.outcome, r.reason[:200]) for r in results if r.outcome != OUTCOME_SCORED)
    assert not bad and all(r.trial == 0 for r in results), bad
    want = expected()
    assert {key: r.scores[0].passed for key, r in rows.items()} == want
    for name in EVALUATORS:
        (summary,) = [s for s in run.summaries if s.metric == name]
        passed = sum(v for (_, ev), v in want.items() if ev == name)
        assert (summary.n, summary.errors, summary.skipped) == (RECORDS, 0, 0)
        assert summary.mean == pytest.approx(passed / RECORDS, abs=1e-12)
    progress = run.progress
    assert (progress.scored, progress.errors, progress.cancelled) == (RECORDS * len(EVALUATORS), 0, 0)
    assert progress.completed == progress.total_tasks == TASKS


async def _dead_letters(nats_url: str, options: dict[str, Any]) -> int:
    import nats

    nc = await nats.connect(nats_url, **options)
    try:
        return int((await nc.jetstream().stream_info("DEADLETTER")).state.messages)
    finally:
        await nc.close()


def dead_letters(stack: Stack) -> int:
    assert stack.supervisor.nats is not None
    return asyncio.run(_dead_letters(stack.supervisor.nats.url, stack.bus_options()))


def scheduler_log(stack: Stack) -> str:
    return stack.supervisor.child("scheduler-0").log_path.read_text(errors="replace")


@pytest.mark.parametrize("outage_s", [5, 30, 120])
def test_postgres_down_mid_run_loses_nothing(
    outage_s: int, stack: Stack, provider: Any, backends: tuple[PostgresServer, SeaweedS3]
) -> None:
    postgres, _ = backends
    asked, logged, dead = len(provider.requests), len(scheduler_log(stack)), dead_letters(stack)
    provider.enqueue(*[("delay", 0.2)] * RECORDS)
    spec = write_spec(stack)
    with evalsi.Client(stack.http) as client:
        handle = client.runs.create(spec)
        wait_for(lambda: len(provider.requests) - asked > 150)
        postgres.halt()
        try:
            time.sleep(outage_s)
        finally:
            postgres.resume()
        run = finished(client, handle.id)
        assert_exact(client, run, stack)
    log = scheduler_log(stack)[logged:]
    # The outage was felt, and ridden out: a consumer paused on it or, when no message arrived in a short outage
    # (a loaded machine), the scheduler's store calls met the refused connection and retried.
    assert "paused, holding messages" in log or "Connection refused" in log
    assert "dead-lettered" not in log and dead_letters(stack) == dead
    assert len(provider.requests) - asked == RECORDS  # no generation was redone


def test_nats_killed_and_restarted_twice_mid_run(stack: Stack, provider: Any) -> None:
    asked, logged = len(provider.requests), len(scheduler_log(stack))
    provider.enqueue(*[("delay", 0.2)] * RECORDS)
    spec = write_spec(stack)
    nats_server = stack.supervisor.nats
    assert nats_server is not None
    with evalsi.Client(stack.http) as client:
        handle = client.runs.create(spec)
        wait_for(lambda: len(provider.requests) - asked > 150)
        for _ in range(2):
            nats_server.kill()
            time.sleep(2)
            nats_server.restart()
            time.sleep(1)
        run = finished(client, handle.id)
        assert_exact(client, run, stack)
    assert "scheduler error" not in scheduler_log(stack)[logged:]


def dead_letter_counts(stack: Stack) -> dict[tuple[str, str], float]:
    """The scheduler's evalsi_scheduler_dead_letters_total by (type, outcome)."""
    with urllib.request.urlopen(metrics_url(stack.supervisor.child("scheduler-0")), timeout=5) as response:
        text = response.read().decode()
    pattern = r'^evalsi_scheduler_dead_letters_total\{outcome="([^"]*)",type="([^"]*)"\} (\S+)$'
    return {(kind, outcome): float(value) for outcome, kind, value in re.findall(pattern, text, re.M)}


async def _publish_dead(nats_url: str, messages: list[tuple[str, bytes, dict[str, str]]],
                        options: dict[str, Any]) -> None:
    import nats

    nc = await nats.connect(nats_url, **options)
    try:
        js = nc.jetstream()
        for subject, data, headers in messages:
            await js.publish(subject, data, headers=headers or None)
    finally:
        await nc.close()


def test_poison_on_every_dead_letter_subject_is_kept_once_and_a_dead_result_is_folded_back(
    stack: Stack, backends: tuple[PostgresServer, SeaweedS3]
) -> None:
    postgres, _ = backends
    logged, counted = len(scheduler_log(stack)), dead_letter_counts(stack)
    (datasets(stack) / "qa.jsonl").write_text(
        "".join(json.dumps({"id": f"r{i}", "input": "q", "output": str(i), "reference": "1"}) + "\n" for i in range(4))
    )
    spec = datasets(stack) / "qa.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: dead}\nspec:\n"
        "  dataset: {path: qa.jsonl}\n  evaluators: [{ref: builtin/exact-match}]\n"
    )
    assert stack.supervisor.nats is not None
    url = stack.supervisor.nats.url
    with evalsi.Client(stack.http) as client:
        run = finished(client, client.runs.create(spec).id)
        assert run.state == RUN_STATE_SUCCEEDED and run.progress.scored == 4
        # A result that was dead-lettered (by an older version, or after its last delivery) while the store was
        # down: it is held until the store answers, then stored like one that arrived on time.
        late = TaskResult(key="late", run_id=run.id, project=run.project, status=TASK_STATUS_DONE)
        late.results.append(EvaluationResult(
            record_id="r9", evaluator="exact-match", outcome=OUTCOME_SCORED, scores=[Score(passed=True)]
        ))  # fmt: skip
        result_data, result_headers = encode(late, key="late-result")
        task_data, task_headers = encode(Task(key="t", run_id="run-gone", project="default"), key="dead-task")
        poison = [
            ("deadletter.results", b"\xff\xff\xff\xff", {"Evalsi-Type": "evalsi.bus.v1alpha1.TaskResult"}),
            ("deadletter.cpu", b"\xff\xff\xff\xff", {"Evalsi-Type": "evalsi.bus.v1alpha1.Task"}),
            ("deadletter.test", b"hello", {}),
            ("deadletter.deadletter", b"{}", {"Evalsi-Type": "evalsi.NoSuchMessage"}),
        ]
        before = dead_letters(stack)
        postgres.halt()
        try:
            asyncio.run(_publish_dead(url, [("deadletter.results", result_data, result_headers),
                                             ("deadletter.cpu", task_data, task_headers), *poison],
                                      stack.bus_options()))  # fmt: skip
            time.sleep(3)  # long enough for a loop to show: the old reader made ~1,000 dead letters a second
            assert dead_letters(stack) == before + 2 + len(poison)
        finally:
            postgres.resume()
        wait_for(lambda: len(list(client.runs.results(run.id))) == 5, timeout=30)
        (folded,) = [r for r in client.runs.results(run.id) if r.record_id == "r9"]
        assert folded.outcome == OUTCOME_SCORED and folded.scores[0].passed
        time.sleep(2)
    assert dead_letters(stack) == before + 2 + len(poison)  # nothing re-published, nothing looping
    # Each poison message counted and logged once; the dead task of a run that is gone is dropped, not kept.
    now = dead_letter_counts(stack)
    assert {key: now[key] - counted.get(key, 0.0) for key in now if now[key] != counted.get(key, 0.0)} == {
        ("undecodable", "kept"): 4.0, ("TaskResult", "handled"): 1.0, ("Task", "handled"): 1.0,
    }, scheduler_log(stack)[-3000:]
    assert scheduler_log(stack)[logged:].count("kept, not handled") == 4


def test_the_store_says_when_postgres_is_back_and_then_every_pooled_connection_works(
    backends: tuple[PostgresServer, SeaweedS3],
) -> None:
    from evalsi.stores import open_metadata_store

    postgres, _ = backends

    async def check() -> list[bool]:
        store = await open_metadata_store(postgres.dsn)
        try:
            # Fill the pool, so every pooled connection is one the restart breaks.
            await asyncio.gather(*(store.runs_in_states((RUN_STATE_RUNNING,)) for _ in range(10)))
            seen = [await store.ping()]
            postgres.halt()
            try:
                seen.append(await store.ping())
            finally:
                postgres.resume()
            seen.append(await store.ping())  # the first answer after the restart
            await asyncio.gather(*(store.runs_in_states((RUN_STATE_RUNNING,)) for _ in range(10)))
            return seen
        finally:
            await store.close()

    assert asyncio.run(check()) == [True, False, True]
