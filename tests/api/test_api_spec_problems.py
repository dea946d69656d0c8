"""CreateRun and ApplyPolicy answer a bad spec with every problem at once: 400 / INVALID_ARGUMENT, the message
listing them and one field violation each; gates and policy conditions are type-checked before anything runs."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from click.testing import CliRunner
from google.protobuf import json_format
from google.rpc import status_pb2

from evalsi.api import (
    ApiServer,
    CallContext,
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
from evalsi.cli.main import cli
from evalsi.connections import Connections, JudgeConnection
from evalsi.evaluators import Registry
from evalsi.runs.dry_run import dry_run_document, dry_run_text, plan_from_struct, served_dry_run
from evalsi.runs.embedded import dry_run
from evalsi.runs.spec import load_eval_run, validate_eval_run
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.stores.traces import open_trace_store
from evalsi.v1alpha1 import run_service_pb2_grpc
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "runs"


async def _nowhere(*_: Any) -> Any:
    return None


async def _no_events(run_id: str) -> AsyncIterator[Any]:
    return
    yield


@dataclass
class Served:
    http: str
    grpc_target: str
    store: Any


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The api's handlers over real SQLite and directory stores, validating with validate_eval_run as the
    service does (the shared doubles' validator checks less)."""
    registry = Registry.from_entry_points()
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "qa.jsonl").write_text(json.dumps({"id": "q1", "output": "Paris", "reference": "Paris"}) + "\n")
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    traces = await open_trace_store(f"sqlite:///{tmp_path / 'traces.db'}")

    runs = RunHandlers(
        store=store, objects=objects, control=_nowhere, watch=_no_events,
        validate_run=partial(validate_eval_run, registry=registry, datasets_dir=datasets),
        load_records=partial(load_run_dataset, datasets_dir=datasets),
    )
    table = build_table(
        evaluation=EvaluationHandlers(_nowhere, registry=registry), runs=runs, catalog=CatalogHandlers(registry),
        traces=TraceHandlers(traces), monitor=MonitorHandlers(store, traces, registry=registry, limits=HandlerLimits()),
    )
    server = ApiServer(table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0))
    await server.start()
    try:
        yield Served(f"http://127.0.0.1:{server.http_port}", f"127.0.0.1:{server.grpc_port}", store)
    finally:
        await server.stop()
        await traces.close()
        await objects.close()
        await store.close()


async def stored_runs(served: Served) -> list[Any]:
    runs, _ = await served.store.list_runs("default")
    return list(runs)


def run_body(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "nightly"},
            "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}], **spec}}


BROKEN = run_body(
    evaluators=[{"ref": "exact-match"}, {"ref": "fuzzy-match", "params": {"treshold": 0.5}}],
    trials=-1,
    gates=["metric('exact-match').n >= 0.5", "metric('exact-match').mean == 'high'", "metric('exact-macth').mean > 0"],
)
EXPECTED = [
    "spec.evaluators[1] (fuzzy-match): evaluator builtin/fuzzy-match: unknown param(s) treshold",
    "spec.trials: must be >= 1 (0 means 1), got -1",
    "spec.gates[1]: == compares double with string, which are never equal "
    "(in \"metric('exact-match').mean == 'high'\" at column 28)",
]


