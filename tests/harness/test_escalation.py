"""Escalation requests (§13) in harness environments: the policy's checks and decisions, then on the real bubblewrap
rung the agent's request_escalation tool: denied by default (the sandbox policy event recorded), granted inside the
allowance (a new sandbox with the same files, whose egress now reaches the allowed endpoint through the logging
proxy: needs root, as here and in CI), refused when nothing wider is asked, a wider file-access mode applied, and
the whole chain through a run, counted by builtin/sandbox-events."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from internet_server import BODY

from evalsi.errors import BadInputError, InfraError
from evalsi.harness.environment import environment_from_mapping
from evalsi.harness.environment_run import prepared
from evalsi.harness.escalation import EscalationPolicy, EscalationRequest, decide, escalation_request
from evalsi.harness.sandbox_tools import sandbox_tools
from evalsi.judges import RetryPolicy
from evalsi.records import from_value
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run
from evalsi.sandbox.access import LadderOpener
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Endpoint, SandboxSession, SandboxSpec
from evalsi.testing import FakeOpenAI
from evalsi.testing.reachable_tmp import reachable_tmp_dir
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "env-fix"




@pytest.fixture(scope="module")
def cache() -> Iterator[Path]:
    """One sandbox cache for the module (its runtime image built once), where the sandbox's host user reaches it."""
    with reachable_tmp_dir("cache") as path:
        yield path


@pytest.fixture
def opener(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> LadderOpener:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the workspaces land here, so leftovers are seen
    return LadderOpener(Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=cache)))


class _FailingAfterFirstOpen(LadderOpener):
    """A sandbox host that goes away after the first sandbox: the fault a grant's restore may meet."""

    opened = 0

    async def open(self, spec: SandboxSpec, project: str) -> SandboxSession:
        self.opened += 1
        if self.opened > 1:
            raise InfraError("sandboxd unreachable (injected)")
        return await super().open(spec, project)


def _fetch(port: int) -> str:
    return (f"python3 -c \"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:{port}/', "
            "timeout=5).read().decode(), end='')\"")


# --- the policy ------------------------------------------------------------------------------------------------


def test_the_policy_is_deny_by_default_and_an_allowance_is_checked_naming_the_field() -> None:
    assert environment_from_mapping({}, "env").escalation == EscalationPolicy()
    allowed = environment_from_mapping({"escalation": {"allow": {"network": ["Example.COM:443"],
                                                                 "fileAccess": ["workspace-write"]}}}, "env")
    assert allowed.escalation == EscalationPolicy(frozenset({Endpoint("example.com", 443)}), ("workspace-write",))
    for doc, message in [
        ({"escalation": "allow"}, "env.escalation: expected deny, or {allow: "),
        ({"escalation": {"allow": {"network": ["example.com"]}}}, "env.escalation.allow.network[0]: 'example.com' is "
                                                                   "not an endpoint"),
        ({"escalation": {"allow": {"fileAccess": ["full-access"]}}}, "env.escalation.allow.fileAccess[0]: "
                                                                     "'full-access' (no rung here writes outside"),
        ({"escalation": {"allow": {"disk": ["x"]}}}, "env.escalation.allow: expected an object with network"),
        ({"fileAccess": "full-access"}, "env.fileAccess: 'full-access'; accepted: read-only, workspace-write"),
        ({"snapshot": "yes"}, "env.snapshot: expected true"),
    ]:
        with pytest.raises(BadInputError) as caught:
            environment_from_mapping(doc, "env")
        assert message in str(caught.value)


def test_requests_are_bounded_and_named() -> None:
    request = escalation_request({"network": ["127.0.0.1:8080"], "reason": " fetch the wheel "})
    assert request == EscalationRequest((Endpoint("127.0.0.1", 8080),), None, "fetch the wheel")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"network": ["a:1"]}, "reason: a non-empty string of at most 1000 characters"),
        ({"network": ["a:1"], "reason": "x" * 1001}, "reason: a non-empty string of at most 1000"),
        ({"network": [f"h{i}:1" for i in range(17)], "reason": "r"}, "network: a list of at most 16"),
        ({"network": ["h:99999"], "reason": "r"}, "network[0]: 'h:99999' is not an endpoint"),
        ({"network": ["h" * 400 + ":1"], "reason": "r"}, "network[0]: a HOST:PORT string of at most 300"),
        ({"file_access": "root", "reason": "r"}, "file_access: 'root'; accepted: read-only, workspace-write"),
        ({"reason": "r"}, "ask for something"),
        ({"sudo": True, "reason": "r"}, "sudo: unknown argument"),
    ]
    for arguments, message in cases:
        with pytest.raises(ValueError) as caught:
            escalation_request(arguments)
        assert message in str(caught.value)


