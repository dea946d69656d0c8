"""MonitorService over both transports: apply, list, get, delete, validation naming field paths, and stats."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from api_doubles import Api
from scipy import stats as scipy_stats
from statsmodels.stats.proportion import proportion_confint

from evalsi.api import ApiServer, MonitorHandlers, ServerConfig, build_table
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError
from evalsi.client import Client
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.stores import SqlMetadataStore
from evalsi.stores.traces import SqliteTraceStore
from evalsi.traces import OnlineScore
from evalsi.v1alpha1.monitor_service_pb2 import (
    ApplyPolicyRequest,
    GetPolicyStatsRequest,
    MetricStats,
    PolicyStats,
)
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy

NOW = 28_333_334 * 60.0  # the start of a one-minute window (2023-11-14)
WINDOW = 60.0


def policy_doc(name: str = "prod", *, rate: float = 0.5, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "OnlineEvalPolicy",
        "metadata": {"name": name, **metadata},
        "spec": {
            "sampling": {"rate": rate, "always": ["trace.error"]},
            "cascade": [
                {"ref": "builtin/regex-match", "alias": "no-ssn",
                 "params": {"pattern": "\\b\\d{3}-\\d{2}-\\d{4}\\b", "negate": True}},
                {"ref": "builtin/exact-match", "when": "scores.all(s, s.passed)"},
            ],
            "window": "1m",
        },
    }


def trace(n: int) -> str:
    return f"{n:032x}"


def score(n: int, metric: str, at: float, *, value: float | None = None, passed: bool | None = None,
          outcome: str = "scored", reason: str = "", policy: str = "prod") -> OnlineScore:
    evaluator = "builtin/regex-match@1.0.0" if metric == "no-ssn" else "builtin/exact-match@1.0.0"
    if passed is not None:
        value = 1.0 if passed else 0.0
    return OnlineScore(trace_id=trace(n), revision=1, policy=policy, stage=metric, metric=metric, evaluator=evaluator,
                       outcome=outcome, value=value, passed=passed, reason=reason, scored_at=at)


# Two windows: the previous minute (traces 1-4) and the current one (traces 5-9).
PASSES = [True, True, False, True, True, False, True, True, True]
GRADES = [0.9, 0.4, None, 0.7, 0.8, None, 0.3, 1.0, 0.6]


def scores() -> list[OnlineScore]:
    out = []
    for i, (passed, grade) in enumerate(zip(PASSES, GRADES, strict=True), start=1):
        at = NOW - WINDOW + 5 * i if i <= 4 else NOW + 5 * i
        out.append(score(i, "no-ssn", at, passed=passed))
        if grade is not None:
            out.append(score(i, "exact-match", at + 1, value=grade))
        else:  # the stage's `when` was false
            out.append(score(i, "exact-match", at + 1, outcome="skipped", reason="when: scores.all(s, s.passed)"))
    out.append(score(10, "exact-match", NOW + 50, outcome="skipped", reason="no content: the trace has no output"))
    out.append(score(11, "exact-match", NOW + 51, outcome="error", reason="infra: provider answered 503"))
    out.append(score(12, "no-ssn", NOW + 52, passed=False, policy="other-policy"))  # never counted for prod
    return out


def urls(server: ApiServer) -> list[str]:
    return [f"http://127.0.0.1:{server.http_port}", f"grpc://127.0.0.1:{server.grpc_port}"]


@pytest.fixture
async def served(api: Api) -> AsyncIterator[Api]:
    api.now = NOW + 55
    await api.start()
    yield api


async def test_apply_list_get_delete_over_both_transports(served: Api) -> None:
    assert served.server is not None

    def calls(url: str, project: str) -> None:
        with Client(url, project=project) as client:
            created = client.policies.apply(policy_doc())
            assert (created.project, created.name, created.generation, created.changed) == (project, "prod", 1, True)
            assert created.policy.metadata.project == project and len(created.spec_hash) == 64
            again = client.policies.apply(policy_doc())
            assert (again.generation, again.changed, again.spec_hash) == (1, False, created.spec_hash)
            changed = client.policies.apply(policy_doc(rate=0.25))
            assert (changed.generation, changed.changed) == (2, True)
            preview = client.policies.apply(policy_doc(rate=0.1), dry_run=True)
            assert (preview.generation, preview.changed) == (3, True)
            assert client.policies.get("prod").policy.spec.sampling.rate == 0.25  # the dry run stored nothing

            for name in ("beta", "alpha", "gamma"):
                client.policies.apply(policy_doc(name))
            assert [p.name for p in client.policies.list(page_size=2)] == ["alpha", "beta", "gamma", "prod"]
            stored = client.policies.get("prod")
            assert stored.generation == 2 and stored.policy.spec.window.ToSeconds() == 60
            assert stored.update_time.ToSeconds() > 0 and not stored.changed

            deleted = client.policies.delete("prod")
            assert (deleted.name, deleted.generation) == ("prod", 2)
            with pytest.raises(BadInputError, match=f"policy 'prod' not found in project '{project}'"):
                client.policies.get("prod")
            with pytest.raises(BadInputError, match="not found"):
                client.policies.delete("prod")
        with Client(url, project=f"{project}-else") as client:
            assert list(client.policies.list()) == []

    for url, project in zip(urls(served.server), ("over-http", "over-grpc"), strict=True):
        await asyncio.to_thread(calls, url, project)
    assert sorted({p for p, _ in served.store.policies}) == ["over-grpc", "over-http"]


async def test_not_found_is_404_and_not_found_over_grpc(served: Api) -> None:
    def call() -> None:
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{served.http}/v1alpha1/policies/nope")
        body = json.loads(caught.value.read())
        assert caught.value.code == 404 and body["message"] == "name: policy 'nope' not found in project 'default'"
        request = urllib.request.Request(f"{served.http}/v1alpha1/policies/nope", method="DELETE")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request)
        assert caught.value.code == 404

    await asyncio.to_thread(call)

    import grpc

    from evalsi.v1alpha1 import monitor_service_pb2_grpc
    from evalsi.v1alpha1.monitor_service_pb2 import DeletePolicyRequest

    async with grpc.aio.insecure_channel(served.grpc_target) as channel:
        stub = monitor_service_pb2_grpc.MonitorServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await stub.DeletePolicy(DeletePolicyRequest(name="nope"))
        assert error.value.code() == grpc.StatusCode.NOT_FOUND


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def http_doc(**metadata: Any) -> dict[str, Any]:
    """A policy as the HTTP body: protobuf JSON, so durations in seconds ("60s", not "1m")."""
    doc = policy_doc(**metadata)
    doc["spec"]["window"] = "60s"
    return doc


def violations(body: dict[str, Any]) -> list[str]:
    return [v["field"] for d in body.get("details", []) for v in d.get("fieldViolations", [])]


async def test_validation_errors_name_field_paths(served: Api) -> None:
    url = f"{served.http}/v1alpha1/policies"

    def calls() -> None:
        # The body is the OnlineEvalPolicy itself; proto JSON, so durations as "60s".
        status, body = post(url, http_doc())
        assert status == 200 and body["generation"] == "1" and body["changed"] is True

        bad = http_doc()
        bad["spec"]["sampling"]["rate"] = 2
        status, body = post(url, bad)
        assert status == 400 and body["message"] == "spec.sampling.rate: must be between 0 and 1, got 2.0"
        assert violations(body) == ["spec.sampling.rate"]

        typo = http_doc()
        typo["spec"]["windw"] = typo["spec"].pop("window")
        status, body = post(url, typo)
        assert status == 400 and body["message"].startswith("policy.spec.windw: unknown field")

        several = http_doc()
        several["spec"]["cascade"][0]["ref"] = "builtin/exact-mach"
        several["spec"]["selector"] = "span.type =="
        several["spec"]["alerts"] = [{"when": "mean('x') < 0.5", "notify": "slack://chan", "secretEnv": "HOOK"}]
        status, body = post(url, several)
        message = body["message"]
        # Every problem in one answer, the unset signing secret too (it was reported only once the rest compiled)
        assert status == 400 and message.startswith("4 problems in the policy:")
        for path in ("spec.selector", "spec.cascade[0] (builtin/exact-mach)", "spec.alerts[0].notify",
                     "spec.alerts[0].secretEnv: the variable HOOK is not set"):
            assert f"  - {path}" in message, message

        wrong_kind = {**http_doc(), "kind": "EvalRun"}
        status, body = post(url, wrong_kind)
        assert status == 400 and body["message"] == "policy.kind: must be OnlineEvalPolicy, got 'EvalRun'"

        other = http_doc(labels={"evals.si/project": "support"})
        status, body = post(url, other, {"x-evalsi-project": "billing"})
        assert status == 400 and body["message"].startswith("policy.metadata.labels: evals.si/project='support'")
        status, body = post(url, other)  # without a header the label names the project
        assert status == 200 and body["project"] == "support"
        status, body = post(url, http_doc(labels={"evals.si/project": "a b"}))
        assert status == 400 and violations(body) == ["policy.metadata.labels[evals.si/project]"]

        status, body = post(url, {})
        assert status == 400 and body["message"].startswith("policy: the OnlineEvalPolicy document")
        assert violations(body) == ["policy"]
        status, body = post(url, {"spec": http_doc()["spec"]})
        assert status == 400 and body["message"] == "metadata.name: required"

    await asyncio.to_thread(calls)
    assert sorted(served.store.policies) == [("default", "prod"), ("support", "prod")]

    doc = policy_doc()
    doc["spec"]["cascade"][1]["ref"] = "builtin/nope"
    with (
        Client(f"grpc://{served.grpc_target}") as client,
        pytest.raises(BadInputError, match=r"spec.cascade\[1\] \(builtin/nope\): unknown evaluator"),
    ):
        await asyncio.to_thread(client.policies.apply, doc)


def expected_t(values: list[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    low, high = scipy_stats.t.interval(0.95, n - 1, loc=mean, scale=sd / n**0.5)
    return float(low), float(high)


def by_metric(metrics: Any) -> dict[str, MetricStats]:
    return {m.metric: m for m in metrics}


async def test_stats_per_metric_and_window_over_both_transports(served: Api) -> None:
    assert served.server is not None
    served.scores.add("default", *scores())
    served.scores.add("other", score(1, "no-ssn", NOW, passed=True))

    def calls(url: str) -> None:
        with Client(url) as client:
            client.policies.apply(policy_doc())
            everything = client.policies.stats("prod")
            assert everything.traces_evaluated == 11 and everything.window.ToSeconds() == 60
            assert not everything.HasField("start_time") and not everything.windows
            metrics = by_metric(everything.metrics)
            assert list(metrics) == ["exact-match", "no-ssn"]

            ssn = metrics["no-ssn"]
            passes = sum(PASSES)
            low, high = proportion_confint(passes, len(PASSES), alpha=0.05, method="wilson")
            assert (ssn.n, ssn.pass_fail, ssn.method, ssn.skipped, ssn.errors) == (9, True, "wilson", 0, 0)
            assert ssn.mean == pytest.approx(passes / 9)
            assert (ssn.ci_low, ssn.ci_high) == (pytest.approx(low), pytest.approx(high))
            assert (ssn.stage, ssn.evaluator) == ("no-ssn", "builtin/regex-match@1.0.0")

            grades = [g for g in GRADES if g is not None]
            judge = metrics["exact-match"]
            assert (judge.n, judge.pass_fail, judge.method, judge.level) == (7, False, "t", 0.95)
            assert (judge.skipped, judge.no_content, judge.errors) == (3, 1, 1)
            assert judge.mean == pytest.approx(sum(grades) / 7)
            assert (judge.ci_low, judge.ci_high) == tuple(pytest.approx(x) for x in expected_t(grades))

            # The last window only (the clock is inside the current minute), split per window.
            last = client.policies.stats("prod", last_windows=1, per_window=True)
            assert last.start_time.ToSeconds() == NOW and last.traces_evaluated == 7
            assert [w.start_time.ToSeconds() for w in last.windows] == [NOW]
            assert by_metric(last.metrics)["no-ssn"].n == 5

            two = client.policies.stats("prod", last_windows=2, per_window=True)
            assert [(w.start_time.ToSeconds(), w.end_time.ToSeconds(), w.traces_evaluated) for w in two.windows] == [
                (NOW - WINDOW, NOW, 4), (NOW, NOW + WINDOW, 7)]
            first = by_metric(two.windows[0].metrics)
            assert (first["no-ssn"].n, first["exact-match"].n, first["exact-match"].skipped) == (4, 3, 1)

            # A range aligns its start down to a window boundary; the end is exclusive.
            ranged = client.policies.stats(
                "prod", since=datetime.fromtimestamp(NOW - 30, UTC), until=datetime.fromtimestamp(NOW, UTC))
            assert ranged.start_time.ToSeconds() == NOW - WINDOW and ranged.traces_evaluated == 4

            one = client.policies.stats("prod", since=datetime.fromtimestamp(NOW - WINDOW, UTC),
                                        until=datetime.fromtimestamp(NOW - 52, UTC))
            single = by_metric(one.metrics)["exact-match"]  # trace 1's grade only: no t interval from one value
            assert single.n == 1 and single.mean == pytest.approx(0.9)
            assert not single.HasField("ci_low") and not single.HasField("std") and single.method == ""

            with pytest.raises(BadInputError, match="last_windows: give last_windows or start_time, not both"):
                client.policies.stats("prod", last_windows=2, since=datetime.fromtimestamp(NOW, UTC))
            with pytest.raises(BadInputError, match="end_time: must be after start_time"):
                client.policies.stats(
                    "prod", since=datetime.fromtimestamp(NOW, UTC), until=datetime.fromtimestamp(NOW - 100, UTC))
            with pytest.raises(BadInputError, match="policy 'missing' not found"):
                client.policies.stats("missing")

    for url in urls(served.server):
        await asyncio.to_thread(calls, url)


async def test_stats_per_window_evaluate_the_alert_rules(served: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each window answers every alert rule over its own figures: held, not held, or not evaluated (too few
    samples), with the figures read; without per_window there are no windows to answer in."""
    monkeypatch.setenv("HOOK_SECRET", "s")  # applying refuses an alert whose signing secret is unset
    served.scores.add("default", *scores())
    doc = policy_doc()
    hook = {"notify": "https://hooks.example/evalsi", "secretEnv": "HOOK_SECRET"}
    doc["spec"]["alerts"] = [
        {"when": "mean('no-ssn') < 0.78", "minSamples": 4, **hook},  # 3/4 = 0.75 then 4/5 = 0.8
        {"when": "mean('exact-match') > 0.5", "minSamples": 4, **hook},  # 3 grades, then 4 (mean 0.675)
    ]

    def call(url: str) -> PolicyStats:
        with Client(url) as client:
            client.policies.apply(doc)
            assert not client.policies.stats("prod").windows
            return client.policies.stats("prod", last_windows=2, per_window=True)

    assert served.server is not None
    for url in urls(served.server):
        stats = await asyncio.to_thread(call, url)
        first, second = stats.windows
        answers = [[(a.rule, a.when, a.evaluated, a.held) for a in w.alerts] for w in (first, second)]
        assert answers == [
            [(0, "mean('no-ssn') < 0.78", True, True), (1, "mean('exact-match') > 0.5", False, False)],
            [(0, "mean('no-ssn') < 0.78", True, False), (1, "mean('exact-match') > 0.5", True, True)],
        ]
        assert first.alerts[0].reason == "mean('no-ssn') = 0.75"
        assert first.alerts[1].reason == "not evaluated: exact-match: 3 of 4 samples"
        assert second.alerts[1].reason == "mean('exact-match') = 0.675"


