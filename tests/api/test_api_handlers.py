"""The RPC handlers over in-memory dependencies: validation, run lifecycle, paging, isolation, streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from google.protobuf import json_format

from evalsi.api import DATASET_LABEL, CallContext, NotFoundError, load_run_dataset
from evalsi.bus.v1alpha1.bus_pb2 import (
    CONTROL_ACTION_CANCEL,
    CONTROL_ACTION_CREATED,
    CONTROL_ACTION_RESUME,
    TaskRecords,
)
from evalsi.datasets.shards import read_manifest
from evalsi.errors import BadInputError, InfraError
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_PENDING,
    RUN_STATE_RUNNING,
    RUN_STATE_SUCCEEDED,
    EvalRun,
    Run,
)
from evalsi.v1alpha1.run_service_pb2 import (
    RUN_EVENT_TYPE_PROGRESS,
    RUN_EVENT_TYPE_STATE,
    RUN_EVENT_TYPE_SUMMARY,
    CancelRunRequest,
    CompareRunsRequest,
    CreateRunRequest,
    GetRunRequest,
    ListRunResultsRequest,
    ListRunsRequest,
    ResumeRunRequest,
    RunEvent,
    WatchRunRequest,
)
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_SCORED,
    VALUE_KIND_BOOLEAN,
    EvaluationResult,
    MetricSummary,
    Score,
)

if TYPE_CHECKING:
    from api_doubles import Api


def ctx(project: str = "", method: str = "test") -> CallContext:
    return CallContext(method=method, request_id="req-1", project=project or "default", header_project=project)


def eval_run(name: str = "nightly", *, evaluators: tuple[str, ...] = ("exact-match",), **metadata: str) -> EvalRun:
    return json_format.ParseDict(
        {
            "apiVersion": "evals.si/v1alpha1",
            "kind": "EvalRun",
            "metadata": {"name": name, "labels": {"team": "search"}, **metadata},
            "spec": {
                "dataset": {"path": "qa.jsonl"},
                "evaluators": [{"ref": ref} for ref in evaluators],
                "trials": 2,
            },
        },
        EvalRun(),
    )


def evaluate_request(records: int = 1, evaluators: tuple[str, ...] = ("exact-match",)) -> EvaluateRequest:
    return json_format.ParseDict(
        {
            "records": [{"id": f"r{i}", "output": {"text": "a"}, "reference": {"text": "a"}} for i in range(records)],
            "evaluators": [{"ref": ref} for ref in evaluators],
        },
        EvaluateRequest(),
    )


async def stored_run(api: Api, state: int, *, project: str = "default", run_id: str = "run-1", **fields) -> Run:
    run = Run(id=run_id, project=project, name=run_id, state=state, **fields)
    await api.store.create_run(run)
    return run


# --- Evaluate ---


async def test_evaluate_sets_project_and_request_id_and_calls_the_worker(api: Api) -> None:
    response = await api.evaluation.evaluate(evaluate_request(2), ctx("team-a"))
    assert len(response.results) == 2
    assert response.request_id == "req-1"
    sent = api.bus.evaluated[0]
    assert sent.project == "team-a" and sent.request_id == "req-1"


@pytest.mark.parametrize(
    ("request_json", "message"),
    [
        ({"evaluators": [{"ref": "exact-match"}]}, "records: at least one record is required"),
        ({"records": [{"id": "a"}]}, "evaluators: at least one evaluator is required"),
        ({"records": [{"id": "a"}], "evaluators": [{"ref": ""}]}, "evaluators[0].ref: an evaluator reference"),
        ({"records": [{"id": "a"}], "evaluators": [{"ref": "exact-mach"}]}, "evaluators[0].ref: unknown evaluator"),
        (
            {"records": [{"id": "a"}], "evaluators": [{"ref": "exact-match", "params": {"bogus": 1}}]},
            "evaluators[0].params: evaluator builtin/exact-match: unknown param(s) bogus",
        ),
        (
            {"records": [{"id": "a"}], "evaluators": [{"ref": "exact-match"}, {"ref": "builtin/exact-match"}]},
            "evaluators[1].alias: 'exact-match' is also evaluators[0]'s",
        ),
        (
            {
                "records": [{"id": "a"}],
                "evaluators": [{"ref": "llm-judge", "judge": "strict"}],
                "judges": {"default": {"model": "m"}},
            },
            "evaluators[0].judge: no judge named 'strict'; judges given: default",
        ),
        ({"records": [{"id": str(i)} for i in range(6)], "evaluators": [{"ref": "exact-match"}]}, "records: 6 records"),
    ],
)
async def test_evaluate_refuses_bad_requests_naming_the_field(api: Api, request_json: dict, message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        await api.evaluation.evaluate(json_format.ParseDict(request_json, EvaluateRequest()), ctx())
    assert str(caught.value).startswith(message)
    assert api.bus.evaluated == []


async def test_evaluate_refuses_a_project_field_that_contradicts_the_header(api: Api) -> None:
    request = evaluate_request()
    request.project = "other"
    with pytest.raises(BadInputError, match="project: 'other' differs from the x-evalsi-project header 'mine'"):
        await api.evaluation.evaluate_stream(_aiter([request]), ctx("mine")).__anext__()


async def test_evaluate_stream_answers_in_request_order_even_when_later_ones_finish_first(api: Api) -> None:
    requests = []
    for index in range(6):
        request = evaluate_request(1)
        request.request_id = f"q{index}"
        api.bus.evaluate_delay[request.request_id] = 0.05 if index % 2 == 0 else 0.0
        requests.append(request)
    responses = [r async for r in api.evaluation.evaluate_stream(_aiter(requests), ctx())]
    assert [r.request_id for r in responses] == [f"q{i}" for i in range(6)]


async def test_evaluate_stream_ends_with_the_error_of_a_bad_request_after_earlier_answers(api: Api) -> None:
    bad = EvaluateRequest()
    stream = api.evaluation.evaluate_stream(_aiter([evaluate_request(), bad, evaluate_request()]), ctx())
    first = await stream.__anext__()
    assert len(first.results) == 1 and first.request_id == "req-1-0"
    with pytest.raises(BadInputError, match="records: at least one record"):
        await stream.__anext__()


async def test_evaluate_reports_worker_failures_as_infrastructure(api: Api) -> None:
    async def broken(request: EvaluateRequest, timeout_s: float | None):
        raise ConnectionError("no responders")

    api.evaluation._evaluate = broken
    with pytest.raises(InfraError, match="evaluate: ConnectionError: no responders"):
        await api.evaluation.evaluate(evaluate_request(), ctx())


# --- CreateRun ---


async def test_create_run_stores_the_run_and_its_records_and_tells_the_schedulers(api: Api) -> None:
    run = await api.runs.create_run(CreateRunRequest(run=eval_run()), ctx("team-a"))
    assert run.id.startswith("run-") and len(run.id) == 20
    assert (run.project, run.name, run.state) == ("team-a", "nightly", RUN_STATE_PENDING)
    assert run.labels["team"] == "search"
    assert run.HasField("create_time")
    assert run.manifest.dataset == "qa.jsonl"
    assert len(run.manifest.dataset_version) == 64
    # Tasks as the scheduler plans them: one shard, one evaluator (given outputs are evaluated once, not per trial).
    assert run.progress.total_tasks == 1
    stored = await api.store.get_run("team-a", run.id)
    assert stored == run
    # The records are stored once: one shard and the manifest naming it, with the dataset's version.
    manifest = await read_manifest(api.objects, run.labels[DATASET_LABEL])
    assert (manifest.records, manifest.version, len(manifest.shards)) == (3, run.manifest.dataset_version, 1)
    assert set(api.objects.blobs) == {run.labels[DATASET_LABEL], manifest.shards[0].key}
    records = TaskRecords.FromString(await api.objects.get(manifest.shards[0].key))
    assert [r.id for r in records.records] == ["q1", "q2", "q3"]
    assert records.records[0].provenance.dataset == "qa.jsonl"
    assert [(c.run_id, c.project, c.action) for c in api.bus.controls] == [
        (run.id, "team-a", CONTROL_ACTION_CREATED)
    ]


async def test_create_run_dry_run_describes_the_plan_and_stores_nothing(api: Api) -> None:
    run = await api.runs.create_run(CreateRunRequest(run=eval_run(), dry_run=True), ctx())
    assert run.state == RUN_STATE_PENDING and not run.id
    assert run.message.startswith("dry run: ") and "nothing was called or stored" in run.message
    assert "dataset      qa.jsonl: 3 samples in 1 shard(s)" in run.message
    assert "tasks        1 (evaluate 1; by pool: cpu 1)" in run.message and "evaluations  3\n" in run.message
    assert run.progress.total_tasks == 1  # tasks, not the evaluations they carry
    assert api.store.runs == {} and api.objects.blobs == {} and api.bus.controls == []


async def test_create_run_project_comes_from_request_then_metadata(api: Api) -> None:
    from_metadata = await api.runs.create_run(CreateRunRequest(run=eval_run(project="meta")), ctx())
    assert from_metadata.project == "meta"
    from_request = await api.runs.create_run(
        CreateRunRequest(run=eval_run(project="meta"), project="explicit"), ctx()
    )
    assert from_request.project == "explicit"
    from_header = await api.runs.create_run(CreateRunRequest(run=eval_run(project="meta")), ctx("header"))
    assert from_header.project == "header"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.ClearField("run"), "run: the EvalRun document"),
        (lambda r: r.run.spec.ClearField("evaluators"), "spec.evaluators: at least one evaluator"),
        (lambda r: r.run.spec.evaluators[0].__setattr__("ref", "nope"), "spec.evaluators[0].ref: unknown evaluator"),
        (lambda r: r.run.spec.dataset.__setattr__("path", "missing.jsonl"), "spec.dataset.path: missing.jsonl"),
        (lambda r: r.run.spec.dataset.__setattr__("path", "../secret.jsonl"), "spec.dataset.path: '../secret.jsonl'"),
        (lambda r: r.run.spec.dataset.__setattr__("path", "/etc/passwd"), "spec.dataset.path: '/etc/passwd'"),
        (lambda r: r.run.spec.dataset.__setattr__("hf", "hf://a/b"), "spec.dataset.hf: this server reads"),
        (lambda r: r.run.metadata.labels.__setitem__(DATASET_LABEL, "x"), "run.metadata.labels: 'evals.si/dat"),
        (lambda r: r.run.metadata.labels.__setitem__("evals.si/attempt", "9"), "run.metadata.labels: 'evals.si/att"),
        (lambda r: r.__setattr__("project", "bad project"), "project: 'bad project' is not a valid project"),
    ],
)
async def test_create_run_refuses_bad_specs_before_writing_anything(api: Api, mutate, message: str) -> None:
    request = CreateRunRequest(run=eval_run())
    mutate(request)
    with pytest.raises(BadInputError) as caught:
        await api.runs.create_run(request, ctx())
    assert str(caught.value).startswith(message)
    assert api.store.runs == {} and api.objects.blobs == {} and api.bus.controls == []


async def test_create_run_marks_the_run_failed_when_the_schedulers_cannot_be_told(api: Api) -> None:
    async def unreachable(message):
        raise ConnectionError("nats down")

    api.runs._control = unreachable
    with pytest.raises(InfraError, match=r"run run-\w+ was stored but not started"):
        await api.runs.create_run(CreateRunRequest(run=eval_run()), ctx())
    [run] = api.store.runs.values()
    assert run.state == RUN_STATE_FAILED and "ResumeRun" in run.message


def test_dataset_symlink_out_of_the_directory_is_refused(datasets_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"id": "x", "input": "secret"}\n')
    (datasets_dir / "link.jsonl").symlink_to(outside)
    run = eval_run()
    run.spec.dataset.path = "link.jsonl"
    with pytest.raises(BadInputError, match="outside the allowed datasets directory"):
        load_run_dataset(run, datasets_dir=datasets_dir)


# --- GetRun, ListRuns, project isolation ---


async def test_get_run_not_found_names_the_id_and_project(api: Api) -> None:
    with pytest.raises(NotFoundError, match="id: run 'run-nope' not found in project 'default'"):
        await api.runs.get_run(GetRunRequest(id="run-nope"), ctx())
    with pytest.raises(BadInputError, match="id: a run id is required"):
        await api.runs.get_run(GetRunRequest(), ctx())


async def test_runs_are_isolated_by_project(api: Api) -> None:
    run = await api.runs.create_run(CreateRunRequest(run=eval_run()), ctx("team-a"))
    assert (await api.runs.get_run(GetRunRequest(id=run.id), ctx("team-a"))).id == run.id
    with pytest.raises(NotFoundError):
        await api.runs.get_run(GetRunRequest(id=run.id), ctx("team-b"))
    with pytest.raises(NotFoundError):
        await api.runs.cancel_run(CancelRunRequest(id=run.id), ctx("team-b"))
    listed = await api.runs.list_runs(ListRunsRequest(), ctx("team-b"))
    assert list(listed.runs) == []


async def test_list_runs_filters_and_pages(api: Api) -> None:
    for index in range(7):
        state = RUN_STATE_RUNNING if index % 2 else RUN_STATE_SUCCEEDED
        await stored_run(api, state, run_id=f"run-{index}", labels={"team": "a" if index < 4 else "b"})
    first = await api.runs.list_runs(ListRunsRequest(page_size=3), ctx())
    assert [r.id for r in first.runs] == ["run-0", "run-1", "run-2"] and first.next_page_token
    second = await api.runs.list_runs(ListRunsRequest(page_size=3, page_token=first.next_page_token), ctx())
    assert [r.id for r in second.runs] == ["run-3", "run-4", "run-5"]
    running = await api.runs.list_runs(ListRunsRequest(state=RUN_STATE_RUNNING, labels=["team=a"]), ctx())
    assert [r.id for r in running.runs] == ["run-1", "run-3"]
    named = await api.runs.list_runs(ListRunsRequest(name_contains="-6"), ctx())
    assert [r.id for r in named.runs] == ["run-6"]


async def test_list_runs_caps_the_page_size_and_checks_its_arguments(api: Api) -> None:
    seen = {}

    async def list_runs(project, **kwargs):
        seen.update(kwargs)
        return [], ""

    api.store.list_runs = list_runs
    await api.runs.list_runs(ListRunsRequest(page_size=100_000), ctx())
    assert seen["page_size"] == 500
    await api.runs.list_runs(ListRunsRequest(), ctx())
    assert seen["page_size"] == 50
    with pytest.raises(BadInputError, match="labels\\[1\\]: expected key=value, got 'oops'"):
        await api.runs.list_runs(ListRunsRequest(labels=["a=b", "oops"]), ctx())
    with pytest.raises(BadInputError, match="page_size: -1"):
        await api.runs.list_runs(ListRunsRequest(page_size=-1), ctx())
    with pytest.raises(BadInputError, match="state: 42 is not a run state"):
        await api.runs.list_runs(ListRunsRequest(state=42), ctx())


# --- CancelRun, ResumeRun ---


async def test_cancel_of_a_terminal_run_changes_nothing(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_SUCCEEDED)
    assert await api.runs.cancel_run(CancelRunRequest(id=run.id), ctx()) == run
    assert api.bus.controls == []


async def test_cancel_of_a_running_run_asks_the_schedulers(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_RUNNING)
    returned = await api.runs.cancel_run(CancelRunRequest(id=run.id), ctx())
    assert returned.state == RUN_STATE_RUNNING
    assert [(c.run_id, c.action) for c in api.bus.controls] == [(run.id, CONTROL_ACTION_CANCEL)]


async def test_resume_is_refused_for_a_running_run_naming_its_state(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_RUNNING)
    with pytest.raises(BadInputError, match="id: run run-1 is running; only cancelled, failed or budget-exceeded"):
        await api.runs.resume_run(ResumeRunRequest(id=run.id), ctx())
    assert api.bus.controls == []


@pytest.mark.parametrize("state", [RUN_STATE_CANCELLED, RUN_STATE_FAILED, RUN_STATE_BUDGET_EXCEEDED])
async def test_resume_of_a_stopped_run_asks_the_schedulers(api: Api, state: int) -> None:
    run = await stored_run(api, state)
    returned = await api.runs.resume_run(ResumeRunRequest(id=run.id), ctx())
    assert [(c.run_id, c.action) for c in api.bus.controls] == [(run.id, CONTROL_ACTION_RESUME)]
    # The answer is the state the resume puts the run in, not the one it had.
    assert (returned.state, returned.message, returned.HasField("end_time")) == (
        RUN_STATE_PENDING, "resume requested", False
    )


# --- ListRunResults, CompareRuns ---


def results(values: list[bool], evaluator: str = "exact-match") -> list[EvaluationResult]:
    return [
        EvaluationResult(record_id=f"q{i}", evaluator=evaluator, outcome=OUTCOME_SCORED, scores=[Score(passed=v)])
        for i, v in enumerate(values)
    ]


async def test_list_run_results_pages_and_filters_by_evaluator(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_SUCCEEDED)
    api.store.results[("default", run.id)] = results([True] * 5) + results([False] * 2, "other")
    page = await api.runs.list_run_results(ListRunResultsRequest(id=run.id, page_size=4), ctx())
    assert len(page.results) == 4 and page.next_page_token
    rest = await api.runs.list_run_results(
        ListRunResultsRequest(id=run.id, page_size=4, page_token=page.next_page_token), ctx()
    )
    assert len(rest.results) == 3 and not rest.next_page_token
    other = await api.runs.list_run_results(ListRunResultsRequest(id=run.id, evaluator="other"), ctx())
    assert len(other.results) == 2
    with pytest.raises(NotFoundError):
        await api.runs.list_run_results(ListRunResultsRequest(id=run.id), ctx("someone-else"))


async def test_compare_runs_pairs_the_stored_results(api: Api) -> None:
    summary = MetricSummary(
        metric="exact-match", evaluator="exact-match", kind=VALUE_KIND_BOOLEAN, higher_is_better=True
    )
    a = await stored_run(api, RUN_STATE_SUCCEEDED, run_id="run-a", summaries=[summary])
    b = await stored_run(api, RUN_STATE_SUCCEEDED, run_id="run-b", summaries=[summary])
    api.store.results[("default", "run-a")] = results([False] * 30)
    api.store.results[("default", "run-b")] = results([True] * 30)
    api.runs._limits = type(api.runs._limits)(compare_batch_size=7)
    comparison = await api.runs.compare_runs(CompareRunsRequest(run_a=a.id, run_b=b.id), ctx())
    [metric] = comparison.metrics
    assert (comparison.run_a, comparison.run_b) == ("run-a", "run-b")
    assert metric.n_pairs == 30 and metric.diff == pytest.approx(1.0) and metric.verdict == "better"
    assert comparison.adjust == "holm" and metric.test == "mcnemar" and metric.p_value_adjusted == metric.p_value
    assert (await api.store.get_run("default", "run-a")).results == []  # the stored run is untouched


async def test_compare_runs_explains_what_is_missing(api: Api) -> None:
    await stored_run(api, RUN_STATE_RUNNING, run_id="run-a")
    with pytest.raises(NotFoundError, match="run_b: run 'run-x' not found"):
        await api.runs.compare_runs(CompareRunsRequest(run_a="run-a", run_b="run-x"), ctx())
    with pytest.raises(BadInputError, match="run_a: run run-a has no summaries yet \\(it is running\\)"):
        await api.runs.compare_runs(CompareRunsRequest(run_a="run-a", run_b="run-a"), ctx())
    with pytest.raises(BadInputError, match=r"confidence: 1\.5 must be between 0 and 1"):
        await api.runs.compare_runs(CompareRunsRequest(run_a="run-a", run_b="run-a", confidence=1.5), ctx())
    with pytest.raises(BadInputError, match=r"adjust: 'bonferroni' is not one of holm, bh, none"):
        await api.runs.compare_runs(CompareRunsRequest(run_a="run-a", run_b="run-a", adjust="bonferroni"), ctx())


# --- WatchRun ---


async def test_watch_of_a_finished_run_is_one_final_event(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_SUCCEEDED)
    run.summaries.add(metric="exact-match", n=3)
    run.end_time.FromSeconds(1_700_000_000)
    await api.store.update_run(run)
    events = [e async for e in api.runs.watch_run(WatchRunRequest(id=run.id), ctx())]
    assert len(events) == 1
    [event] = events
    assert (event.type, event.state, event.summaries[0].n) == (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_SUCCEEDED, 3)
    assert event.time.seconds == 1_700_000_000
    assert api.bus.watchers(run.id) == 0


async def test_watch_streams_bus_events_until_a_terminal_state(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_RUNNING)
    stream = api.runs.watch_run(WatchRunRequest(id=run.id), ctx())
    first = await stream.__anext__()
    assert (first.type, first.state) == (RUN_EVENT_TYPE_STATE, RUN_STATE_RUNNING)
    await api.bus.subscribed.wait()
    api.bus.publish(RunEvent(run_id=run.id, type=RUN_EVENT_TYPE_PROGRESS, progress={"completed": 4}))
    api.bus.publish(RunEvent(run_id=run.id, type=RUN_EVENT_TYPE_SUMMARY, state=RUN_STATE_CANCELLED))
    api.bus.publish(RunEvent(run_id=run.id, type=RUN_EVENT_TYPE_PROGRESS))  # after the end: never sent
    rest = [e async for e in stream]
    assert [(e.type, e.state) for e in rest] == [
        (RUN_EVENT_TYPE_PROGRESS, 0),
        (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_CANCELLED),
    ]
    assert api.bus.watchers(run.id) == 0


async def test_watch_ends_from_the_store_when_the_terminal_event_was_missed(api: Api) -> None:
    run = await stored_run(api, RUN_STATE_RUNNING)
    stream = api.runs.watch_run(WatchRunRequest(id=run.id), ctx())
    await stream.__anext__()
    run.state = RUN_STATE_FAILED
    run.message = "worker pool gone"
    await api.store.update_run(run)
    rest = [e async for e in stream]  # the poll (0.2 s in these tests) sees it
    assert [(e.type, e.state, e.message) for e in rest] == [
        (RUN_EVENT_TYPE_SUMMARY, RUN_STATE_FAILED, "worker pool gone")
    ]


async def test_watch_of_an_unknown_run_is_not_found_and_leaves_no_subscription(api: Api) -> None:
    with pytest.raises(NotFoundError):
        await api.runs.watch_run(WatchRunRequest(id="run-nope"), ctx()).__anext__()
    await asyncio.sleep(0)
    assert api.bus.watchers("run-nope") == 0


# --- ListEvaluators ---


async def test_list_evaluators_lists_manifests_and_packs(api: Api) -> None:
    # A project's catalog lists its enabled packs (only core without an evaluators: section); all_packs every
    # allowed one (docs/packs.md).
    enabled = await api.catalog.list_evaluators(ListEvaluatorsRequest(), ctx())
    assert {m.pack for m in enabled.evaluators} == {"core"}
    response = await api.catalog.list_evaluators(ListEvaluatorsRequest(all_packs=True), ctx())
    names = [m.name for m in response.evaluators]
    assert "builtin/exact-match" in names and "builtin/llm-judge" in names
    packs = {p.name: p for p in response.packs}
    assert packs["core"].default_on and packs["core"].evaluators == sum(m.pack == "core" for m in response.evaluators)
    judge_only = await api.catalog.list_evaluators(ListEvaluatorsRequest(pack="judge"), ctx())
    assert {m.pack for m in judge_only.evaluators} == {"judge"}
    assert [p.name for p in judge_only.packs] == ["judge"]


async def test_list_evaluators_unknown_pack_lists_the_installed_ones(api: Api) -> None:
    # Which packs are installed depends on the environment (a user may have pip-installed one), so the test checks
    # that the built-in packs are among those named, not the exact list.
    with pytest.raises(BadInputError, match="pack: unknown pack 'no-such-pack'; installed packs: ") as refused:
        await api.catalog.list_evaluators(ListEvaluatorsRequest(pack="no-such-pack"), ctx())
    named = str(refused.value).split("installed packs: ", 1)[1].split(", ")
    assert {"agent", "core", "judge"} <= set(named) and named == sorted(named)


async def _aiter(items: list) -> AsyncIterator:
    for item in items:
        yield item
