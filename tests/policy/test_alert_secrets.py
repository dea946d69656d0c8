"""Alerts are never signed with an empty key: a policy whose alert names no signing secret, or one that is unset,
is refused when applied (400 naming the variable) or loaded from a file (exit 2); the engine never sends an alert
without its secret and says so once; the signer itself refuses an empty key."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from aiohttp import web
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.api import MonitorHandlers
from evalsi.api.context import CallContext
from evalsi.api.errors import error_status
from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.ingest import map_span
from evalsi.policy import WebhookSender, compile_policy, parse_policy_text, sign, unset_alert_secrets, verify
from evalsi.policy.engine import PolicyEngine
from evalsi.policy.stages import local_stage_evaluator
from evalsi.stores import SqlMetadataStore
from evalsi.stores.traces import SqliteTraceStore
from evalsi.v1alpha1.monitor_service_pb2 import ApplyPolicyRequest

REGISTRY = Registry.from_entry_points()
VARIABLE = "EVALSI_TEST_HOOK_SECRET_7D2"  # set by no one


def policy_text(url: str, secret_line: str = f"secretEnv: {VARIABLE}") -> str:
    return f"""
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: support, project: shop}}
spec:
  sampling: {{rate: 1.0}}
  cascade:
    - {{ref: builtin/contains, alias: polite, params: {{values: ["thanks"]}}}}
  window: 1h
  alerts:
    - when: "mean('polite') < 0.5"
      notify: "{url}"
      {secret_line}
