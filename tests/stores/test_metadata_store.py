"""The MetadataStore contract, run against SQLite (a temp file) and Postgres (a real server)."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from evalsi.errors import BadInputError
from evalsi.stores import TASK_STATES, MetadataStore, SqlMetadataStore, TaskEnd, TaskRow, encode_page_token
from evalsi.v1alpha1.run_pb2 import Run, RunState
from evalsi.v1alpha1.score_pb2 import EvaluationResult, Outcome, Score

SCORED = Outcome.OUTCOME_SCORED
SKIPPED = Outcome.OUTCOME_SKIPPED
ERROR = Outcome.OUTCOME_ERROR


def make_run(
    run_id: str,
    *,
    project: str = "alpha",
    name: str = "",
    state: int = RunState.RUN_STATE_PENDING,
    labels: dict[str, str] | None = None,
    created_s: int = 1_700_000_000,
) -> Run:
    run = Run(id=run_id, project=project, name=name or f"run {run_id}", state=state, labels=labels or {})
    run.create_time.FromSeconds(created_s)
    run.spec.trials = 2
    return run


def result(record: str, evaluator: str = "exact-match", trial: int = 0, outcome: int = SCORED, value: float = 1.0):
    return EvaluationResult(
        record_id=record, evaluator=evaluator, evaluator_ref=f"builtin/{evaluator}@1.0.0", outcome=outcome,
        trial=trial, scores=[Score(number=value)],
    )


def token_fingerprint(token: str) -> str:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["q"]


def task(run_id: str, key: str, *, stage: int = 2, shard: int = 0, state: str = "pending") -> TaskRow:
    return TaskRow(run_id=run_id, key=key, stage=stage, shard=shard, trial=0, state=state)


def test_the_sql_store_satisfies_the_protocol(metadata_store: SqlMetadataStore) -> None:
    assert isinstance(metadata_store, MetadataStore)
    assert metadata_store.dialect in ("sqlite", "postgres")


# --- runs ---


async def test_a_run_round_trips_without_its_results(metadata_store: SqlMetadataStore) -> None:
    run = make_run("r1", labels={"team": "search"})
    run.results.append(result("a"))
    run.progress.total_tasks = 10
    await metadata_store.create_run(run)

    got = await metadata_store.get_run("alpha", "r1")

    expected = Run()
    expected.CopyFrom(run)
    expected.ClearField("results")
    assert got == expected


async def test_creating_an_existing_run_is_refused(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(make_run("r1"))
    with pytest.raises(BadInputError, match="'r1' already exists"):
        await metadata_store.create_run(make_run("r1", name="again"))
    with pytest.raises(BadInputError, match="'r1' already exists"):
        await metadata_store.create_run(make_run("r1", project="beta"))
    got = await metadata_store.get_run("alpha", "r1")
    assert got is not None and got.name == "run r1"


async def test_a_run_without_an_id_is_refused(metadata_store: SqlMetadataStore) -> None:
    with pytest.raises(BadInputError, match=r"run\.id is empty"):
        await metadata_store.create_run(Run(project="alpha"))


async def test_a_run_without_a_project_belongs_to_default(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(make_run("r1", project=""))
    got = await metadata_store.get_run("default", "r1")
    assert got is not None and got.project == "default"
    assert await metadata_store.get_run("", "r1") == got


async def test_runs_of_one_project_are_invisible_to_another(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(make_run("r1", project="alpha"))

    assert await metadata_store.get_run("beta", "r1") is None
    assert await metadata_store.list_runs("beta") == ([], "")
    with pytest.raises(BadInputError, match="no run 'r1' in project 'beta'"):
        await metadata_store.update_run(make_run("r1", project="beta", state=RunState.RUN_STATE_CANCELLED))
    got = await metadata_store.get_run("alpha", "r1")
    assert got is not None and got.state == RunState.RUN_STATE_PENDING


async def test_update_replaces_the_run_and_its_labels(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(make_run("r1", labels={"team": "search", "tier": "gold"}))
    run = await metadata_store.get_run("alpha", "r1")
    assert run is not None
    run.state = RunState.RUN_STATE_RUNNING
    run.progress.completed = 5
    del run.labels["tier"]
    run.labels["team"] = "ads"
    run.results.append(result("never-stored"))

    await metadata_store.update_run(run)

    got = await metadata_store.get_run("alpha", "r1")
    assert got is not None
    assert got.state == RunState.RUN_STATE_RUNNING and got.progress.completed == 5
    assert dict(got.labels) == {"team": "ads"} and not got.results
    assert (await metadata_store.list_runs("alpha", labels={"team": "search"}))[0] == []
    assert [r.id for r in (await metadata_store.list_runs("alpha", labels={"team": "ads"}))[0]] == ["r1"]
    assert (await metadata_store.list_runs("alpha", labels={"tier": "gold"}))[0] == []


async def test_updating_a_missing_run_is_refused(metadata_store: SqlMetadataStore) -> None:
    with pytest.raises(BadInputError, match="no run 'ghost'"):
        await metadata_store.update_run(make_run("ghost"))


async def test_list_runs_pages_newest_first(metadata_store: SqlMetadataStore) -> None:
    for i in range(7):
        await metadata_store.create_run(make_run(f"r{i}", created_s=1_700_000_000 + i))
    # Two runs created in the same second come newest id first.
    await metadata_store.create_run(make_run("r6b", created_s=1_700_000_006))

    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        runs, token = await metadata_store.list_runs("alpha", page_size=3, page_token=token)
        pages += 1
        seen += [r.id for r in runs]
        if not token:
            break
    assert seen == ["r6b", "r6", "r5", "r4", "r3", "r2", "r1", "r0"]
    assert pages == 3


async def test_a_page_that_ends_exactly_returns_no_token(metadata_store: SqlMetadataStore) -> None:
    for i in range(4):
        await metadata_store.create_run(make_run(f"r{i}", created_s=1_700_000_000 + i))
    first, token = await metadata_store.list_runs("alpha", page_size=2)
    second, last = await metadata_store.list_runs("alpha", page_size=2, page_token=token)
    assert [r.id for r in first + second] == ["r3", "r2", "r1", "r0"]
    assert token and last == ""


async def test_a_page_token_only_serves_its_own_query(metadata_store: SqlMetadataStore) -> None:
    for i in range(3):
        await metadata_store.create_run(make_run(f"r{i}", created_s=1_700_000_000 + i))
    _, token = await metadata_store.list_runs("alpha", page_size=1)
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_runs("alpha", page_size=1, page_token=token, state=RunState.RUN_STATE_RUNNING)
    with pytest.raises(BadInputError, match="not a token"):
        await metadata_store.list_runs("alpha", page_token="garbage!")
    forged = encode_page_token(["not a time", "r1"], token_fingerprint(token))
    with pytest.raises(BadInputError, match="not a token"):
        await metadata_store.list_runs("alpha", page_size=1, page_token=forged)
    with pytest.raises(BadInputError, match="page_size"):
        await metadata_store.list_runs("alpha", page_size=0)


async def test_list_runs_filters_by_state_name_and_labels(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(
        make_run("r1", name="Nightly QA", state=RunState.RUN_STATE_RUNNING, labels={"team": "a", "env": "ci"})
    )
    await metadata_store.create_run(make_run("r2", name="nightly rag", labels={"team": "a"}))
    await metadata_store.create_run(make_run("r3", name="weekly", state=RunState.RUN_STATE_RUNNING))
    await metadata_store.create_run(make_run("r4", project="beta", name="nightly", labels={"team": "a"}))

    async def ids(**filters: object) -> list[str]:
        runs, _ = await metadata_store.list_runs("alpha", **filters)  # type: ignore[arg-type]
        return sorted(r.id for r in runs)

    assert await ids() == ["r1", "r2", "r3"]
    assert await ids(state=RunState.RUN_STATE_RUNNING) == ["r1", "r3"]
    assert await ids(name_contains="NIGHTLY") == ["r1", "r2"]
    assert await ids(name_contains="rag") == ["r2"]
    assert await ids(labels={"team": "a"}) == ["r1", "r2"]
    assert await ids(labels={"team": "a", "env": "ci"}) == ["r1"]
    assert await ids(labels={"team": "a"}, state=RunState.RUN_STATE_RUNNING, name_contains="qa") == ["r1"]
    assert await ids(labels={"team": "b"}) == []


async def test_runs_in_states_spans_projects(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_run(make_run("r1", state=RunState.RUN_STATE_RUNNING, created_s=1))
    await metadata_store.create_run(make_run("r2", project="beta", state=RunState.RUN_STATE_PENDING, created_s=2))
    await metadata_store.create_run(make_run("r3", state=RunState.RUN_STATE_SUCCEEDED, created_s=3))

    active = await metadata_store.runs_in_states([RunState.RUN_STATE_PENDING, RunState.RUN_STATE_RUNNING])

    assert active == [("alpha", "r1"), ("beta", "r2")]
    assert await metadata_store.runs_in_states([]) == []


# --- results ---


async def test_upserting_the_same_key_replaces_rather_than_duplicates(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.upsert_results("alpha", "r1", [result("a", value=0.0, outcome=ERROR), result("b")])
    await metadata_store.upsert_results("alpha", "r1", [result("a", value=1.0), result("b", value=0.5)])

    rows, token = await metadata_store.list_results("alpha", "r1")

    assert token == ""
    assert [(r.record_id, r.outcome, r.scores[0].number) for r in rows] == [("a", SCORED, 1.0), ("b", SCORED, 0.5)]
    assert await metadata_store.count_results("alpha", "r1") == {SCORED: 2}


async def test_a_late_error_or_cancellation_never_replaces_a_scored_or_skipped_result(
    metadata_store: SqlMetadataStore,
) -> None:
    cancelled = Outcome.OUTCOME_CANCELLED
    await metadata_store.upsert_results("alpha", "r1", [result("a", value=0.25), result("b", outcome=SKIPPED),
                                                        result("c", outcome=ERROR)])
    # A dead-lettered copy of the task (infra errors) and a cancel racing the last result, across calls...
    await metadata_store.upsert_results("alpha", "r1", [result("a", outcome=ERROR), result("b", outcome=cancelled),
                                                        result("c", outcome=cancelled)])
    # ...and within one batch.
    await metadata_store.upsert_results("alpha", "r1", [result("d", value=0.75), result("d", outcome=ERROR)])

    rows, _ = await metadata_store.list_results("alpha", "r1")

    assert [(r.record_id, r.outcome) for r in rows] == [("a", SCORED), ("b", SKIPPED), ("c", cancelled),
                                                        ("d", SCORED)]
    assert [r.scores[0].number for r in rows if r.outcome == SCORED] == [0.25, 0.75]


async def test_the_key_is_record_trial_and_evaluator(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.upsert_results(
        "alpha", "r1",
        [result("a"), result("a", trial=1), result("a", evaluator="f1"), result("a", value=0.5)],
    )
    rows, _ = await metadata_store.list_results("alpha", "r1")
    # The last of two results with one key in a batch wins, as it would across batches.
    assert [(r.evaluator, r.record_id, r.trial, r.scores[0].number) for r in rows] == [
        ("exact-match", "a", 0, 0.5), ("exact-match", "a", 1, 1.0), ("f1", "a", 0, 1.0),
    ]


async def test_results_of_one_project_are_invisible_to_another(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.upsert_results("alpha", "r1", [result("a")])
    await metadata_store.upsert_results("beta", "r1", [result("a", value=0.0)])

    assert [r.scores[0].number for r in (await metadata_store.list_results("alpha", "r1"))[0]] == [1.0]
    assert [r.scores[0].number for r in (await metadata_store.list_results("beta", "r1"))[0]] == [0.0]
    assert await metadata_store.count_results("gamma", "r1") == {}


async def test_list_results_pages_in_a_stable_order(metadata_store: SqlMetadataStore) -> None:
    results = [
        result(f"rec-{i:03d}", evaluator=ev, trial=t)
        for i in range(40) for ev in ("b-eval", "a-eval", "C-eval") for t in (1, 0)
    ]
    await metadata_store.upsert_results("alpha", "r1", results)

    keys: list[tuple[str, str, int]] = []
    token = ""
    while True:
        page, token = await metadata_store.list_results("alpha", "r1", page_size=37, page_token=token)
        keys += [(r.evaluator, r.record_id, r.trial) for r in page]
        if not token:
            break

    assert len(keys) == len(results) == len(set(keys))
    assert keys == sorted(keys)  # byte order in both dialects: "C-eval" before "a-eval"
    assert keys[0] == ("C-eval", "rec-000", 0)

    only, token = await metadata_store.list_results("alpha", "r1", evaluator="a-eval", page_size=1000)
    assert token == "" and len(only) == 80 and {r.evaluator for r in only} == {"a-eval"}
    _, token = await metadata_store.list_results("alpha", "r1", evaluator="a-eval", page_size=50)
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_results("alpha", "r1", page_token=token)


async def test_iter_results_streams_in_batches(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.upsert_results("alpha", "r1", [result(f"rec-{i:02d}") for i in range(25)])

    batches = [batch async for batch in metadata_store.iter_results("alpha", "r1", batch_size=10)]

    assert [len(b) for b in batches] == [10, 10, 5]
    assert [r.record_id for b in batches for r in b] == [f"rec-{i:02d}" for i in range(25)]
    assert [b async for b in metadata_store.iter_results("alpha", "empty")] == []


async def test_a_large_batch_upserts_and_streams_back_whole(metadata_store: SqlMetadataStore) -> None:
    # More rows than one Postgres statement carries (20,000), to cross a chunk boundary.
    results = [result(f"rec-{i:06d}", outcome=SCORED if i % 10 else SKIPPED) for i in range(25_000)]
    await metadata_store.upsert_results("alpha", "big", results)
    await metadata_store.upsert_results("alpha", "big", results[:100])

    assert await metadata_store.count_results("alpha", "big") == {SCORED: 22_500, SKIPPED: 2_500}
    sizes = [len(b) async for b in metadata_store.iter_results("alpha", "big", batch_size=10_000)]
    assert sizes == [10_000, 10_000, 5_000]


async def test_delete_results_by_outcome(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.upsert_results(
        "alpha", "r1",
        [result("a"), result("b", outcome=ERROR), result("c", outcome=ERROR), result("d", outcome=SKIPPED)],
    )
    await metadata_store.upsert_results("alpha", "r2", [result("a", outcome=ERROR)])

    assert await metadata_store.delete_results("alpha", "r1", outcomes=[ERROR]) == 2
    assert await metadata_store.delete_results("alpha", "r1", outcomes=[]) == 0
    assert await metadata_store.delete_results("beta", "r1", outcomes=[SCORED, SKIPPED]) == 0

    assert await metadata_store.count_results("alpha", "r1") == {SCORED: 1, SKIPPED: 1}
    assert await metadata_store.count_results("alpha", "r2") == {ERROR: 1}


# --- tasks ---


async def test_add_tasks_inserts_only_new_ones(metadata_store: SqlMetadataStore) -> None:
    assert await metadata_store.add_tasks("alpha", [task("r1", "k1"), task("r1", "k2"), task("r1", "k3")]) == 3
    again = [task("r1", "k2", shard=9), task("r1", "k3"), task("r1", "k4"), task("r1", "k5"), task("r1", "k4")]
    assert await metadata_store.add_tasks("alpha", again) == 2
    assert await metadata_store.add_tasks("alpha", []) == 0

    rows = await metadata_store.list_tasks("r1")
    assert [t.key for t in rows] == ["k1", "k2", "k3", "k4", "k5"]
    assert rows[1] == task("r1", "k2")  # the first insert stands


async def test_set_task_state_is_compare_and_set(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.add_tasks("alpha", [task("r1", "k1")])

    changed = await asyncio.gather(
        *(metadata_store.set_task_state("r1", "k1", "done", output_ref=f"ref-{i}") for i in range(20))
    )

    assert sum(changed) == 1
    (row,) = await metadata_store.list_tasks("r1")
    assert row.state == "done" and row.output_ref == f"ref-{changed.index(True)}"


async def test_end_tasks_moves_pending_tasks_and_done_from_cancelled_in_one_call(
    metadata_store: SqlMetadataStore,
) -> None:
    await metadata_store.add_tasks("alpha", [task("r1", k) for k in ("k1", "k2", "k3", "k4")] + [task("r2", "k1")])
    await metadata_store.set_task_state("r1", "k3", "cancelled")
    await metadata_store.set_task_state("r1", "k4", "failed")

    moved = await metadata_store.end_tasks("r1", [
        TaskEnd("k1", "done", usage=(3, 4, 0.5)),
        TaskEnd("k1", "failed", error="a redelivered copy"),  # the first end of a key stands
        TaskEnd("k2", "failed", error="sandbox down"),
        TaskEnd("k3", "done"),  # finished after a cancel: still counts
        TaskEnd("k4", "done"),  # failed already: stays failed
        TaskEnd("missing", "done"),
    ])

    assert moved == {"k1", "k2", "k3"}
    rows = {row.key: (row.state, row.error) for row in await metadata_store.list_tasks("r1")}
    assert rows == {"k1": ("done", ""), "k2": ("failed", "sandbox down"), "k3": ("done", ""), "k4": ("failed", "")}
    assert await metadata_store.task_usage("r1") == (3, 4, 0.5)
    assert [row.state for row in await metadata_store.list_tasks("r2")] == ["pending"]  # another run's key
    assert await metadata_store.end_tasks("r1", [TaskEnd("k1", "done")]) == set()  # ended once
    assert await metadata_store.end_tasks("r1", []) == set()
    with pytest.raises(BadInputError, match="unknown task state 'finished'"):
        await metadata_store.end_tasks("r2", [TaskEnd("k1", "finished")])


async def test_set_task_state_follows_only_from(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.add_tasks("alpha", [task("r1", "k1")])

    assert not await metadata_store.set_task_state("r1", "k1", "pending", only_from=("failed",))
    assert await metadata_store.set_task_state("r1", "k1", "failed", error="sandbox down", attempts=1)
    assert await metadata_store.set_task_state("r1", "k1", "pending", only_from=("failed",), attempts=2)
    assert await metadata_store.set_task_state("r1", "k1", "cancelled", only_from=())
    assert not await metadata_store.set_task_state("r1", "missing", "done", only_from=())

    (row,) = await metadata_store.list_tasks("r1")
    assert (row.state, row.attempts, row.error) == ("cancelled", 2, "")
    with pytest.raises(BadInputError, match="unknown task state 'finished'"):
        await metadata_store.set_task_state("r1", "k1", "finished")
    with pytest.raises(BadInputError, match="unknown task state"):
        await metadata_store.add_tasks("alpha", [task("r1", "k9", state="running")])


async def test_list_tasks_filters_and_task_counts(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.add_tasks(
        "alpha",
        [task("r1", "g1", stage=1), task("r1", "e1", stage=2), task("r1", "e2", stage=2), task("r2", "e1")],
    )
    await metadata_store.set_task_state("r1", "e1", "done", output_ref="sha256/abc")
    await metadata_store.set_task_state("r1", "g1", "failed", error="boom")

    assert [t.key for t in await metadata_store.list_tasks("r1", states=["pending"])] == ["e2"]
    assert [t.key for t in await metadata_store.list_tasks("r1", stage=2)] == ["e1", "e2"]
    assert [t.key for t in await metadata_store.list_tasks("r1", states=["done", "failed"], stage=1)] == ["g1"]
    (done,) = await metadata_store.list_tasks("r1", states=["done"])
    assert done.output_ref == "sha256/abc"
    assert await metadata_store.task_counts("r1") == {"pending": 1, "done": 1, "failed": 1, "cancelled": 0}
    assert await metadata_store.task_counts("none") == dict.fromkeys(TASK_STATES, 0)


# --- leases ---


async def test_a_lease_is_refused_to_others_until_it_expires(metadata_store: SqlMetadataStore) -> None:
    assert await metadata_store.acquire_lease("run/r1", "sched-a", ttl_s=0.5)
    assert not await metadata_store.acquire_lease("run/r1", "sched-b", ttl_s=0.5)
    assert await metadata_store.lease_owner("run/r1") == "sched-a"
    assert await metadata_store.acquire_lease("run/r1", "sched-a", ttl_s=0.5)  # renewal

    await asyncio.sleep(0.7)

    assert await metadata_store.lease_owner("run/r1") is None
    assert await metadata_store.acquire_lease("run/r1", "sched-b", ttl_s=30)
    assert await metadata_store.lease_owner("run/r1") == "sched-b"
    assert not await metadata_store.acquire_lease("run/r1", "sched-a", ttl_s=30)


async def test_only_the_owner_releases_a_lease(metadata_store: SqlMetadataStore) -> None:
    assert await metadata_store.acquire_lease("run/r1", "sched-a", ttl_s=30)
    await metadata_store.release_lease("run/r1", "sched-b")
    assert await metadata_store.lease_owner("run/r1") == "sched-a"
    await metadata_store.release_lease("run/r1", "sched-a")
    assert await metadata_store.lease_owner("run/r1") is None
    assert await metadata_store.acquire_lease("run/r1", "sched-c", ttl_s=30)
    assert await metadata_store.lease_owner("other") is None


async def test_one_of_many_concurrent_claimants_gets_a_lease(metadata_store: SqlMetadataStore) -> None:
    got = await asyncio.gather(*(metadata_store.acquire_lease("run/r1", f"s{i}", ttl_s=30) for i in range(10)))
    assert sum(got) == 1
    assert await metadata_store.lease_owner("run/r1") == f"s{got.index(True)}"
    with pytest.raises(BadInputError, match="ttl_s"):
        await metadata_store.acquire_lease("run/r1", "s1", ttl_s=0)


async def test_a_conditional_update_never_undoes_a_state_change_made_meanwhile(
    metadata_store: SqlMetadataStore,
) -> None:
    running = RunState.RUN_STATE_RUNNING
    cancelled = RunState.RUN_STATE_CANCELLED
    await metadata_store.create_run(make_run("r1", state=running))
    stale = await metadata_store.get_run("alpha", "r1")
    assert stale is not None
    # A cancel lands between a driver's read and its progress write...
    cancel = make_run("r1", state=cancelled)
    assert await metadata_store.update_run(cancel, only_from=(running,)) is True
    stale.progress.completed = 3
    # ...so the write conditioned on the state it read is refused, and the cancel stands.
    assert await metadata_store.update_run(stale, only_from=(running,)) is False
    stored = await metadata_store.get_run("alpha", "r1")
    assert stored is not None and stored.state == cancelled and stored.progress.completed == 0
    # Unconditional writes still replace; a missing run is still an error, conditional or not.
    assert await metadata_store.update_run(stale) is True
    with pytest.raises(BadInputError, match="no run 'nope'"):
        await metadata_store.update_run(make_run("nope"), only_from=(running,))
