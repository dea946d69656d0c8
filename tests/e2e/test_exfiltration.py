"""No request of any shape makes a served stack send a credential to an address the caller chose.

The stack's environment holds planted values under every name a request used to be able to pick (the planted
variable itself, OPENAI_API_KEY and ANTHROPIC_API_KEY that a judge without apiKeyEnv fell back to, the agent
token); a listener on loopback stands where a caller would put its own server. Every shape that names an
endpoint, a variable or an unoffered connection (Evaluate over HTTP and gRPC, run specs with judges, model and
agent targets, an online policy's judge stage) is refused with a 4xx naming its field, and the listener hears
nothing at all. The configured judge connection is used, with its own key, at its own endpoint only.
"""

from __future__ import annotations

import json
import os
import socketserver
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format

import evalsi
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluation_service_pb2_grpc import EvaluationServiceStub
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED

PLANTED = f"secret-{uuid.uuid4().hex}"
JUDGE_KEY = f"judge-key-{uuid.uuid4().hex}"
# Every variable a request could once name or fall back to.
PLANTED_ENV = {"EVALSI_TEST_PLANTED": PLANTED, "OPENAI_API_KEY": PLANTED, "ANTHROPIC_API_KEY": PLANTED,
               "EVALSI_AGENT_TOKEN": PLANTED}
VERDICT = '{"reasoning": "fine", "score": 5}'


