"""Every cap of evalsi.limits, through the real HTTP server and handlers over real (SQLite, directory) stores:
a 400 that names the field and the limit, and nothing stored from the refused request."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from google.protobuf import json_format

from evalsi import limits
from evalsi.api import (
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    HandlerLimits,
    MonitorHandlers,
    RunHandlers,
    ServerConfig,
    TraceHandlers,
    build_table,
)
from evalsi.api.run_dataset import load_run_dataset
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.runs.spec import validate_eval_run
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.stores.traces import open_trace_store
from evalsi.traces import Feedback
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest, EvaluateResponse
from evalsi.v1alpha1.run_pb2 import EvalRun

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


@dataclass
class Served:
    http: aiohttp.ClientSession
    store: Any
    traces: Any
    evaluated: list[EvaluateRequest]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    registry = Registry.from_entry_points()
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "qa.jsonl").write_text(json.dumps({"id": "q1", "output": "Paris", "reference": "Paris"}) + "\n")
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    traces = await open_trace_store(f"sqlite:///{tmp_path / 'traces.db'}")
    evaluated: list[EvaluateRequest] = []

    async def evaluate(request: EvaluateRequest, timeout_s: float | None) -> EvaluateResponse:
        evaluated.append(request)  # reached only by a request that passed every check
        return EvaluateResponse()

    async def control(message: Any) -> None:
        pass

    async def watch(run_id: str) -> AsyncIterator[Any]:
        return
        yield

    runs = RunHandlers(
        store=store,
        objects=objects,
        control=control,
        watch=watch,
        validate_run=partial(validate_eval_run, registry=registry, datasets_dir=datasets),
        load_records=partial(load_run_dataset, datasets_dir=datasets),
    )
    table = build_table(
        evaluation=EvaluationHandlers(evaluate, registry=registry),
        runs=runs,
        catalog=CatalogHandlers(registry),
        traces=TraceHandlers(traces),
        monitor=MonitorHandlers(store, traces, registry=registry, limits=HandlerLimits()),
    )
    server = ApiServer(table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0))
    await server.start()
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{server.http_port}") as http:
            yield Served(http, store, traces, evaluated)
    finally:
        await server.stop()
        await traces.close()
        await objects.close()
        await store.close()


def run_body(metadata: dict | None = None, **spec: Any) -> dict:
    return {"run": {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun",
                    "metadata": {"name": "nightly", **(metadata or {})},
                    "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}], **spec}}}


async def refused(served: Served, path: str, body: dict, field: str, *message: str) -> None:
    async with served.http.post(path, json=body) as response:
        answer = await response.json()
    assert response.status == 400, answer
    assert answer["message"].startswith(f"{field}: "), answer["message"]
    for part in message:
        assert part in answer["message"], answer["message"]
    violations = [v["field"] for d in answer.get("details", []) for v in d.get("fieldViolations", [])]
    assert violations == [field]


async def assert_no_run_stored(served: Served) -> None:
    runs, _ = await served.store.list_runs("default")
    assert runs == []


# --- runs ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"summary": {"bootstrapResamples": 20_000_000}}, "spec.summary.bootstrapResamples",
         f"20000000 exceeds the limit of {limits.MAX_BOOTSTRAP_RESAMPLES} (refused, never lowered: 0 means the "
         "default, 2000)"),
        ({"summary": {"bootstrapResamples": -1}}, "spec.summary.bootstrapResamples",
         "must be >= 0 (0 means the default, 2000), got -1"),
        # The edge refuses a non-finite number in any field of the request (evalsi.edge_checks) ...
        ({"budget": {"usd": "NaN"}}, "run.spec.budget.usd", "a finite number is expected"),
        ({"budget": {"usd": "Infinity"}}, "run.spec.budget.usd", "a finite number is expected"),
        ({"budget": {"usd": -1}}, "spec.budget.usd", "must be a finite number >= 0, got -1"),
        ({"concurrency": limits.MAX_CONCURRENCY + 1}, "spec.concurrency",
         f"{limits.MAX_CONCURRENCY + 1} exceeds the limit of {limits.MAX_CONCURRENCY}"),
        ({"gates": ["metric('exact-match').mean >= 0.5"] * (limits.MAX_EXPRESSIONS + 1)}, "spec.gates",
         f"{limits.MAX_EXPRESSIONS + 1} gates exceed the limit of {limits.MAX_EXPRESSIONS}"),
    ],
)
async def test_run_spec_caps(served: Served, spec: dict, field: str, message: str) -> None:
    await refused(served, "/v1alpha1/runs", run_body(**spec), field, message)
    await assert_no_run_stored(served)


@pytest.mark.parametrize("usd", [math.nan, math.inf])
def test_the_spec_refuses_a_non_finite_budget_wherever_it_comes_from(usd: float, tmp_path: Path) -> None:
    # ... and the spec itself, for the CLI and embedded runs that never pass the api.
    (tmp_path / "qa.jsonl").write_text(json.dumps({"id": "q1", "output": "a", "reference": "a"}) + "\n")
    run = json_format.ParseDict(run_body()["run"], EvalRun())
    run.spec.budget.usd = usd
    with pytest.raises(BadInputError, match=rf"^spec\.budget\.usd: must be a finite number >= 0, got {usd}$"):
        validate_eval_run(run, registry=Registry.from_entry_points(), base_dir=tmp_path)


async def test_trials_cap(served: Served) -> None:
    body = run_body(trials=limits.MAX_TRIALS + 1)
    async with served.http.post("/v1alpha1/runs", json=body) as response:
        answer = await response.json()
    assert response.status == 400, answer
    # Given outputs, trials > 1 is a second problem of the same spec; both are listed.
    assert f"  - spec.trials: {limits.MAX_TRIALS + 1} exceeds the limit of {limits.MAX_TRIALS}\n" in answer["message"]
    await assert_no_run_stored(served)


async def test_a_huge_gate_is_refused_before_it_is_parsed(served: Served) -> None:
    gate = "metric('exact-match').mean in [" + ", ".join(["0.5"] * 20_000) + "]"  # ~100 KB
    started = time.monotonic()
    await refused(served, "/v1alpha1/runs", run_body(gates=[gate]), "spec.gates[0]",
                  f"{len(gate)} characters exceed the limit of {limits.MAX_EXPRESSION_CHARS}")
    assert time.monotonic() - started < 2.0  # parsing it took 12-33 s
    await assert_no_run_stored(served)


async def test_run_name_and_label_caps(served: Served) -> None:
    name = "n" * (limits.MAX_NAME_CHARS + 1)
    await refused(served, "/v1alpha1/runs", run_body({"name": name}), "metadata.name",
                  f"{len(name)} characters exceed the limit of {limits.MAX_NAME_CHARS}")
    many = {f"k{i}": "v" for i in range(limits.MAX_LABELS + 1)}
    await refused(served, "/v1alpha1/runs", run_body({"labels": many}), "metadata.labels",
                  f"{limits.MAX_LABELS + 1} labels exceed the limit of {limits.MAX_LABELS}")
    await refused(served, "/v1alpha1/runs", run_body({"labels": {"k" * 300: "v"}}), "metadata.labels",
                  f"a key of 300 characters ('{'k' * 40}'...) exceeds the limit of {limits.MAX_LABEL_KEY_CHARS}")
    value = "v" * (limits.MAX_LABEL_VALUE_CHARS + 1)
    await refused(served, "/v1alpha1/runs", run_body({"labels": {"team": value}}), "metadata.labels.team",
                  f"{len(value)} characters exceed the limit of {limits.MAX_LABEL_VALUE_CHARS}")
    await assert_no_run_stored(served)


async def test_values_at_the_limits_are_accepted(served: Served) -> None:
    body = run_body({"name": "n" * limits.MAX_NAME_CHARS, "labels": {"team": "v" * limits.MAX_LABEL_VALUE_CHARS}},
                    summary={"bootstrapResamples": limits.MAX_BOOTSTRAP_RESAMPLES}, trials=1,
                    budget={"usd": 2.5})
    async with served.http.post("/v1alpha1/runs", json=body) as response:
        answer = await response.json()
    assert response.status == 200, answer
    runs, _ = await served.store.list_runs("default")
    assert [run.name for run in runs] == ["n" * limits.MAX_NAME_CHARS]


# --- Evaluate --------------------------------------------------------------------------------------------


EVALUATE = {"records": [{"id": "a", "output": {"text": "x"}}], "evaluators": [{"ref": "exact-match"}]}


async def test_evaluate_resamples_and_confidence_caps(served: Served) -> None:
    await refused(served, "/v1alpha1/evaluate", {**EVALUATE, "summary": {"bootstrapResamples": 1_000_000_000}},
                  "summary.bootstrap_resamples", f"outside 0..{limits.MAX_BOOTSTRAP_RESAMPLES}")
    await refused(served, "/v1alpha1/evaluate", {**EVALUATE, "summary": {"confidence": 1.5}},
                  "summary.confidence", "must be between 0 and 1 (e.g. 0.95), got 1.5")
    assert served.evaluated == []  # no worker was asked


async def test_evaluate_regex_pattern_caps(served: Served) -> None:
    def regex(pattern: str) -> dict:
        return {**EVALUATE, "evaluators": [{"ref": "regex-match", "params": {"pattern": pattern}}]}

    field = "evaluators[0].params"
    await refused(served, "/v1alpha1/evaluate", regex("x" * (limits.MAX_PATTERN_CHARS + 1)), field,
                  f"{limits.MAX_PATTERN_CHARS + 1} characters exceed the limit of {limits.MAX_PATTERN_CHARS}")
    await refused(served, "/v1alpha1/evaluate", regex(r"(\w+)\s\1"), field,
                  "param 'pattern'", "backreferences are not supported by the linear-time engine (RE2)")
    await refused(served, "/v1alpha1/evaluate", regex(r"foo(?!bar)"), field, "lookahead is not supported")
    assert served.evaluated == []


# --- policies and feedback -------------------------------------------------------------------------------


def policy_body(name: str = "watch", **spec: Any) -> dict:
    return {"apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": name},
            "spec": {"cascade": [{"ref": "exact-match"}], **spec}}


async def test_policy_caps(served: Served) -> None:
    long_name = "p" * (limits.MAX_NAME_CHARS + 1)
    await refused(served, "/v1alpha1/policies", policy_body(long_name), "metadata.name",
                  f"{len(long_name)} characters exceed the limit of {limits.MAX_NAME_CHARS}")
    selector = "span.name == 'x' || " * 300 + "true"
    await refused(served, "/v1alpha1/policies", policy_body(selector=selector), "spec.selector",
                  f"{len(selector)} characters exceed the limit of {limits.MAX_EXPRESSION_CHARS}")
    always = ["errors"] * (limits.MAX_EXPRESSIONS + 1)
    await refused(served, "/v1alpha1/policies", policy_body(sampling={"always": always}), "spec.sampling.always",
                  f"{limits.MAX_EXPRESSIONS + 1} entries exceed the limit of {limits.MAX_EXPRESSIONS}")
    assert await served.store.list_policies() == []


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
async def test_feedback_values_must_be_finite(served: Served, value: str) -> None:
    body = {"feedback": {"traceId": TRACE_ID, "name": "rating", "value": value}}
    await refused(served, "/v1alpha1/feedback", body, "feedback.value", "a finite number is expected")
    assert await served.traces.list_feedback("default", trace_id=TRACE_ID) == []
    # Feedback that reaches the stores by another way than the api's edge is checked by Feedback itself.
    with pytest.raises(BadInputError, match=r"^feedback\.value: -?(nan|inf) is not a finite number$"):
        Feedback(id="f1", trace_id=TRACE_ID, session_id="", name="rating", value=float(value)).check()
