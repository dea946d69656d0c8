"""Watch end to end, every part its own process: traces sent by the OpenTelemetry SDK's OTLP exporter to
evalsi-ingest → completed and published on the bus → evalsi-policy selects, samples and cascades them through
the cpu worker pool → scores stored with the traces (GetTrace shows them) → an alert POSTed, signed, to a local
webhook → the failing traces promoted into a stored dataset → a run on that dataset version."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import evalsi
from evalsi.policy import verify
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

SECRET = "hook-secret"


class _Hooks(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[bytes, dict[str, str]]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((body, dict(self.headers)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def hooks() -> Iterator[tuple[type[_Hooks], str]]:
    _Hooks.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hooks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield _Hooks, f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


@pytest.fixture(scope="module")
def clickhouse() -> Iterator[Any]:
    from evalsi.testing.services import ClickHouseServer

    with ClickHouseServer() as server:
        yield server


@pytest.fixture(params=["sqlite", "clickhouse"])
def watch_stack(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    monkeypatch.setenv("HOOK_SECRET", SECRET)  # the policy service reads the webhook secret from its environment
    # The same pipeline on both trace stores: SQLite (standalone) and a real ClickHouse server.
    traces_url = request.getfixturevalue("clickhouse").url_for("watch_e2e") if request.param == "clickhouse" else ""
    running = Stack(tmp_path, ingest_grace_s=0.5, judge_workers=0, traces_url=traces_url).start()
    try:
        yield running
    finally:
        running.stop()


def _send_traces(endpoint: str, answers: list[str], service: str = "support-agent") -> list[str]:
    provider = TracerProvider(resource=Resource.create({"service.name": service, "evalsi.project": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("e2e")
    trace_ids = []
    for index, answer in enumerate(answers):
        with tracer.start_as_current_span("invoke_agent support", attributes={
                "gen_ai.operation.name": "invoke_agent", "session.id": f"s{index}"}) as root:
            with tracer.start_as_current_span("chat m", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "m",
                    "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3,
                    "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [
                        {"type": "text", "content": f"question {index}"}]}]),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
                        {"type": "text", "content": answer}]}])}):
                pass
            trace_ids.append(f"{root.get_span_context().trace_id:032x}")
    provider.shutdown()
    return trace_ids


def _in_force(log: Path, policy: str) -> None:
    assert log.exists(), f"{log} is not written yet"
    lines = [line for line in log.read_text(errors="replace").splitlines() if "policies in force:" in line]
    assert lines and policy in lines[-1]


def _eventually(check: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return check()
        except (AssertionError, LookupError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def test_traces_are_scored_alerted_promoted_and_run(watch_stack: Stack, hooks: tuple[type[_Hooks], str],
                                                    tmp_path: Path) -> None:
    receiver, url = hooks
    policy = {
        "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy",
        "metadata": {"name": "support", "project": "shop"},
        "spec": {
            "selector": 'resource["service.name"] == "support-agent"',
            "sampling": {"rate": 1.0},
            "cascade": [
                {"ref": "builtin/contains", "alias": "polite", "params": {"values": ["thanks"]}},
                {"ref": "builtin/length", "when": "score('polite') < 0.5", "params": {"unit": "words", "max": 3}},
            ],
            "window": "1h",
            "alerts": [{"when": "mean('polite') < 0.5", "notify": url, "minSamples": 3, "secretEnv": "HOOK_SECRET"}],
            "promote": {"when": "score('polite') < 0.5", "dataset": "datasets/impolite"},
        },
    }
    otlp = f"http://127.0.0.1:{watch_stack.config.ingest.http_port}/v1/traces"
    with evalsi.Client(watch_stack.http, project="shop") as client:
        applied = client.policies.apply(policy)
        assert applied.generation == 1
        # The policy service reloads stored policies every second and logs the set in force when it changes.
        log = watch_stack.supervisor.child("policy").log_path
        _eventually(lambda: _in_force(log, "shop/support"))
        polite, curt, rude = _send_traces(otlp, ["thanks, done", "no", "I will not refund that order"])
        (billing,) = _send_traces(otlp, ["no"], service="billing")

        def scored() -> dict[str, Any]:
            traces = {t: client.traces.get(t) for t in (polite, curt, rude)}
            for trace in traces.values():
                metrics = {s.metric.split(".")[0] for s in trace.scores}
                assert metrics == {"polite", "length"}
            return traces

        traces = _eventually(scored)
        polite_scores = {s.metric: s for s in traces[polite].scores}
        assert polite_scores["polite"].outcome == "scored" and polite_scores["polite"].value == 1.0
        assert polite_scores["length"].outcome == "skipped" and "false" in polite_scores["length"].reason
        curt_scores = {s.metric: s for s in traces[curt].scores}
        assert curt_scores["polite"].value == 0.0 and curt_scores["length.in_range"].value == 1.0
        assert {s.metric: s.value for s in traces[rude].scores}["length.in_range"] == 0.0
        assert traces[curt].scores[0].revision == 2  # the root and the chat span
        assert list(client.traces.get(billing).scores) == []  # not selected

        # One alert (2 of 3 impolite in the window), signed with the secret.
        _eventually(lambda: receiver.received[0])
        ((body, headers),) = receiver.received
        assert verify(SECRET, body, headers["Evalsi-Signature"])
        assert json.loads(body)["policy"] == "support"

        stats = client.policies.stats("support")
        by_metric = {m.metric: m for m in stats.metrics}
        assert by_metric["polite"].n == 3 and by_metric["polite"].mean == pytest.approx(1 / 3)

        low = client.traces.list(score_metric="polite", max_score=0.5)
        assert sorted(t.trace_id for t in low) == sorted([curt, rude])

        # The two impolite traces are now a stored dataset; a run evaluates that exact version. Each promotion
        # is its own version, written after the trace's scores become readable: wait for the second.
        def promoted_both() -> None:
            assert max((v.records for v in client.datasets.versions("impolite")), default=0) == 2

        _eventually(promoted_both)
        run = client.runs.create({
            "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun",
            "metadata": {"name": "regressions", "project": "shop"},
            "spec": {"dataset": {"ref": "datasets/impolite"}, "evaluators": [{"ref": "builtin/contains",
                                                                                 "params": {"values": ["thanks"]}}]},
        }).wait()
        assert run.state == RUN_STATE_SUCCEEDED, run.message
        assert run.progress.scored == 2  # both promoted traces
        (summary,) = run.summaries
        assert summary.n == 2 and summary.mean == 0.0

    # A late thumbs-down over HTTP/JSON: stored, joined to the trace, and the policies look at the trace again.
    import urllib.request

    body = json.dumps({"feedback": {"traceId": polite, "name": "thumbs", "value": -1, "source": "user"}}).encode()
    request = urllib.request.Request(f"{watch_stack.http}/v1alpha1/feedback", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "x-evalsi-project": "shop"})
    with urllib.request.urlopen(request, timeout=10) as response:
        stored = json.loads(response.read())
    assert stored["negative"] is True and stored["id"]
    with evalsi.Client(watch_stack.http, project="shop") as client:
        (feedback,) = client.traces.get(polite).feedback
        assert (feedback.name, feedback.value, feedback.negative) == ("thumbs", -1.0, True)

    # The same from the CLI: a label on a session, then the trace with its scores and feedback.
    from click.testing import CliRunner

    from evalsi.cli.main import cli

    server = ["--server", watch_stack.http, "--project", "shop"]
    added = CliRunner().invoke(cli, ["traces", "feedback", "--session", "s1", "--name", "label", "--label",
                                     "refund", *server])
    assert added.exit_code == 0 and "stored" in added.output, added.output
    shown = CliRunner().invoke(cli, ["traces", "get", curt, *server])
    assert shown.exit_code == 0, shown.output
    assert "score  support/polite: scored 0" in shown.output and "feedback  label = refund" in shown.output
    low = CliRunner().invoke(cli, ["traces", "list", "--score", "polite", "--max", "0.5", "--format", "json",
                                   *server])
    assert sorted(t["traceId"] for t in json.loads(low.output)) == sorted([curt, rude])
