"""The policy engine on real parts: spans in a SQLite trace store, the core pack evaluated in-process, a local
webhook receiver, stored datasets in a directory, Prometheus and OTel event exports."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from prometheus_client import CollectorRegistry

from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.datasets.stored import DatasetStore
from evalsi.errors import InfraError
from evalsi.evaluators import Registry
from evalsi.ingest import map_span
from evalsi.policy import WebhookSender, compile_policy, parse_policy_text, verify
from evalsi.policy.engine import PolicyEngine, TraceNotReady
from evalsi.policy.exports import EVENT_NAME, GenAiEvaluationEvents, PrometheusScores
from evalsi.policy.promotion import DatasetPromoter
from evalsi.policy.stages import local_stage_evaluator
from evalsi.stores.objects import LocalObjectStore
from evalsi.stores.traces import SqliteTraceStore
from evalsi.traces import Feedback, OnlineScore

REGISTRY = Registry.from_entry_points()
SECRET = "s3cret"


def _policy(url: str, *, rate: float = 1.0, extra: str = "", min_samples: int = 2) -> Any:
    text = f"""
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: support, project: shop}}
spec:
  selector: 'resource["service.name"] == "support-agent"'
  sampling: {{rate: {rate}, always: ["trace.error", "feedback.negative"]}}
  cascade:
    - {{ref: builtin/contains, alias: polite, params: {{values: ["thanks", "thank you"]}}}}
    - {{ref: builtin/length, when: "score('polite') < 0.5", params: {{unit: words, max: 5}}}}
  window: 1h
  alerts:
    - {{when: "mean('polite') < 0.5", notify: "{url}", minSamples: {min_samples}, secretEnv: HOOK_SECRET}}
  promote: {{when: "score('polite') < 0.5", dataset: datasets/impolite}}
{extra}"""
    return compile_policy(parse_policy_text(text, source="policy.yaml"), registry=REGISTRY)


def make_span(attrs: dict[str, Any], *, span_id: int, trace_id: bytes, parent: int = 0) -> Span:
    return Span(trace_id=trace_id, span_id=span_id.to_bytes(8, "big"),
                parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=f"s{span_id}",
                start_time_unix_nano=1_000 + span_id, end_time_unix_nano=2_000,
                attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items()])


def _spans(byte: int, answer: str | None, *, service: str = "support-agent") -> list:
    trace_id = bytes([byte]) * 16
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    if answer is not None:
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [{"type": "text",
                                                                                      "content": answer}]}])
    root = make_span({"gen_ai.operation.name": "invoke_agent"}, span_id=1, trace_id=trace_id)
    chat = make_span(attrs, span_id=2, parent=1, trace_id=trace_id)
    return [map_span(s, {"service.name": service}) for s in (root, chat)]


class Hooks:
    def __init__(self) -> None:
        self.received: list[tuple[bytes, dict[str, str]]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((await request.read(), dict(request.headers)))
        return web.Response(status=204)


@pytest.fixture
async def hooks() -> AsyncIterator[tuple[Hooks, str]]:
    receiver = Hooks()
    app = web.Application()
    app.router.add_post("/hook", receiver.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield receiver, f"http://127.0.0.1:{port}/hook"
    await runner.cleanup()


async def test_cascade_scores_alerts_promotes_and_exports(tmp_path: Path, hooks: tuple[Hooks, str]) -> None:
    receiver, url = hooks
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    datasets = DatasetStore(LocalObjectStore(tmp_path / "objects"))
    registry = CollectorRegistry()
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    async with aiohttp.ClientSession() as session:
        engine = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(),
                              notifier=WebhookSender(session, attempts=1), promoter=DatasetPromoter(datasets),
                              observers=[PrometheusScores(registry), GenAiEvaluationEvents(provider)],
                              clock=lambda: 7200.0 + 60, env={"HOOK_SECRET": SECRET})
        engine.set_policies([_policy(url)])
        traces = {1: "thanks, all done", 2: "no", 3: "it is not possible to refund this order today", 4: None}
        for byte, answer in traces.items():
            await store.consume("shop", _spans(byte, answer))
        await store.consume("shop", _spans(5, "nope", service="billing"))  # not selected
        outcomes = {}
        for byte in (1, 2, 3, 4, 5):
            (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id=f"{byte:02x}" * 16,
                                                            revision=2))
            outcomes[byte] = outcome
        assert not outcomes[5].selected and outcomes[5].scores == []
        by_trace = {b: {(s.metric, s.outcome, s.value) for s in o.scores} for b, o in outcomes.items()}
        # Polite: the judge-free second stage never runs. Impolite: length decides. No output: no content.
        assert by_trace[1] == {("polite", "scored", 1.0), ("length", "skipped", None)}
        assert ("length.length", "scored", 1.0) in by_trace[2] and ("length.in_range", "scored", 1.0) in by_trace[2]
        assert ("length.in_range", "scored", 0.0) in by_trace[3]
        no_content = {s.metric: s.reason for s in outcomes[4].scores}
        assert no_content["polite"].startswith("no content") and no_content["length"].startswith("no content")

        stored = await store.list_scores("shop", policy="support")
        assert {(s.trace_id, s.metric) for s in stored} == {(f"{b:02x}" * 16, s.metric) for b in (1, 2, 3, 4)
                                                             for s in outcomes[b].scores}
        # Alert: polite mean < 0.5 holds once three traces are scored (1 of 3; 1 of 2 is not below); sent once.
        assert [o.alerts != [] for o in (outcomes[1], outcomes[2], outcomes[3])] == [False, False, True]
        ((body, headers),) = receiver.received
        assert verify(SECRET, body, headers["Evalsi-Signature"])
        alert = json.loads(body)
        assert alert["policy"] == "support" and alert["values"]["mean('polite')"] == pytest.approx(1 / 3)
        # Promotion: the two impolite traces, in one dataset, each as a new version.
        dataset = await datasets.load("shop", "datasets/impolite")
        assert [r.id for r in dataset.records] == ["02" * 16, "03" * 16]
        assert dataset.records[0].output.text == "no" and len(await datasets.versions("shop", "impolite")) == 2
        # Exports.
        sample = registry.get_sample_value
        assert sample("evalsi_online_scores_total", {"project": "shop", "policy": "support", "metric": "polite",
                                                     "outcome": "scored"}) == 3
        assert sample("evalsi_online_scores_total", {"project": "shop", "policy": "support", "metric": "polite",
                                                     "outcome": "skipped"}) == 1
        assert sample("evalsi_online_score_sum", {"project": "shop", "policy": "support", "metric": "polite"}) == 1
        events = [log.log_record for log in exporter.get_finished_logs()]
        assert {e.event_name for e in events} == {EVENT_NAME}
        first = next(e for e in events if e.attributes["gen_ai.evaluation.name"] == "polite"
                     and e.attributes["gen_ai.evaluation.score.value"] == 1.0)
        assert first.attributes["gen_ai.evaluation.score.label"] == "pass"
        assert f"{first.trace_id:032x}" == "01" * 16 and f"{first.span_id:016x}" == "0000000000000001"
    await store.close()


async def test_redelivery_and_late_revisions_do_not_double_count(tmp_path: Path) -> None:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        engine = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(), clock=lambda: 100.0)
        engine.set_policies([_policy("http://127.0.0.1:9/never")])
        await store.consume("shop", _spans(1, "thanks"))
        for revision in (2, 2, 3):
            await engine.handle(TraceCompleted(project="shop", trace_id="01" * 16, revision=revision))
        scores = await store.list_scores("shop")
        assert sorted((s.metric, s.revision) for s in scores) == [("length", 3), ("polite", 3)]  # length: skipped
        state = engine._state[("shop", "support")]
        assert state.windows.aggregates(0.0)["polite"].n == 1  # counted once in its window
    finally:
        await store.close()


async def test_sampling_feedback_and_not_ready(tmp_path: Path) -> None:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        engine = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator())
        engine.set_policies([_policy("http://127.0.0.1:9/never", rate=0.0)])
        with pytest.raises(TraceNotReady):
            await engine.handle(TraceCompleted(project="shop", trace_id="09" * 16, revision=1))
        assert isinstance(TraceNotReady("x"), InfraError)
        await store.consume("shop", _spans(1, "thanks"))
        (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id="01" * 16, revision=2))
        assert outcome.selected and not outcome.sampled and outcome.scores == []
        await store.put_feedback("shop", [Feedback(id="f", trace_id="01" * 16, session_id="", name="thumbs",
                                                   value=-1, negative=True)])
        (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id="01" * 16, revision=2,
                                                        reason="feedback"))
        assert outcome.sampled and outcome.reasons == ("feedback.negative",) and outcome.scores
        assert await engine.handle(TraceCompleted(project="elsewhere", trace_id="01" * 16)) == []
    finally:
        await store.close()


async def _handle(engine: PolicyEngine, byte: int) -> list[str]:
    (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id=f"{byte:02x}" * 16, revision=2))
    return outcome.alerts


def _polite_n(engine: PolicyEngine, start: float) -> int:
    aggregate = engine._state[("shop", "support")].windows.aggregates(start).get("polite")
    return aggregate.n if aggregate is not None else 0


async def test_restart_restores_the_current_window_from_stored_scores(tmp_path: Path,
                                                                      hooks: tuple[Hooks, str]) -> None:
    receiver, url = hooks
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        for byte, answer in {1: "thanks, all done", 2: "no", 3: "it is not possible to refund this order"}.items():
            await store.consume("shop", _spans(byte, answer))
        policy = _policy(url, min_samples=3)
        env = {"HOOK_SECRET": SECRET}
        async with aiohttp.ClientSession() as session:
            before = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(),
                                  notifier=WebhookSender(session, attempts=1), clock=lambda: 7200.0 + 60, env=env)
            before.set_policies([policy])
            assert await _handle(before, 1) == [] and await _handle(before, 2) == []  # 2 of 3 samples
            # The restart: a new engine over the same store, later in the same window.
            after = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(),
                                 notifier=WebhookSender(session, attempts=1), clock=lambda: 7200.0 + 600, env=env)
            after.set_policies([policy])
            # polite of both traces, and trace 2's length.length and length.in_range (trace 1's length skipped).
            assert await after.restore_windows() == 4
            assert _polite_n(after, 7200.0) == 2
            assert await _handle(after, 2) == [] and _polite_n(after, 7200.0) == 2  # re-handled: counted once
            # The third sample comes after the restart: the rule reads all three and fires.
            assert len(await _handle(after, 3)) == 1 and _polite_n(after, 7200.0) == 3
            ((body, _headers),) = receiver.received
            assert json.loads(body)["values"]["mean('polite')"] == pytest.approx(1 / 3)
            # Reloading the same policies keeps the restored window: nothing is read or added again.
            after.set_policies([policy])
            assert await after.restore_windows() == 0 and _polite_n(after, 7200.0) == 3
    finally:
        await store.close()


async def test_restore_skips_scores_of_earlier_windows(tmp_path: Path) -> None:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        await store.consume("shop", _spans(1, "thanks, all done"))
        await store.consume("shop", _spans(2, "thank you"))
        now = [3600.0 + 3599]  # the last second of the window [3600, 7200)
        before = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(), clock=lambda: now[0])
        before.set_policies([_policy("http://127.0.0.1:9/never")])
        await _handle(before, 1)
        now[0] = 7200.0  # the first second of the next window
        await _handle(before, 2)
        now[0] = 7200.0 + 30
        after = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(), clock=lambda: now[0])
        after.set_policies([_policy("http://127.0.0.1:9/never")])
        assert await after.restore_windows() == 1  # trace 2's polite only
        windows = after._state[("shop", "support")].windows
        assert windows.windows() == [7200.0] and _polite_n(after, 7200.0) == 1 and _polite_n(after, 3600.0) == 0
    finally:
        await store.close()


class FlakyScores:
    """The trace store's scores, whose reads fail with ``InfraError`` while ``failing`` (a store restarting)."""

    def __init__(self, store: SqliteTraceStore) -> None:
        self.store = store
        self.failing = True
        self.reads = 0

    async def put_scores(self, project: str, scores: Sequence[OnlineScore]) -> None:
        await self.store.put_scores(project, scores)

    async def list_scores(self, project: str, *, trace_id: str | None = None, policy: str | None = None,
                          since: float | None = None, until: float | None = None) -> list[OnlineScore]:
        self.reads += 1
        if self.failing:
            raise InfraError("trace store unavailable")
        return await self.store.list_scores(project, trace_id=trace_id, policy=policy, since=since, until=until)