async def test_create_run_lists_every_problem_over_http_and_grpc(served: Served) -> None:
    async with aiohttp.ClientSession(served.http) as http, http.post("/v1alpha1/runs", json={"run": BROKEN}) as reply:
        answer = await reply.json()
    assert reply.status == 400 and answer["code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    lines = answer["message"].splitlines()
    assert lines[0] == "3 problems in the run spec:"
    assert [line.removeprefix("  - ") for line in lines[1:]][1:] == EXPECTED[1:]
    assert lines[1].startswith("  - " + EXPECTED[0])
    violations = [v["field"] for d in answer["details"] for v in d.get("fieldViolations", [])]
    assert violations == ["spec.evaluators[1]", "spec.trials", "spec.gates[1]"]
    # the gate naming no metric is not listed: with an evaluator that did not bind, the run's metrics are unknown

    async with grpc.aio.insecure_channel(served.grpc_target) as channel:
        call = run_service_pb2_grpc.RunServiceStub(channel).CreateRun(
            CreateRunRequest(run=json_format.ParseDict(BROKEN, EvalRun()))
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details() == answer["message"]
    rich = status_pb2.Status.FromString(dict(error.trailing_metadata())["grpc-status-details-bin"])
    assert rich.message == answer["message"]
    assert await stored_runs(served) == []


async def test_an_unknown_metric_in_a_gate_is_refused_with_a_suggestion_before_the_run(served: Served) -> None:
    body = run_body(gates=["metric('exact-macth').mean > 0", "metric('exact-match').n >= 0.5"])
    async with aiohttp.ClientSession(served.http) as http, http.post("/v1alpha1/runs", json={"run": body}) as reply:
        answer = await reply.json()
    assert reply.status == 400
    assert answer["message"] == (
        "spec.gates[0]: metric 'exact-macth' is not produced by any evaluator of this run; did you mean exact-match?"
    )
    assert await stored_runs(served) == []


async def test_a_run_whose_gate_compares_a_count_with_a_fraction_is_accepted(served: Served) -> None:
    body = run_body(gates=["metric('exact-match').n >= 0.5"])
    async with aiohttp.ClientSession(served.http) as http, http.post("/v1alpha1/runs", json={"run": body}) as reply:
        answer = await reply.json()
    assert reply.status == 200, answer
    assert answer["spec"]["gates"] == ["metric('exact-match').n >= 0.5"]


def policy_body(selector: str, alert: str, promote: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": "prod"},
        "spec": {
            "selector": selector,
            "cascade": [{"ref": "builtin/exact-match"}, {"ref": "builtin/contains", "params": {"values": ["x"]},
                                                         "when": "score('exact-match') < 1"}],
            "alerts": [{"when": alert, "notify": "http://127.0.0.1:9/hook", "secretEnv": "EVALSI_TEST_HOOK"}],
            "promote": {"when": promote, "dataset": "datasets/regressions"},
        },
    }


async def test_apply_policy_type_checks_every_condition_and_lists_every_problem(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALSI_TEST_HOOK", "s3cret")
    good = policy_body("trace.latency_s > 2", "n('exact-match') >= 0.5 && mean('contains') < 0.9",
                       "score('exact-match') == 0")
    async with aiohttp.ClientSession(served.http) as http:
        async with http.post("/v1alpha1/policies", json=good) as reply:
            assert reply.status == 200, await reply.json()
        bad = policy_body("trace.latency_s > '2s'", "mean('contians') < 0.9", "scores")
        async with http.post("/v1alpha1/policies", json=bad) as reply:
            answer = await reply.json()
    assert reply.status == 400
    assert answer["message"].splitlines() == [
        "3 problems in the policy:",
        "  - spec.selector: > cannot order double and string (in \"trace.latency_s > '2s'\" at column 17)",
        "  - spec.alerts[0].when: mean('contians'): no metric 'contians' is scored by the cascade; "
        "did you mean contains?",
        "  - spec.promote.when: a when condition must be true or false; 'scores' is a list(score)",
    ]
    violations = [v["field"] for d in answer["details"] for v in d.get("fieldViolations", [])]
    assert violations == ["spec.selector", "spec.alerts[0].when", "spec.promote.when"]


POLICY_FILE = """\
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {name: prod}
spec:
  selector: span.kind == "llm"
  cascade:
    - {ref: builtin/exact-match}
    - {ref: builtin/contains, when: "score('exact-match') + 1 > 1.5"}
"""


async def test_evalsi_policies_apply_exits_2_listing_every_type_problem(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_FILE)
    args = ["policies", "apply", "-f", str(path), "--server", served.http, "--dry-run"]
    result = await asyncio.to_thread(CliRunner().invoke, cli, args, catch_exceptions=False)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: 2 problems in the policy:",
        "  - spec.selector: span has no field 'kind'; accepted: id, parent_id, name, type, model, tool, error, "
        "duration_s, attributes (in 'span.kind == \"llm\"' at column 6)",
        "  - spec.cascade[1].when: + mixes double and int, which CEL does not do in arithmetic; convert one side, "
        "e.g. double(1) (in \"score('exact-match') + 1 > 1.5\" at column 22)",
    ]


async def test_a_served_dry_run_shows_the_embedded_plan_and_token_and_cost_projection(tmp_path: Path) -> None:
    """CreateRun(dry_run) of the model example, through the api's handlers as the service wires them, answers the
    very text `evalsi run --dry-run` prints embedded: tasks, target calls, tokens, cost and the budget."""
    registry = Registry.from_entry_points()
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    shutil.copy(EXAMPLES / "capitals.jsonl", datasets / "capitals.jsonl")
    connections = Connections(judges={"local": JudgeConnection(
        name="local", connector="openai-compatible", base_url="http://127.0.0.1:9/v1", model="local-model",
        models=("local-model",),
    )})
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'meta.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    runs = RunHandlers(
        store=store, objects=objects, control=_nowhere, watch=_no_events,
        validate_run=partial(validate_eval_run, registry=registry, datasets_dir=datasets),
        load_records=partial(load_run_dataset, datasets_dir=datasets), connections=connections,
        describe_plan=partial(served_dry_run, registry=registry),
    )
    embedded_spec = load_eval_run(EXAMPLES / "qa-model.yaml")
    prepared, projected = dry_run(embedded_spec, base_dir=EXAMPLES)
    embedded = dry_run_text(prepared.plan, projected, name="qa-model", project="quickstart", dataset="capitals.jsonl")

    served_spec = load_eval_run(EXAMPLES / "qa-model.yaml")  # the same, naming the server's connection
    model = served_spec.spec.target.model
    for name in ("connector", "base_url", "api_key_env"):
        model.ClearField(name)
    model.connection = "local"
    try:
        answer = await runs.create_run(CreateRunRequest(run=served_spec, dry_run=True), CallContext(
            method="CreateRun", request_id="r", project="quickstart", header_project=""))
    finally:
        await objects.close()
        await store.close()
    assert answer.message == embedded
    # The JSON document too (`evalsi run --server … --dry-run --format json`), counts as integers again.
    assert plan_from_struct(answer.dry_run_plan) == dry_run_document(
        prepared.plan, projected, name="qa-model", project="quickstart")
    assert "target       24 calls, ≈ " in answer.message and "cost $" in answer.message
    assert "projected    ≈ " in answer.message and "budget       20,000 tokens and $0.0500" in answer.message
