"""Packs per project on a served stack (`evalsi serve`'s processes: bundled NATS, api, scheduler, workers; SQLite)
configured with evalsi.yaml's `evaluators:` section (docs/packs.md):

- a request naming an evaluator of a pack outside the project's allowlist is 403 naming the pack and the
  allowlist, in Evaluate, CreateRun and ApplyPolicy alike;
- an allowed pack the project has not enabled may be named in Evaluate and CreateRun (naming is the opt-in), but an
  online policy naming it is 400 FAILED_PRECONDITION naming the pack and how to enable it;
- the project's catalog lists its enabled packs' evaluators (all allowed ones with all_packs), every pack with
  its tier, enabled and allowed, over HTTP, gRPC and `evalsi catalog`.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import CliRunner

import evalsi
from evalsi.cli.main import cli
from evalsi.projects import PROJECT_HEADER
from evalsi.testing.stack import Stack
from evalsi.v1alpha1 import catalog_service_pb2_grpc
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest

# core on everywhere; judge and agent allowed; support enables agent; locked may use core alone.
EVALUATORS = {
    "packs": ["core"],
    "allowed_packs": ["core", "judge", "agent"],
    "projects": {"support": {"packs": ["core", "agent"]}, "locked": {"allowed_packs": ["core"]}},
}
RECORD = {"id": "r1", "input": {"text": "hi"}, "output": {"text": "hi"}, "reference": {"text": "hi"}}
AGENT_EVALUATOR = "builtin/loop-detection"  # the agent pack's; a record without a trajectory is skipped


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    datasets = tmp_path_factory.mktemp("packs-datasets")
    (datasets / "qa.jsonl").write_text(json.dumps(RECORD) + "\n")
    running = Stack(tmp_path_factory.mktemp("packs-stack"), datasets_dir=datasets, evaluators=EVALUATORS,
                    judge_workers=0, harness_workers=0).start()
    try:
        yield running
    finally:
        running.stop()


def _post(stack: Stack, path: str, body: dict[str, Any], project: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{stack.http}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", PROJECT_HEADER: project})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _evaluate(stack: Stack, ref: str, project: str) -> tuple[int, dict[str, Any]]:
    return _post(stack, "/v1alpha1/evaluate", {"records": [RECORD], "evaluators": [{"ref": ref}]}, project)


def _run(stack: Stack, ref: str, project: str) -> tuple[int, dict[str, Any]]:
    spec = {"dataset": {"path": str(Path(stack.config.datasets_dir) / "qa.jsonl")}, "evaluators": [{"ref": ref}]}
    run = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "packs"}, "spec": spec}
    return _post(stack, "/v1alpha1/runs", {"run": run, "dryRun": True},
                 project)


def _policy(stack: Stack, ref: str, project: str) -> tuple[int, dict[str, Any]]:
    policy = {"apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy",
              "metadata": {"name": f"watch-{project}", "project": project},
              "spec": {"selector": "true", "sampling": {"rate": 1.0}, "cascade": [{"ref": ref}]}}
    return _post(stack, "/v1alpha1/policies", policy, project)


def test_a_pack_outside_the_allowlist_is_refused_in_every_request(stack: Stack) -> None:
    for status, body in (_evaluate(stack, AGENT_EVALUATOR, "locked"), _run(stack, AGENT_EVALUATOR, "locked"),
                         _policy(stack, AGENT_EVALUATOR, "locked")):
        assert status == 403, body
        assert body["code"] == grpc.StatusCode.PERMISSION_DENIED.value[0]
        assert (f"{AGENT_EVALUATOR}@1.0.0 is in pack 'agent', which project 'locked' may not use: its allowed "
                "packs are core; an admin allows a pack with evaluators.allowed_packs") in body["message"]
    # judge is allowed in default but not in locked either; core is allowed in both.
    assert _evaluate(stack, "builtin/llm-judge", "locked")[0] == 403
    status, body = _evaluate(stack, "builtin/exact-match", "locked")
    assert status == 200 and body["results"][0]["scores"][0]["passed"] is True


def test_an_allowed_pack_is_opted_into_by_naming_it_but_a_policy_needs_it_enabled(stack: Stack) -> None:
    # default: agent is allowed, not enabled. Naming it in Evaluate or a run is the opt-in.
    status, body = _evaluate(stack, AGENT_EVALUATOR, "default")
    assert status == 200, body
    assert body["results"][0]["outcome"] == "OUTCOME_SKIPPED"  # it ran: no trajectory in the record
    status, body = _run(stack, AGENT_EVALUATOR, "default")
    assert status == 200, body
    # A policy runs only enabled packs: refused, naming the pack and where to enable it.
    status, body = _policy(stack, AGENT_EVALUATOR, "default")
    assert status == 400, body
    assert body["code"] == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert body["message"] == (
        f"spec.cascade[0].ref: {AGENT_EVALUATOR}@1.0.0 is in pack 'agent', which project 'default' has not "
        "enabled: online policies run only enabled packs (enabled: core); enable agent with "
        "evaluators.projects.default.packs in the server's evalsi.yaml (evaluators:)"
    )
    # support enables agent: the same policy is stored there.
    status, body = _policy(stack, AGENT_EVALUATOR, "support")
    assert status == 200, body
    assert body["project"] == "support" and body["generation"] == "1"


def test_the_catalog_lists_the_projects_enabled_packs_with_tiers(stack: Stack) -> None:
    with evalsi.Client(stack.http, project="support") as client:
        enabled = client.list_evaluators()
        every = client.list_evaluators(all_packs=True)
        one = client.list_evaluators("judge")
    assert {m.pack for m in enabled.evaluators} == {"core", "agent"}
    assert {m.pack for m in every.evaluators} == {"core", "judge", "agent"}  # allowed, not code or the others
    assert {m.pack for m in one.evaluators} == {"judge"}
    assert all(m.tier == "native" for m in every.evaluators)
    packs = {p.name: p for p in enabled.packs}
    assert {name for name, p in packs.items() if p.enabled} == {"core", "agent"}
    assert {name for name, p in packs.items() if p.allowed} == {"core", "judge", "agent"}
    assert packs["core"].tier == "native" and packs["core"].default_on and packs["code"].tier == "native"
    # Over gRPC, with the project in the header: the same answer for the same project.
    with grpc.insecure_channel(stack.grpc.removeprefix("grpc://")) as channel:
        locked = catalog_service_pb2_grpc.CatalogServiceStub(channel).ListEvaluators(
            ListEvaluatorsRequest(all_packs=True), metadata=((PROJECT_HEADER, "locked"),))
    assert {m.pack for m in locked.evaluators} == {"core"}
    assert [p.name for p in locked.packs if p.allowed] == ["core"]


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_evalsi_catalog_names_the_server_and_project(stack: Stack) -> None:
    code, out, err = _cli("catalog", "packs", "--server", stack.http, "--project", "support", "--format", "json")
    assert code == 0, err
    packs = {p["name"]: p for p in json.loads(out)}
    assert (packs["agent"]["enabled"], packs["agent"]["allowed"], packs["agent"]["tier"]) == (True, True, "native")
    assert (packs["judge"]["enabled"], packs["judge"]["allowed"]) == (False, True)
    assert (packs["code"]["enabled"], packs["code"]["allowed"]) == (False, False)
    code, out, err = _cli("catalog", "list", "--server", stack.grpc, "--project", "support", "--format", "json")
    assert code == 0, err
    assert {m["pack"] for m in json.loads(out)} == {"core", "agent"}
    code, out, err = _cli("catalog", "list", "--server", stack.http, "--project", "support")
    assert code == 0, err
    rows = [line for line in out.splitlines() if "builtin/loop-detection" in line or "builtin/exact-match" in line]
    assert len(rows) == 2 and all("(on)" in row and "native" in row for row in rows)
    code, out, _ = _cli("catalog", "list", "--server", stack.http, "--project", "locked", "--all", "--format", "json")
    assert code == 0 and {m["pack"] for m in json.loads(out)} == {"core"}


def _log_lines(stack: Stack, child: str, text: str) -> list[str]:
    path = next(c for c in stack.supervisor.children if c.name == child).log_path
    return [line for line in path.read_text(errors="replace").splitlines() if text in line]


def _eventually(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time limit"
        time.sleep(0.3)


def test_packs_set_through_the_api_apply_over_evalsi_yaml_and_reach_evalsi_policy(stack: Stack) -> None:
    server = ("--server", stack.http, "--project", "default")
    try:
        code, out, err = _cli("catalog", "set-packs", "core,agent", *server)
        assert code == 0, err
        assert out.strip() == ("project default: enabled agent, core (stored); allowed agent, core, judge "
                               "(from evalsi.yaml)")
        status, body = _policy(stack, AGENT_EVALUATOR, "default")  # agent now enabled in default
        assert status == 200, body
        _eventually(lambda: any("default/watch-default" in line
                                for line in _log_lines(stack, "policy", "policies in force:")))
        # Back to evalsi.yaml: the stored policy is no longer in force in evalsi-policy, and applying it is refused.
        code, out, err = _cli("catalog", "set-packs", "--inherit", *server)
        assert code == 0 and out.strip().startswith("project default: enabled core (from evalsi.yaml)"), err
        _eventually(lambda: bool(_log_lines(stack, "policy", "policy watch-default (generation 1) is not in force")))
        assert _policy(stack, AGENT_EVALUATOR, "default")[0] == 400
        # The allowlist, stored: support may no longer name agent evaluators at all.
        code, out, err = _cli("catalog", "allow-packs", "core", "--server", stack.http, "--project", "support")
        assert code == 0, err
        status, body = _evaluate(stack, AGENT_EVALUATOR, "support")
        assert status == 403 and "its allowed packs are core" in body["message"]
        with evalsi.Client(stack.grpc, project="support") as client:
            assert [p.name for p in client.list_evaluators().packs if p.enabled] == ["core"]
            assert list(client.set_pack_allowlist(None).allowed) == ["agent", "core", "judge"]
        assert _evaluate(stack, AGENT_EVALUATOR, "support")[0] == 200
        # Enabling a pack outside the allowlist, or one not installed, is refused naming it; nothing is stored.
        code, _, err = _cli("catalog", "set-packs", "core,code", *server)
        assert code == 2 and "packs.names: code not in the allowed packs of project 'default' (agent, core, " \
            "judge); the owner allows packs with SetPackAllowlist" in err, err
        code, _, err = _cli("catalog", "set-packs", "core,no-such-pack", *server)
        assert code == 2 and "packs.names[1]: 'no-such-pack' is not an installed pack" in err, err
        code, _, err = _cli("catalog", "set-packs", *server)
        assert code == 2 and "PACKS: a comma-separated list such as core,judge (or --inherit)" in err
    finally:
        with evalsi.Client(stack.http, project="default") as client:
            client.set_project_packs(None)
        with evalsi.Client(stack.http, project="support") as client:
            client.set_pack_allowlist(None)