async def test_restore_failure_is_logged_and_retried(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    try:
        await store.consume("shop", _spans(1, "thanks, all done"))
        await store.consume("shop", _spans(2, "thank you"))
        before = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(), clock=lambda: 100.0)
        before.set_policies([_policy("http://127.0.0.1:9/never")])
        await _handle(before, 1)
        flaky = FlakyScores(store)
        after = PolicyEngine(traces=store, scores=flaky, evaluate=local_stage_evaluator(), clock=lambda: 200.0)
        after.set_policies([_policy("http://127.0.0.1:9/never")])
        with caplog.at_level(logging.WARNING, logger="evalsi.policy"):
            assert await after.restore_windows() == 0
        (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "shop/support" in warning.getMessage() and "trace store unavailable" in warning.getMessage()
        assert _polite_n(after, 0.0) == 0
        # Still usable: a trace is scored, stored and counted meanwhile.
        await _handle(after, 2)
        assert _polite_n(after, 0.0) == 1 and len(await store.list_scores("shop", trace_id="02" * 16)) == 2
        # The next reload's restore retries: trace 1 is added, trace 2 (already counted) is not added again.
        flaky.failing = False
        assert await after.restore_windows() == 1 and _polite_n(after, 0.0) == 2
        reads = flaky.reads
        assert await after.restore_windows() == 0 and flaky.reads == reads  # restored: not read again
    finally:
        await store.close()