async def test_a_stored_rule_that_no_longer_compiles_is_said_in_each_window(served: Api) -> None:
    """A document stored before a change of the rule language is not refused at read time: each window answers
    the rule as not evaluated, naming the problem."""
    document = OnlineEvalPolicy()
    document.metadata.name = "prod"
    document.spec.window.FromSeconds(60)
    document.spec.alerts.add(when="mean('no-ssn') <", notify="https://hooks.example/x", secret_env="HOOK_SECRET")
    await served.store.put_policy("default", document)
    served.scores.add("default", score(1, "no-ssn", NOW + 5, passed=True))
    assert served.server is not None
    url = f"http://127.0.0.1:{served.server.http_port}"

    def call() -> PolicyStats:
        with Client(url) as client:
            return client.policies.stats("prod", last_windows=1, per_window=True)

    (window,) = (await asyncio.to_thread(call)).windows
    (alert,) = window.alerts
    assert (alert.rule, alert.when, alert.evaluated, alert.held) == (0, "mean('no-ssn') <", False, False)
    assert alert.reason.startswith("does not compile: ")


async def test_without_stores_the_service_says_which_is_missing(registry: Registry) -> None:
    ctx = CallContext(method="GetPolicyStats", request_id="r")
    document = OnlineEvalPolicy()
    document.metadata.name = "prod"
    no_store = MonitorHandlers(None, None, registry=registry)
    with pytest.raises(ApiError, match="no policy store is configured") as caught:
        await no_store.apply_policy(ApplyPolicyRequest(policy=document), ctx)
    assert caught.value.code.name == "FAILED_PRECONDITION"

    from api_doubles import MemoryStore

    store = MemoryStore()
    await store.put_policy("default", document)
    no_traces = MonitorHandlers(store, None, registry=registry)
    with pytest.raises(ApiError, match="--traces-url") as caught:
        await no_traces.get_policy_stats(GetPolicyStatsRequest(name="prod"), ctx)
    assert caught.value.code.name == "FAILED_PRECONDITION"