class Listener(socketserver.ThreadingTCPServer):
    """Where a caller would point the server: records every connection and every byte it is sent."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.received: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _Record)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Record(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(2)
        try:
            data = self.request.recv(65536)
        except OSError:
            data = b""
        self.server.received.append(data)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Listener, Any]]:
    tmp = tmp_path_factory.mktemp("exfiltration")
    saved = {name: os.environ.get(name) for name in [*PLANTED_ENV, "EVALSI_TEST_JUDGE_KEY"]}
    os.environ.update(PLANTED_ENV)
    os.environ["EVALSI_TEST_JUDGE_KEY"] = JUDGE_KEY
    listener = Listener()
    provider_thread = ThreadedProvider(lambda body: VERDICT)
    provider_thread.server.api_key = JUDGE_KEY  # anything else gets the provider's 401
    provider = provider_thread.__enter__()
    datasets = tmp / "datasets"
    datasets.mkdir()
    (datasets / "qa.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "input": f"q{i}?", "output": "a", "reference": "a"}) + "\n" for i in range(3)))
    judge = {"connector": "openai-compatible", "base_url": provider.base_url, "model": "judge",
             "models": ["judge", "judge-large"], "api_key": {"env": "EVALSI_TEST_JUDGE_KEY"}}
    stack = Stack(tmp, datasets_dir=datasets, cpu_workers=1, harness_workers=0,
                  judges={"good": judge, "team-only": {**judge, "projects": ["team-a"]}},
                  agents={"shop": {"protocol": "http", "url": provider.base_url, "agent": "shop"}})
    try:
        stack.start()
        yield stack, listener, provider
    finally:
        stack.stop()
        provider_thread.__exit__(None, None, None)
        listener.shutdown()
        listener.server_close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def post(stack: Stack, path: str, body: dict[str, Any]) -> tuple[int, str]:
    request = urllib.request.Request(stack.http + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def evaluate_body(judges: dict[str, Any] | None, judge: str = "") -> dict[str, Any]:
    evaluator: dict[str, Any] = {"ref": "builtin/llm-judge"}
    if judge:
        evaluator["judge"] = judge
    body: dict[str, Any] = {"records": [{"id": "r", "input": {"text": "q?"}, "output": {"text": "a"}}],
                            "evaluators": [evaluator]}
    if judges is not None:
        body["judges"] = judges
    return body


def run_body(spec: dict[str, Any]) -> dict[str, Any]:
    return {"run": {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "exfil"},
                    "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "builtin/exact-match"}],
                             **spec}}}


def attacks(url: str) -> list[tuple[str, dict[str, Any], str]]:
    """(path, body, the field the refusal must name) for every way a request could pick an endpoint."""
    named = {"connector": "openai-compatible", "model": "x", "baseUrl": url + "/v1", "apiKeyEnv": "EVALSI_TEST_PLANTED"}
    return [
        ("/v1alpha1/evaluate", evaluate_body({"default": named}), "judges.default.connector"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"model": "x", "baseUrl": url}}), "judges.default.baseUrl"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"connector": "anthropic", "model": "x", "baseUrl": url}}),
         "judges.default.connector, judges.default.baseUrl"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"secretRef": "aws"}}), "judges.default.secretRef"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"connection": "evil"}}), "judges.default.connection"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"connection": "team-only"}}), "judges.default.connection"),
        ("/v1alpha1/evaluate", evaluate_body({"default": {"connection": "good", "model": "gpt-4o"}}),
         "judges.default.model"),
        ("/v1alpha1/evaluate", evaluate_body(None), "evaluators[0].judge"),
        ("/v1alpha1/runs", run_body({"evaluators": [{"ref": "builtin/llm-judge"}], "judges": {"default": named}}),
         "spec.judges.default.connector"),
        ("/v1alpha1/runs", run_body({"target": {"model": {"connector": "openai-compatible", "model": "x",
                                                          "baseUrl": url, "apiKeyEnv": "EVALSI_TEST_PLANTED"}}}),
         "spec.target.model.connector"),
        ("/v1alpha1/runs", run_body({"target": {"model": {"model": "x"}}}), "spec.target.model.connection"),
        ("/v1alpha1/runs", run_body({"target": {"agent": {"http": {"url": url, "agent": "a"}}}}),
         "spec.target.agent.http"),
        ("/v1alpha1/runs", run_body({"target": {"agent": {"a2a": {"url": url}}}}), "spec.target.agent.a2a"),
        ("/v1alpha1/runs", run_body({"target": {"agent": {"openaiResponses": {
            "baseUrl": url, "model": "m", "apiKeyEnv": "EVALSI_TEST_PLANTED"}}}}), "spec.target.agent.openaiResponses"),
        ("/v1alpha1/runs", run_body({"target": {"agent": {"python": {"callable": "os:getenv"}}}}),
         "spec.target.agent.python"),
        ("/v1alpha1/runs", run_body({"target": {"agent": {"connection": "mall"}}}), "spec.target.agent.connection"),
        ("/v1alpha1/runs", run_body({"target": {"model": {"connection": "good"}}, "harness": {"builtin": {
            "tools": {"mcp": [{"url": url}]}}}}), "spec.harness.builtin.tools.mcp[0].url"),
        ("/v1alpha1/runs", run_body({"target": {"model": {"connection": "good"}}, "harness": {"builtin": {
            "tools": {"python": ["os:getenv"]}}}}), "spec.harness.builtin.tools.python[0]"),
        ("/v1alpha1/policies", {"apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy",
                                "metadata": {"name": "exfil"},
                                "spec": {"cascade": [{"ref": "builtin/llm-judge", "judge": "evil"}]}},
         "policy.spec.cascade[0].judge"),
    ]


def test_no_request_makes_a_service_send_anything_to_an_address_it_chose(
    served: tuple[Stack, Listener, Any],
) -> None:
    stack, listener, provider = served
    before = len(provider.requests)
    for path, body, field in attacks(listener.url):
        status, text = post(stack, path, body)
        assert status == 400, (path, body, status, text)
        message = json.loads(text)["message"]
        # One problem is its own message; several are listed one a line under "N problems in …:" (every problem
        # of a spec at once). The attack's field comes first either way.
        lines = message.splitlines()
        problems = [line.removeprefix("  - ") for line in lines[1:]] if " problems in " in lines[0] else [message]
        assert problems[0].startswith(field), (field, message)
        assert PLANTED not in text
    # The same over gRPC: INVALID_ARGUMENT naming the field.
    with grpc.insecure_channel(stack.grpc.removeprefix("grpc://")) as channel:
        stub = EvaluationServiceStub(channel)
        request = json_format.ParseDict(evaluate_body({"default": {"baseUrl": listener.url,
                                                                   "apiKeyEnv": "EVALSI_TEST_PLANTED"}}),
                                        EvaluateRequest())
        with pytest.raises(grpc.RpcError) as caught:
            stub.Evaluate(request, timeout=30)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details().startswith("judges.default.baseUrl, judges.default.apiKeyEnv: not accepted")
    assert listener.received == []
    assert len(provider.requests) == before  # a refused request calls nothing, not even the configured judge
    logs = "".join(p.read_text(errors="replace") for p in (stack.supervisor.state_dir / "logs").glob("*.log"))
    assert PLANTED not in logs and JUDGE_KEY not in logs


def test_a_configured_judge_is_used_with_its_own_key_at_its_own_endpoint_only(
    served: tuple[Stack, Listener, Any],
) -> None:
    stack, listener, provider = served
    before = len(provider.requests)
    # By its connection, and by an evaluator naming the connection without any judges in the request.
    for body in (evaluate_body({"default": {"connection": "good", "model": "judge-large"}}),
                 evaluate_body(None, judge="good")):
        status, text = post(stack, "/v1alpha1/evaluate", body)
        assert status == 200, text
        (result,) = json.loads(text)["results"]
        assert result["outcome"] == "OUTCOME_SCORED", result
    with evalsi.Client(stack.grpc) as client:
        run = client.runs.create(run_body({"evaluators": [{"ref": "builtin/llm-judge"}],
                                           "target": {"model": {"connection": "good"}},
                                           "judges": {"default": {"connection": "good"}}})["run"]).wait()
        assert run.state == RUN_STATE_SUCCEEDED, run.message + stack.logs()
        # The model the connection defaults to is pinned into the stored spec.
        assert run.spec.target.model.model == "judge" and run.spec.judges["default"].model == "judge"
        assert run.spec.judges["default"].connection == "good"
        # The manifest names the server's connection, never the provider default a bare spec would imply.
        assert dict(run.manifest.judges) == {"default": "connection:good:judge"}
        assert "api.openai.com" not in " ".join(run.manifest.unpinned)
        results = list(client.runs.results(run.id))
    assert len(results) == 3 and all(r.outcome == OUTCOME_SCORED for r in results)
    sent = provider.request_headers[before:]
    # 2 Evaluate judge calls, then 3 target calls and 3 judge calls in the run.
    assert len(sent) == 8
    assert {h.get("Authorization") for h in sent} == {f"Bearer {JUDGE_KEY}"}
    assert [b["model"] for b in provider.requests[before:before + 2]] == ["judge-large", "judge"]
    assert all(PLANTED not in json.dumps(b) for b in provider.requests)
    assert listener.received == []