def test_decisions_all_or_nothing_and_only_for_something_wider() -> None:
    web, pypi = Endpoint("example.com", 443), Endpoint("pypi.org", 443)
    policy = EscalationPolicy(frozenset({web}), ("workspace-write",))
    ask = EscalationRequest((web,), None, "r")
    assert decide(ask, EscalationPolicy(), network=(), file_access="workspace-write").kind == "denied"
    granted = decide(ask, policy, network=(pypi,), file_access="workspace-write")
    assert (granted.kind, granted.network) == ("granted", (pypi, web))
    both = decide(EscalationRequest((web, pypi), None, "r"), policy, network=(), file_access="workspace-write")
    assert both.kind == "denied" and "pypi.org:443" in both.why
    already = decide(ask, policy, network=(web,), file_access="workspace-write")
    assert already.kind == "refused" and already.why.startswith("not an escalation")
    narrower = decide(EscalationRequest((), "read-only", "r"), policy, network=(), file_access="workspace-write")
    assert narrower.kind == "refused"
    wider = decide(EscalationRequest((), "workspace-write", "r"), policy, network=(), file_access="read-only")
    assert (wider.kind, wider.file_access) == ("granted", "workspace-write")
    full = decide(EscalationRequest((), "full-access", "r"), policy, network=(), file_access="workspace-write")
    assert full.kind == "denied" and "file access full-access" in full.why


# --- on the real sandbox ---------------------------------------------------------------------------------------


async def test_denied_by_default_and_recorded_as_a_policy_event(opener: LadderOpener, internet: int) -> None:
    env = environment_from_mapping({"files": {"a.txt": "kept\n"}}, "env")
    async with prepared(env, opener, "p") as session:
        first = session.id
        answer = await sandbox_tools(session)["request_escalation"].call(
            {"network": [f"127.0.0.1:{internet}"], "reason": "download the fixture"})
        assert answer.error == ("escalation denied: the environment's escalation policy denies every request "
                                "(escalation: deny)")
        assert answer.sandbox_event == {
            "kind": "escalation_request", "decision": "denied", "why": answer.error.removeprefix("escalation denied: "),
            "requested": {"network": [f"127.0.0.1:{internet}"]}, "reason": "download the fixture",
            "tool": "request_escalation", "driver": "bwrap"}
        assert session.id == first  # the same sandbox, still without egress
        ran = await sandbox_tools(session)["run_shell"].call({"command": _fetch(internet)})
        assert ran.error == "denied by the sandbox: network denied"


