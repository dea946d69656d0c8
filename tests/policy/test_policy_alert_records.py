"""Each alert the policy engine fires is recorded in the metadata store (a real SQLite one) with what became of its
webhook: delivered, failed with the status (a receiver answering 200, then 500), or not sent and why. A redelivered
trace, or a restart, never records or sends an alert twice; an alert store that fails is retried with the trace."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.errors import InfraError
from evalsi.evaluators import Registry
from evalsi.ingest import map_span
from evalsi.policy import WebhookSender, compile_policy, parse_policy_text
from evalsi.policy.engine import PolicyEngine
from evalsi.policy.stages import local_stage_evaluator
from evalsi.stores import FiredAlert, SqlMetadataStore, open_metadata_store
from evalsi.stores.traces import SqliteTraceStore

REGISTRY = Registry.from_entry_points()
SECRET = "s3cret"
WINDOW_S = 60.0


def _policy(url: str, *, secret_env: str = "HOOK_SECRET") -> Any:
    text = f"""
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: support, project: shop}}
spec:
  sampling: {{rate: 1.0}}
  cascade: [{{ref: builtin/contains, alias: polite, params: {{values: ["thanks"]}}}}]
  window: 1m
  alerts: [{{when: "mean('polite') < 0.5", notify: "{url}", minSamples: 1, secretEnv: {secret_env}}}]
"""
    return compile_policy(parse_policy_text(text, source="policy.yaml"), registry=REGISTRY)


def _spans(byte: int, answer: str) -> list:
    trace_id = bytes([byte]) * 16
    messages = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])
    spans = [
        Span(trace_id=trace_id, span_id=(1).to_bytes(8, "big"), name="agent", start_time_unix_nano=1_000,
             end_time_unix_nano=2_000, attributes=[KeyValue(key="gen_ai.operation.name",
                                                            value=AnyValue(string_value="invoke_agent"))]),
        Span(trace_id=trace_id, span_id=(2).to_bytes(8, "big"), parent_span_id=(1).to_bytes(8, "big"), name="chat",
             start_time_unix_nano=1_100, end_time_unix_nano=1_900, attributes=[
                 KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat")),
                 KeyValue(key="gen_ai.output.messages", value=AnyValue(string_value=messages))]),
    ]
    return [map_span(s, {"service.name": "support-agent"}) for s in spans]


class Receiver:
    """A webhook that answers 200 to the first alert and 500 to every later POST."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append(json.loads(await request.read()))
        return web.Response(status=200 if len(self.received) == 1 else 500)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    hooks = Receiver()
    app = web.Application()
    app.router.add_post("/hook", hooks.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield hooks, f"http://127.0.0.1:{port}/hook"
    await runner.cleanup()


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SqliteTraceStore, SqlMetadataStore]]:
    traces = await SqliteTraceStore.open(tmp_path / "traces.db")
    metadata = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    try:
        for byte in (1, 2, 3):
            await traces.consume("shop", _spans(byte, "no"))
        yield traces, metadata
    finally:
        await metadata.close()
        await traces.close()


def _engine(traces: SqliteTraceStore, alerts: Any, session: aiohttp.ClientSession | None,
            clock: Callable[[], float], env: dict[str, str] | None = None) -> PolicyEngine:
    async def no_wait(_: float) -> None:
        return None

    notifier = WebhookSender(session, attempts=3, sleep=no_wait) if session is not None else None
    return PolicyEngine(traces=traces, scores=traces, evaluate=local_stage_evaluator(), notifier=notifier,
                        alerts=alerts, clock=clock, env={"HOOK_SECRET": SECRET} if env is None else env)


async def _handle(engine: PolicyEngine, byte: int) -> list[str]:
    (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id=f"{byte:02x}" * 16, revision=2))
    return outcome.alerts


