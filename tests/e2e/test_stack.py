"""The distributed spine end to end: separate processes talking protobuf over a real NATS server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import evalsi
from evalsi.records import make_record
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"


def summaries_of(run) -> dict[str, tuple]:
    return {
        s.metric: (
            s.n,
            round(s.mean, 12) if s.HasField("mean") else None,
            round(s.ci.low, 12),
            round(s.ci.high, 12),
            s.skipped,
            s.errors,
        )
        for s in run.summaries
    }


def test_a_run_on_the_server_equals_the_embedded_run(stack: Stack) -> None:

    from evalsi.runs.embedded import run_embedded
    from evalsi.runs.spec import load_eval_run

    embedded = asyncio.run(run_embedded(load_eval_run(SPEC), base_dir=SPEC.parent)).run
    with evalsi.Client(stack.grpc) as client:
        served = client.runs.create(SPEC).wait()
    assert served.state == RUN_STATE_SUCCEEDED, served.message
    assert summaries_of(served) == summaries_of(embedded)
    assert [(g.expression, g.passed) for g in served.gates] == [(g.expression, g.passed) for g in embedded.gates]
    assert served.manifest.dataset_version == embedded.manifest.dataset_version

    async def last_event_traceparent() -> str:
        import nats

        nc = await nats.connect(stack.supervisor.nats.url, **stack.bus_options())
        try:
            message = await nc.jetstream().get_last_msg("EVENTS", f"runs.events.{served.id}")
            return (message.headers or {}).get("traceparent", "")
        finally:
            await nc.close()

    from evalsi.runs.tasks import run_traceparent

    # Every message of a run carries the run's trace id, so a trace backend can correlate them.
    assert asyncio.run(last_event_traceparent()).split("-")[1] == run_traceparent(served.id, "").split("-")[1]


def test_evaluate_over_grpc_and_http_give_the_same_answer(stack: Stack) -> None:
    request = EvaluateRequest(evaluators=[EvaluatorRef(ref="exact-match")])
    request.records.extend(
        [make_record(id="a", output="Paris", reference="Paris"), make_record(id="b", output="Lyon", reference="Paris")]
    )
    with evalsi.Client(stack.grpc) as grpc_client, evalsi.Client(stack.http) as http_client:
        over_grpc = grpc_client.evaluate(request)
        over_http = http_client.evaluate(request)
    for response in (over_grpc, over_http):
        assert [r.scores[0].passed for r in response.results] == [True, False]
        assert response.summaries[0].n == 2 and response.summaries[0].mean == 0.5
    body = json.dumps(
        {
            "records": [{"id": "x", "output": {"text": "a"}, "reference": {"text": "a"}}],
            "evaluators": [{"ref": "builtin/exact-match"}],
        }
    ).encode()
    raw = urllib.request.urlopen(
        urllib.request.Request(
            stack.http + "/v1alpha1/evaluate", data=body, method="POST", headers={"content-type": "application/json"}
        )
    )
    assert json.loads(raw.read())["results"][0]["outcome"] == "OUTCOME_SCORED"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    evalsi_bin = Path(sys.executable).parent / "evalsi"
    return subprocess.run(
        [str(evalsi_bin), *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_cli_runs_watch_list_results_and_compare(stack: Stack, tmp_path: Path) -> None:
    done = cli("run", "-f", str(SPEC), "--server", stack.grpc)
    assert done.returncode == 0, done.stderr + stack.logs()
    assert "exact-match" in done.stdout and "✓" in done.stdout
    created = cli("run", "-f", str(SPEC), "--server", stack.http, "--no-wait")
    assert created.returncode == 0, created.stderr
    second = created.stdout.strip().splitlines()[-1]
    watched = cli("runs", "watch", second, "--server", stack.http, "--project", "quickstart")
    assert watched.returncode == 0 and "succeeded" in watched.stderr
    listed = cli("runs", "list", "--server", stack.grpc, "--project", "quickstart", "--format", "json")
    ids = [r["id"] for r in json.loads(listed.stdout)]
    assert second in ids and len(ids) == 2
    results = cli(
        "runs", "results", second, "--server", stack.grpc, "--project", "quickstart", "--evaluator", "exact-match"
    )
    lines = [json.loads(line) for line in results.stdout.splitlines()]
    assert len(lines) == 30 and {line["evaluator"] for line in lines} == {"exact-match"}
    compared = cli("compare", ids[0], ids[1], "--server", stack.grpc, "--project", "quickstart", "--format", "json")
    metrics = {m["metric"]: m for m in json.loads(compared.stdout)["metrics"]}
    assert metrics["exact-match"]["nPairs"] == "30" and metrics["exact-match"]["verdict"] == "no significant difference"


def test_a_failing_gate_exits_3(stack: Stack) -> None:
    failing = cli(
        "run", "-f", str(SPEC), "--server", stack.grpc, "--set", "spec.gates=[\"metric('exact-match').mean >= 0.99\"]"
    )
    assert failing.returncode == 3, failing.stderr
    assert "✗" in failing.stdout


def big_spec(tmp_path: Path, rows: int) -> Path:
    data = ROOT / "examples" / "e2e-generated.jsonl"
    with data.open("w") as f:
        for i in range(rows):
            f.write(json.dumps({"id": f"r{i}", "output": str(i % 7), "reference": str(i % 5)}) + "\n")
    spec = tmp_path / "big.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: big}\n"
        f"spec:\n  dataset: {{path: {data}}}\n  evaluators:\n"
        + "".join(f"    - {{ref: builtin/exact-match, alias: em{i}}}\n" for i in range(4))
    )
    return spec


def test_bad_input_is_refused_with_a_clear_error_and_nothing_is_stored(stack: Stack, tmp_path: Path) -> None:
    import grpc

    cases = {
        "invalid.yaml": ("apiVersion: evals.si/v1alpha1\nkind: EvalRun\nspec: [unclosed\n", "invalid YAML"),
        "unknown-field.yaml": (SPEC.read_text().replace("evaluators:", "evaluatorz:"), "evaluatorz"),
        "unknown-evaluator.yaml": (SPEC.read_text().replace("builtin/exact-match", "builtin/exact-mach"), "exact-mach"),
        # A file here is uploaded and read as a dataset, as embedded; one that is not here is the server's to find.
        "not-a-dataset.yaml": (SPEC.read_text().replace("../quickstart/qa.jsonl", "/etc/passwd"),
                               "passwd: cannot tell the format"),
        "outside.yaml": (SPEC.read_text().replace("../quickstart/qa.jsonl", "../../../../../../../etc/none.jsonl"),
                         "outside"),
    }
    for name, (text, message) in cases.items():
        spec = tmp_path / name
        spec.write_text(text)
        refused = cli("run", "-f", str(spec), "--server", stack.grpc)
        assert refused.returncode == 2, (name, refused.stdout, refused.stderr)
        assert message in refused.stderr, (name, refused.stderr)

    def post(body: bytes) -> int:
        request = urllib.request.Request(
            stack.http + "/v1alpha1/runs", data=body, method="POST", headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post(b"{not json") == 400
    assert post(json.dumps({"run": {"spec": {"trials": "many"}}}).encode()) == 400
    assert post(b"x" * (17 * 1024 * 1024)) == 413
    channel = grpc.insecure_channel(stack.grpc.removeprefix("grpc://"))
    create = channel.unary_unary(
        "/evalsi.v1alpha1.RunService/CreateRun", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )
    with pytest.raises(grpc.RpcError) as raised:
        create(b"\xff\xff\xff garbage", timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
    channel.close()
    with evalsi.Client(stack.grpc) as client:
        assert list(client.runs.list()) == [] and list(client.runs.list()) == []