async def test_granted_inside_the_allowance_the_endpoint_is_reached_through_the_proxy_keeping_the_files(
        opener: LadderOpener, internet: int, tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{internet}"
    env = environment_from_mapping({"escalation": {"allow": {"network": [endpoint]}}}, "env")
    async with prepared(env, opener, "p") as session:
        tools = sandbox_tools(session)
        old_workspace = session.current.host_workspace  # type: ignore[attr-defined]
        await tools["run_shell"].call({"command": "echo before > notes.txt"})
        blocked = await tools["run_shell"].call({"command": _fetch(internet)})
        assert blocked.error == "denied by the sandbox: network denied"  # until the grant
        outside = await tools["request_escalation"].call({"network": ["127.0.0.1:1"], "reason": "r"})
        assert outside.error == "escalation denied: outside the allowance: egress to 127.0.0.1:1"
        answer = await tools["request_escalation"].call({"network": [endpoint], "reason": "fetch the data"})
        assert answer.error is None, answer.error
        assert answer.value == {"granted": True, "why": f"granted: egress to {endpoint}", "network": [endpoint]}
        assert answer.sandbox_event is not None and answer.sandbox_event["decision"] == "granted"
        assert answer.sandbox_event["granted"] == {"network": [endpoint]}
        assert "logging proxy" in session.isolation.bounds["network"]
        assert not os.path.exists(old_workspace)  # the old sandbox is gone; the new one holds its files
        fetched = await tools["run_shell"].call({"command": f"cat notes.txt; {_fetch(internet)}"})
        assert fetched.error is None and fetched.value["exit_code"] == 0, fetched.value
        assert fetched.value["stdout"] == "before\n" + BODY.decode()
        again = await tools["request_escalation"].call({"network": [endpoint], "reason": "again"})
        assert again.error is not None and again.error.startswith("escalation refused: not an escalation")
    assert not list(tmp_path.glob("evalsi-ws-*"))  # the escalated sandbox was destroyed too


async def test_a_wider_file_access_mode_is_applied(opener: LadderOpener) -> None:
    env = environment_from_mapping({"files": {"a.txt": "old\n"}, "fileAccess": "read-only",
                                    "escalation": {"allow": {"fileAccess": ["workspace-write"]}}}, "env")
    async with prepared(env, opener, "p") as session:
        tools = sandbox_tools(session)
        denied = await tools["run_shell"].call({"command": "echo new > a.txt"})
        assert denied.error == "denied by the sandbox: write to a read-only path"
        full = await tools["request_escalation"].call({"file_access": "full-access", "reason": "write /etc"})
        assert full.error == "escalation denied: outside the allowance: file access full-access"
        granted = await tools["request_escalation"].call({"file_access": "workspace-write", "reason": "edit a.txt"})
        assert granted.value == {"granted": True, "why": "granted: file access workspace-write", "network": [],
                                 "file_access": "workspace-write"}
        wrote = await tools["run_shell"].call({"command": "cat a.txt; echo new > a.txt; cat a.txt"})
        assert wrote.value["stdout"] == "old\nnew\n"


async def test_a_fault_while_applying_a_grant_is_an_infrastructure_error_not_a_denial(
        tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    opener = _FailingAfterFirstOpen(Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=cache)))
    env = environment_from_mapping({"files": {"a.txt": "old\n"}, "fileAccess": "read-only",
                                    "escalation": {"allow": {"fileAccess": ["workspace-write"]}}}, "env")
    async with prepared(env, opener, "p") as session:
        tools = sandbox_tools(session)
        with pytest.raises(InfraError, match="sandboxd unreachable"):
            await tools["request_escalation"].call({"file_access": "workspace-write", "reason": "edit a.txt"})
        still = await tools["run_shell"].call({"command": "cat a.txt"})  # the old sandbox is still in force
        assert still.value["stdout"] == "old\n"


async def test_a_grant_waits_for_the_calls_in_flight(opener: LadderOpener) -> None:
    env = environment_from_mapping({"escalation": {"allow": {"network": ["127.0.0.1:9"]}}}, "env")
    async with prepared(env, opener, "p") as session:
        tools = sandbox_tools(session)
        first = session.id
        # Parallel tool calls: the write that is running when the request arrives lands before the sandbox moves.
        slow, granted = await asyncio.gather(
            tools["run_shell"].call({"command": "sleep 0.5; echo late > late.txt"}),
            tools["request_escalation"].call({"network": ["127.0.0.1:9"], "reason": "r"}))
        assert slow.error is None and granted.error is None and session.id != first
        assert (await tools["read_file"].call({"path": "late.txt"})).value == "late\n"


async def test_requests_in_a_run_are_trajectory_events_counted_by_sandbox_events(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no evalsi.yaml here: the default ladder

    def asking(body: dict[str, Any]) -> str | tuple[Any, ...]:
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        if not results:
            return ("tool_calls", [{"name": "request_escalation",
                                    "arguments": {"network": ["pypi.org:443"], "reason": "install a package"}}])
        return "I could not finish."

    async with FakeOpenAI(reply=asking) as model:
        run = load_eval_run(EXAMPLE / "env-fix.yaml")
        run.spec.target.model.base_url = model.base_url
        del run.spec.gates[:]
        run.spec.evaluators.add(ref="builtin/sandbox-events")
        outcome = await execute_run(run, base_dir=EXAMPLE, retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.005))
    [record] = outcome.records
    [step] = [s for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    event = from_value(step.attributes["evalsi.sandbox.event"])
    assert (step.name, event["kind"], event["decision"], event["requested"]) == (
        "request_escalation", "escalation_request", "denied", {"network": ["pypi.org:443"]})
    scores = {r.evaluator: r for r in outcome.results.run.results}["sandbox-events"].scores
    assert {s.name: (s.passed if s.name == "clean" else s.number) for s in scores} == {
        "clean": False, "denials": 0.0, "escalation_requests": 1.0, "escalations_granted": 0.0}
