"""A served stack holding real Watch data for the traces and policies pages: traces sent over OTLP/HTTP by the
OpenTelemetry SDK's own exporter, an online policy that scored them in two windows, an alert that fired (POSTed,
signed, to a local webhook) and the failing traces promoted into a stored dataset. One turn has a priced LLM step
(OpenInference's ``llm.cost.total``), so the trace page shows a cost where the others show it unknown."""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

import evalsi
from evalsi.testing.stack import Stack

POLICY = "support"
DATASET = "impolite"
WINDOW_S = 6
T = TypeVar("T")


@dataclass(frozen=True)
class Turn:
    """One agent turn, sent as a trace: the agent span, a chat span, and a tool call when ``tool`` is set."""

    name: str
    answer: str
    session: str
    service: str = "support-agent"
    tool: dict[str, Any] | None = None
    tool_fails: bool = False
    # When set, a moderation call before the chat, as OpenInference reports it with its cost in USD.
    cost: float | None = None


# The first window: a polite answer with a tool call, two impolite ones (one whose tool call failed), and a trace
# of another service that the policy does not select. The second window: one polite, one impolite.
FIRST = (
    Turn("shipped", "thanks, order A-17 has shipped", "s-1", tool={"order_id": "A-17", "notify": True}),
    Turn("curt", "no", "s-2"),
    Turn("refused", "I will not refund that order", "s-3", tool={"order_id": "B-4"}, tool_fails=True),
    Turn("billing", "no", "s-4", service="billing"),
)
SECOND = (Turn("later", "thanks, all done", "s-5", cost=0.0042), Turn("later-curt", "no", "s-6"))


@dataclass
class WatchData:
    stack: Stack
    # By turn name.
    traces: dict[str, str]
    alerts: list[bytes] = field(default_factory=list)

    @property
    def ui(self) -> str:
        return f"{self.stack.http}/ui/"


class _Hooks(http.server.BaseHTTPRequestHandler):
    received: list[bytes]

    def do_POST(self) -> None:
        self.received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@contextlib.contextmanager
def _webhook() -> Iterator[tuple[str, list[bytes]]]:
    received: list[bytes] = []
    handler = type("Hooks", (_Hooks,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()


def policy_document(hook: str) -> dict[str, Any]:
    return {
        "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "selector": 'resource["service.name"] == "support-agent"',
            "sampling": {"rate": 1.0},
            "cascade": [{"ref": "builtin/contains", "alias": "polite", "params": {"values": ["thanks"]}}],
            "window": f"{WINDOW_S}s",
            "alerts": [{"when": "mean('polite') < 0.5", "notify": hook, "minSamples": 2, "secretEnv": "HOOK_SECRET"}],
            "promote": {"when": "score('polite') < 0.5", "dataset": f"datasets/{DATASET}"},
        },
    }


def send_turns(endpoint: str, turns: tuple[Turn, ...]) -> dict[str, str]:
    """Each turn as one trace through the SDK's OTLP/HTTP exporter; returns the trace ids by turn name."""
    ids: dict[str, str] = {}
    for service in dict.fromkeys(turn.service for turn in turns):
        provider = TracerProvider(resource=Resource.create({"service.name": service}))
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        tracer = provider.get_tracer("ui-tests")
        for turn in (t for t in turns if t.service == service):
            with tracer.start_as_current_span(f"invoke_agent {service}", attributes={
                    "gen_ai.operation.name": "invoke_agent", "session.id": turn.session}) as root:
                if turn.tool is not None:
                    with tracer.start_as_current_span("execute_tool lookup_order", attributes={
                            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                            "gen_ai.tool.call.id": f"call-{turn.name}",
                            "gen_ai.tool.call.arguments": json.dumps(turn.tool),
                            "gen_ai.tool.call.result": json.dumps({"status": "shipped"})}) as tool:
                        if turn.tool_fails:
                            tool.set_status(Status(StatusCode.ERROR, "order service unavailable"))
                if turn.cost is not None:
                    with tracer.start_as_current_span("moderation", attributes={
                            "openinference.span.kind": "LLM", "llm.model_name": "guard",
                            "llm.token_count.prompt": 5, "llm.token_count.completion": 1,
                            "llm.cost.total": turn.cost}):
                        pass
                with tracer.start_as_current_span("chat m", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                        "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3,
                        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                            {"type": "text", "content": f"where is my order? ({turn.name})"}]}]),
                        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                            {"type": "text", "content": turn.answer}]}])}):
                    pass
                ids[turn.name] = f"{root.get_span_context().trace_id:032x}"
        provider.shutdown()
    return ids


def eventually(check: Callable[[], T], timeout_s: float = 90.0) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except (AssertionError, LookupError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _sleep_to_next_window() -> None:
    now = time.time()
    time.sleep(math.ceil(now / WINDOW_S) * WINDOW_S - now + 0.2)


def _in_force(log: Path) -> None:
    lines = [line for line in log.read_text(errors="replace").splitlines() if "policies in force:" in line]
    assert lines and f"default/{POLICY}" in lines[-1]


@contextlib.contextmanager
def served_watch(tmp: Path) -> Iterator[WatchData]:
    """The stack with its data in place: every selected trace scored in its window, the alert fired and both
    impolite traces of the first window promoted."""
    with pytest.MonkeyPatch.context() as patch, _webhook() as (hook, received):
        patch.setenv("HOOK_SECRET", "ui-hook-secret")  # evalsi-policy signs alerts with it
        stack = Stack(tmp, ingest_grace_s=0.5, judge_workers=0, harness_workers=0).start()
        try:
            otlp = f"http://127.0.0.1:{stack.config.ingest.http_port}/v1/traces"
            with evalsi.Client(stack.http) as client:
                client.policies.apply(policy_document(hook))
                log = stack.supervisor.child("policy").log_path
                eventually(lambda: _in_force(log))

                def scored(ids: dict[str, str]) -> None:
                    for name, trace_id in ids.items():
                        if name != "billing":
                            assert client.traces.get(trace_id).scores

                # Each batch sent at the start of a window, so its traces are scored in one window: the alert
                # holds only over the whole first batch (shipped and curt alone have a mean of 0.5), and a batch
                # that straddled a boundary on a slow machine would never fire it.
                _sleep_to_next_window()
                traces = send_turns(otlp, FIRST)
                eventually(lambda: scored(traces))
                # The second batch in the next window, so the chart has two points.
                _sleep_to_next_window()
                later = send_turns(otlp, SECOND)
                eventually(lambda: scored(later))
                traces.update(later)
                eventually(lambda: received[0])

                def promoted() -> None:
                    assert max((v.records for v in client.datasets.versions(DATASET)), default=0) >= 2

                eventually(promoted)
            yield WatchData(stack, traces, received)
        finally:
            stack.stop()