async def test_delivered_then_failed_each_recorded_once(
        stores: tuple[SqliteTraceStore, SqlMetadataStore], receiver: tuple[Receiver, str]) -> None:
    traces, metadata = stores
    hooks, url = receiver
    now = [600.0 + 5]
    async with aiohttp.ClientSession() as session:
        engine = _engine(traces, metadata, session, lambda: now[0])
        engine.set_policies([_policy(url)])
        assert len(await _handle(engine, 1)) == 1  # the first window: the webhook answers 200
        assert await _handle(engine, 1) == []  # the same trace redelivered: nothing fires again
        # A restart (a fresh engine, its windows rebuilt from the stored scores): the rule holds again in the same
        # window, but the alert is recorded, so it is neither sent nor recorded twice.
        restarted = _engine(traces, metadata, session, lambda: now[0])
        restarted.set_policies([_policy(url)])
        assert await restarted.restore_windows() == 1
        assert await _handle(restarted, 2) == []
        assert len(hooks.received) == 1
        now[0] = 660.0 + 5  # the next window: every attempt answered 500
        assert await _handle(restarted, 3) == []
    assert len(hooks.received) == 1 + 3
    alerts, token = await metadata.list_policy_alerts("shop", "support")
    assert token == "" and [(a.window_start, a.delivery) for a in alerts] == [(660.0, "failed"), (600.0, "delivered")]
    failed, delivered = alerts
    assert (delivered.http_status, delivered.attempts, delivered.error) == (200, 1, "")
    assert (failed.http_status, failed.attempts, failed.error) == (500, 3, "HTTP 500")
    assert delivered.key == hooks.received[0]["key"] and failed.key == hooks.received[1]["key"]
    assert (delivered.rule, delivered.when, delivered.window_end) == (0, "mean('polite') < 0.5", 600.0 + WINDOW_S)
    assert delivered.values == {"mean('polite')": 0.0} and delivered.fired_at == 605.0
    assert delivered.notify == url
    assert await metadata.list_policy_alerts("other", "support") == ([], "")


async def test_not_sent_alerts_say_why(stores: tuple[SqliteTraceStore, SqlMetadataStore]) -> None:
    traces, metadata = stores
    unsigned = _engine(traces, metadata, None, lambda: 605.0)
    unsigned.set_policies([_policy("http://127.0.0.1:9/hook")])
    await _handle(unsigned, 1)
    async with aiohttp.ClientSession() as session:
        secretless = _engine(traces, metadata, session, lambda: 665.0, env={})
        secretless.set_policies([_policy("http://user:pw@127.0.0.1:9/hook")])
        await _handle(secretless, 2)
    later, earlier = (await metadata.list_policy_alerts("shop", "support"))[0]
    assert (earlier.delivery, earlier.attempts, earlier.http_status) == ("not_sent", 0, None)
    assert earlier.error == "no webhook sender: this engine sends no alerts"
    assert later.delivery == "not_sent" and "signing secret variable HOOK_SECRET is unset" in later.error
    assert later.notify == "http://user:***@127.0.0.1:9/hook"  # the password is not stored


class FailingOnce:
    """The real store, whose first record fails as a database restarting would."""

    def __init__(self, store: SqlMetadataStore) -> None:
        self.store = store
        self.failures = 1

    async def get_policy_alert(self, project: str, policy: str, key: str) -> FiredAlert | None:
        return await self.store.get_policy_alert(project, policy, key)

    async def record_policy_alert(self, project: str, alert: FiredAlert) -> bool:
        if self.failures:
            self.failures -= 1
            raise InfraError("metadata store restarting")
        return await self.store.record_policy_alert(project, alert)

    async def list_policy_alerts(self, project: str, policy: str, *, page_size: int = 50,
                                 page_token: str = "") -> tuple[Sequence[FiredAlert], str]:
        return await self.store.list_policy_alerts(project, policy, page_size=page_size, page_token=page_token)


async def test_a_failed_record_fires_again_when_the_trace_is_retried(
        stores: tuple[SqliteTraceStore, SqlMetadataStore], receiver: tuple[Receiver, str]) -> None:
    traces, metadata = stores
    hooks, url = receiver
    async with aiohttp.ClientSession() as session:
        engine = _engine(traces, FailingOnce(metadata), session, lambda: 605.0)
        engine.set_policies([_policy(url)])
        with pytest.raises(InfraError, match="restarting"):
            await _handle(engine, 1)
        assert await metadata.list_policy_alerts("shop", "support") == ([], "")
        await _handle(engine, 1)  # the bus redelivers the trace: the alert fires, is sent and recorded
    (alert,) = (await metadata.list_policy_alerts("shop", "support"))[0]
    # Sent twice with one key (Evalsi-Delivery lets the receiver drop the repeat); the retry got the 500.
    assert [h["key"] for h in hooks.received] == [alert.key] * 4
    assert alert.delivery == "failed" and alert.http_status == 500