"""


def test_an_alert_without_a_signing_secret_does_not_compile() -> None:
    for line, message in (
        ("minSamples: 1", "spec.alerts[0].secretEnv: required: the environment variable holding the webhook signing "
                          "secret (alerts are never sent unsigned)"),
        ("secretEnv: 'HOOK SECRET'", "spec.alerts[0].secretEnv: 'HOOK SECRET' is not an environment variable name"),
    ):
        with pytest.raises(BadInputError) as raised:
            compile_policy(parse_policy_text(policy_text("http://127.0.0.1:9/hook", line), source="p.yaml"),
                           registry=REGISTRY)
        assert str(raised.value).startswith(message)


def test_unset_and_empty_variables_are_named() -> None:
    policy = parse_policy_text(policy_text("http://127.0.0.1:9/hook"), source="p.yaml")
    for environ in ({}, {VARIABLE: ""}):
        assert unset_alert_secrets(policy, environ) == [
            f"spec.alerts[0].secretEnv: the variable {VARIABLE} is not set (or empty) in the server's environment; "
            "set it, to the webhook's signing secret, for evalsi-api and evalsi-policy, then apply again"
        ]
    assert unset_alert_secrets(policy, {VARIABLE: "k"}) == []


async def test_apply_refuses_a_policy_whose_secret_is_unset_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await SqlMetadataStore.open_sqlite(tmp_path / "evalsi.db")
    try:
        monitor = MonitorHandlers(store, None, registry=REGISTRY)
        document = parse_policy_text(policy_text("http://127.0.0.1:9/hook"), source="p.yaml")
        ctx = CallContext(method="ApplyPolicy", request_id="r1")
        monkeypatch.delenv(VARIABLE, raising=False)
        with pytest.raises(BadInputError) as raised:
            await monitor.apply_policy(ApplyPolicyRequest(policy=document), ctx)
        status = error_status(raised.value, request_id="r1", method="ApplyPolicy", logger=logging.getLogger())
        assert (status.http_status, status.code) == (400, grpc.StatusCode.INVALID_ARGUMENT)
        assert status.field == "spec.alerts[0].secretEnv" and VARIABLE in status.message
        assert await store.list_policies("shop") == []
        monkeypatch.setenv(VARIABLE, "a-real-secret")
        applied = await monitor.apply_policy(ApplyPolicyRequest(policy=document), ctx)
        assert (applied.name, applied.generation) == ("support", 1)
    finally:
        await store.close()


def test_the_policy_service_refuses_a_policy_file_whose_secret_is_unset(tmp_path: Path) -> None:
    path = tmp_path / "support.yaml"
    path.write_text(policy_text("http://127.0.0.1:9/hook"))
    environ = {k: v for k, v in os.environ.items() if k != VARIABLE}
    done = subprocess.run(
        [sys.executable, "-m", "evalsi_policy.main", "--policy", str(path), "--nats", "nats://127.0.0.1:1",
         "--traces-url", f"sqlite:///{tmp_path / 'traces.db'}"],
        capture_output=True, text=True, timeout=60, env=environ,
    )
    assert done.returncode == 2, done.stderr
    assert f"evalsi-policy: --policy {path}: spec.alerts[0].secretEnv: the variable {VARIABLE} is not set" in (
        done.stderr
    )


class Hooks:
    def __init__(self) -> None:
        self.received: list[tuple[bytes, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.received.append((await request.read(), request.headers.get("Evalsi-Signature", "")))
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


def make_span(attrs: dict[str, str], *, span_id: int, trace_id: bytes, parent: int = 0) -> Span:
    return Span(trace_id=trace_id, span_id=span_id.to_bytes(8, "big"),
                parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=f"s{span_id}",
                start_time_unix_nano=1_000 + span_id, end_time_unix_nano=2_000,
                attributes=[KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs.items()])


async def _impolite_traces(store: SqliteTraceStore, first: int, count: int) -> list[str]:
    ids = []
    for byte in range(first, first + count):
        trace_id = bytes([byte]) * 16
        root = make_span({"gen_ai.operation.name": "invoke_agent"}, span_id=1, trace_id=trace_id)
        chat = make_span({"gen_ai.operation.name": "chat", "gen_ai.output.messages":
                          '[{"role": "assistant", "parts": [{"type": "text", "content": "no"}]}]'},
                         span_id=2, parent=1, trace_id=trace_id)
        await store.consume("shop", [map_span(s, {"service.name": "support-agent"}) for s in (root, chat)])
        ids.append(trace_id.hex())
    return ids


async def test_the_engine_sends_no_unsigned_alert_and_says_so_once(
    tmp_path: Path, hooks: tuple[Hooks, str], caplog: pytest.LogCaptureFixture
) -> None:
    receiver, url = hooks
    policy = compile_policy(parse_policy_text(policy_text(url), source="p.yaml"), registry=REGISTRY)
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    now = {"t": 3600.0 * 10 + 5}
    environ: dict[str, str] = {}
    try:
        async with aiohttp.ClientSession() as session:
            engine = PolicyEngine(traces=store, scores=store, evaluate=local_stage_evaluator(),
                                  notifier=WebhookSender(session, attempts=1), clock=lambda: now["t"], env=environ)
            engine.set_policies([policy])
            with caplog.at_level(logging.ERROR, logger="evalsi.policy"):
                # Two windows in which the rule holds: neither alert goes out, one error says why.
                for first in (1, 2):
                    (trace_id,) = await _impolite_traces(store, first, 1)
                    (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id=trace_id, revision=1))
                    assert outcome.scores and outcome.alerts == []
                    now["t"] += 3600
            assert receiver.received == []
            errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
            assert errors == [
                f"alerts of policy shop/support (spec.alerts[0], to {url}) are NOT sent: the signing secret variable "
                f"{VARIABLE} is unset or empty in evalsi-policy's environment; set it and restart evalsi-policy"
            ]
            # Once the secret is there, the next window's alert goes out, signed with it.
            environ[VARIABLE] = "k-42"
            (trace_id,) = await _impolite_traces(store, 3, 1)
            (outcome,) = await engine.handle(TraceCompleted(project="shop", trace_id=trace_id, revision=1))
            assert len(outcome.alerts) == 1
            ((body, signature),) = receiver.received
            assert verify("k-42", body, signature) and not verify("", body, signature)
    finally:
        await store.close()


async def test_the_signer_and_sender_refuse_an_empty_key(hooks: tuple[Hooks, str]) -> None:
    receiver, url = hooks
    with pytest.raises(ValueError, match="empty secret"):
        sign("", b"{}", 1)
    async with aiohttp.ClientSession() as session:
        with pytest.raises(ValueError, match=f"refusing to send an unsigned alert to {url}"):
            await WebhookSender(session, attempts=1).send(url, b"{}", secret="")
    assert receiver.received == []