async def test_stats_from_the_real_stores(api: Api, registry: Registry, tmp_path: Path) -> None:
    """SqlMetadataStore keeps the policy, SqliteTraceStore the scores its put_scores wrote; HTTP reads them."""
    metadata = await SqlMetadataStore.open_sqlite(tmp_path / "evalsi.db")
    traces = await SqliteTraceStore.open(tmp_path / "traces.db")
    await traces.put_scores("support", scores())
    monitor = MonitorHandlers(metadata, traces, registry=registry, clock=lambda: NOW + 55)
    table = build_table(evaluation=api.evaluation, runs=api.runs, catalog=api.catalog, monitor=monitor)
    server = ApiServer(table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0), readiness=api.readiness,
                       metrics=api.metrics)
    await server.start()

    def calls() -> PolicyStats:
        with Client(f"http://127.0.0.1:{server.http_port}", project="support") as client:
            assert client.policies.apply(policy_doc()).generation == 1
            return client.policies.stats("prod", last_windows=2, per_window=True)

    try:
        stats = await asyncio.to_thread(calls)
    finally:
        await server.stop()
        await traces.close()
        stored = await metadata.get_policy("support", "prod")
        await metadata.close()
    assert stored is not None and stored.generation == 1
    assert stats.traces_evaluated == 11 and len(stats.windows) == 2
    metrics = by_metric(stats.metrics)
    assert (metrics["no-ssn"].n, metrics["no-ssn"].method) == (9, "wilson")
    assert (metrics["exact-match"].n, metrics["exact-match"].skipped, metrics["exact-match"].no_content) == (7, 3, 1)
    assert metrics["exact-match"].errors == 1
