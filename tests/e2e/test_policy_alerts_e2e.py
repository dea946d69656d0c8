"""Alerts fired, end to end, every part its own process: traces sent by the OpenTelemetry SDK's exporter to
evalsi-ingest, scored by evalsi-policy, whose rule holds in two windows; the local webhook answers the first alert
200 and the second 500, and evalsi-policy records them as delivered and failed in the metadata store, read back
through ListPolicyAlerts by the client, over HTTP/JSON (paged) and by `evalsi policies alerts`."""

from __future__ import annotations

import http.server
import json
import math
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import evalsi
from evalsi.cli.main import cli
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.monitor_service_pb2 import ALERT_DELIVERY_DELIVERED, ALERT_DELIVERY_FAILED, FiredAlert

WINDOW_S = 5


class _FirstOkThenFailing(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        type(self).received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200 if len(type(self).received) == 1 else 500)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def webhook() -> Iterator[tuple[type[_FirstOkThenFailing], str]]:
    _FirstOkThenFailing.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FirstOkThenFailing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield _FirstOkThenFailing, f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def _send(endpoint: str, answer: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("e2e")
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}])}
    with (tracer.start_as_current_span("invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}),
          tracer.start_as_current_span("chat m", attributes=chat)):
        pass
    provider.shutdown()


def _eventually(check: Any, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except (AssertionError, LookupError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_alerts_are_recorded_delivered_then_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   webhook: tuple[type[_FirstOkThenFailing], str]) -> None:
    receiver, url = webhook
    monkeypatch.setenv("HOOK_SECRET", "e2e-secret")  # evalsi-policy signs the alerts with it
    stack = Stack(tmp_path, ingest_grace_s=0.5, judge_workers=0, harness_workers=0).start()
    try:
        otlp = f"http://127.0.0.1:{stack.config.ingest.http_port}/v1/traces"
        with evalsi.Client(stack.http) as client:
            client.policies.apply({
                "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": "support"},
                "spec": {
                    "sampling": {"rate": 1.0},
                    "cascade": [{"ref": "builtin/contains", "alias": "polite", "params": {"values": ["thanks"]}}],
                    "window": f"{WINDOW_S}s",
                    "alerts": [{"when": "mean('polite') < 0.5", "notify": url, "minSamples": 1,
                                "secretEnv": "HOOK_SECRET"}],
                },
            })

            def recorded(n: int) -> list[FiredAlert]:
                alerts = list(client.policies.alerts("support"))
                assert len(alerts) == n
                return alerts

            # evalsi-policy reloads stored policies every few seconds: resend until one is scored and alerted on.
            def first_alert() -> list[FiredAlert]:
                _send(otlp, "no")
                return _eventually(lambda: recorded(1), timeout_s=8)

            (delivered,) = _eventually(first_alert, timeout_s=60)
            # The next impolite trace in a later window: the webhook now answers 500 to every attempt.
            now = time.time()
            time.sleep(math.ceil(now / WINDOW_S) * WINDOW_S - now + 0.2)
            _send(otlp, "still no")
            failed, again = _eventually(lambda: recorded(2), timeout_s=90)
        # The same records over HTTP/JSON (one a page) and as `evalsi policies alerts` prints them.
        with urllib.request.urlopen(f"{stack.http}/v1alpha1/policies/support/alerts?pageSize=1", timeout=10) as answer:
            page = json.loads(answer.read())
        assert [a["key"] for a in page["alerts"]] == [failed.key] and page["nextPageToken"]
        assert page["alerts"][0]["delivery"] == "ALERT_DELIVERY_FAILED" and page["alerts"][0]["httpStatus"] == 500
        printed = CliRunner().invoke(cli, ["policies", "alerts", "support", "--server", stack.http])
        assert printed.exit_code == 0, printed.output
        assert "failed (HTTP 500) after 5 attempts" in printed.output and "delivered (HTTP 200)" in printed.output
        assert printed.output.index("failed (HTTP") < printed.output.index("delivered (HTTP")  # newest first
        missing = CliRunner().invoke(cli, ["policies", "alerts", "missing", "--server", stack.http])
        assert missing.exit_code == 2 and "policy 'missing' not found" in missing.output
    finally:
        stack.stop()
    assert again == delivered
    assert (delivered.delivery, delivered.http_status, delivered.attempts) == (ALERT_DELIVERY_DELIVERED, 200, 1)
    assert (failed.delivery, failed.http_status, failed.error) == (ALERT_DELIVERY_FAILED, 500, "HTTP 500")
    assert failed.attempts == 5  # WebhookSender's tries, every one answered 500
    assert failed.window_start_time.ToSeconds() > delivered.window_start_time.ToSeconds()
    assert delivered.values["mean('polite')"] == 0.0 and delivered.when == "mean('polite') < 0.5"
    assert [hook["key"] for hook in receiver.received] == [delivered.key] + [failed.key] * 5
