"""An environment's MCP servers (``tools.mcp``) run inside its sandbox on the real rungs: the scripted model calls a
server's tool, which reads the workspace, and the checker passes; the server sees the sandbox's files, never the
host's; it is gone after the trial; one that exits at once, or writes a line past the bound, is an infrastructure
error; a rung that cannot host it refuses naming the field and the rung."""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalsi.errors import BadInputError
from evalsi.harness.environment import environment_from_mapping
from evalsi.harness.environment_run import EnvironmentFailure, environment_mcp_tools, prepared
from evalsi.harness.mcp import McpError, StdioMcpClient
from evalsi.harness.mcp_sandbox import sandbox_mcp_tools
from evalsi.harness.sandbox_tools import sandbox_tools
from evalsi.judges import RetryPolicy
from evalsi.runs.embedded import execute_run
from evalsi.runs.spec import load_eval_run
from evalsi.sandbox.access import LadderOpener
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import RootFilesystem
from evalsi.testing import FakeOpenAI
from evalsi.testing.reachable_tmp import reachable_tmp_dir
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_TOOL
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR, OUTCOME_SCORED

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "env-fix"
SERVER = (Path(__file__).parent / "sandbox_mcp_server.py").read_text()
FAST = RetryPolicy(base_delay_s=0.001, max_delay_s=0.005)


def running(token: str) -> list[int]:
    """The host's processes whose command line carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def environment(token: str, **extra: Any) -> dict[str, Any]:
    return {"files": {"server.py": SERVER, "notes.txt": "secret-42"},
            "tools": {"mcp": [{"name": "fs", "command": ["python3", "server.py", token]}]},
            "check": 'test "$(cat answer.txt)" = secret-42',
            "sandbox": {"minIsolation": "namespaced", "resources": {"timeout": "30s"}}, **extra}


async def run_rows(workspaces: Path, base_url: str, env: dict[str, Any]) -> Any:
    (workspaces / "rows.jsonl").write_text(json.dumps({"id": "t", "input": "Copy notes.txt to answer.txt.",
                                                       "metadata": {"environment": env}}) + "\n")
    run = load_eval_run(EXAMPLE / "env-fix.yaml")
    run.spec.target.model.base_url = base_url
    run.spec.target.model.params["max_retries"] = 0
    run.spec.dataset.path = "rows.jsonl"
    del run.spec.gates[:]
    return await execute_run(run, base_dir=workspaces, retry=FAST)


@pytest.fixture
def workspaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # no evalsi.yaml here: the default ladder (bwrap first)
    return tmp_path


async def test_the_model_calls_a_server_in_the_sandbox_and_the_checker_passes(workspaces: Path) -> None:
    token = uuid.uuid4().hex
    secret = workspaces / "host-secret.txt"
    secret.write_text("the host's own\n")
    host_hostname = Path("/etc/hostname").read_text() if Path("/etc/hostname").exists() else None
    seen: dict[str, Any] = {}

    def reply(body: dict) -> object:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if turn == 0:
            return ("tool_calls", [{"name": "fs_read", "arguments": {"path": "notes.txt"}}])
        if turn == 1:
            seen["notes"], seen["pids"] = results[0], running(token)
            return ("tool_calls", [{"name": "fs_read", "arguments": {"path": str(secret)}},
                                   {"name": "fs_read", "arguments": {"path": "/etc/hostname"}}])
        if turn == 2:
            seen["secret"], seen["hostname"] = results[1], results[2]
            return ("tool_calls", [{"name": "write_file", "arguments": {"path": "answer.txt",
                                                                         "content": seen["notes"]}}])
        return "Done."

    async with FakeOpenAI(reply=reply) as model:
        outcome = await run_rows(workspaces, model.base_url, environment(token))
    [result] = outcome.results.run.results
    assert (result.outcome, result.scores[0].passed) == (OUTCOME_SCORED, True), result.reason
    [record] = outcome.records
    steps = [s for s in record.trajectory.steps if s.type == STEP_TYPE_TOOL]
    assert [s.name for s in steps] == ["fs_read", "fs_read", "fs_read", "write_file"]
    # The server's tools were told to the model beside the sandbox tools, prefixed with the server's name.
    names = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"fs_read", "run_shell", "read_file"} <= names
    assert seen["notes"] == "secret-42"
    # A host file outside the sandbox's root is not there for the server; /etc/hostname is the sandbox's.
    assert seen["secret"] == "error: cannot read: No such file or directory"
    assert "the host's own" not in seen["hostname"]
    if host_hostname and host_hostname.strip() != "sandbox":
        assert seen["hostname"] != host_hostname
    # It ran while the trial did (bwrap and the server carry the token), and nothing of it is left.
    assert seen["pids"]
    assert running(token) == []
    assert not list(workspaces.glob("evalsi-ws-*"))


async def test_a_server_that_exits_at_once_is_an_infra_error_and_the_model_is_never_asked(
        workspaces: Path) -> None:
    env = environment("x", tools={"mcp": [{"name": "fs", "command": "echo no server here >&2; exit 3"}]})
    async with FakeOpenAI(reply="never") as model:
        outcome = await run_rows(workspaces, model.base_url, env)
    [result] = outcome.results.run.results
    assert (result.outcome, result.error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
    assert "environment.tools.mcp[0] (fs)" in result.reason and "exited (code 3)" in result.reason
    assert "no server here" in result.reason
    assert model.requests == []
    assert not list(workspaces.glob("evalsi-ws-*"))


async def test_a_server_that_dies_during_the_trial_makes_it_an_infra_error(workspaces: Path) -> None:
    token = uuid.uuid4().hex
    env = environment(token, tools={"mcp": [{"name": "fs", "command": ["python3", "server.py", token,
                                                                      "--die-on-call"]}]})

    def reply(body: dict) -> object:
        return ("tool_calls", [{"name": "fs_read", "arguments": {"path": "notes.txt"}}])

    async with FakeOpenAI(reply=reply) as model:
        outcome = await run_rows(workspaces, model.base_url, env)
    [result] = outcome.results.run.results
    assert (result.outcome, result.error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
    assert "MCP server python3 server.py" in result.reason and "exited (code 5)" in result.reason
    assert len(model.requests) == 1  # the trial ended there, not scored as the agent's failure
    assert running(token) == []


@pytest.fixture(scope="module")
def sandboxd() -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:  # its helper lives beside the sandbox tests
        patch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "sandbox"))
        from sandboxd_process import running_sandboxd

        with reachable_tmp_dir("sbxd") as directory, running_sandboxd(directory) as (address, _):
            yield address


@pytest.fixture
def bwrap(tmp_path: Path) -> LadderOpener:
    return LadderOpener(Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=tmp_path / "cache")))


async def test_a_line_past_the_bound_or_no_answer_is_an_mcp_error(bwrap: LadderOpener,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    flood = "import sys, time\nsys.stdout.write('x' * (3 << 20))\nsys.stdout.flush()\ntime.sleep(60)\n"
    env = environment_from_mapping({"files": {"flood.py": flood}, "tools": {"mcp": [
        {"name": "flood", "command": ["python3", "flood.py"]}]}}, "environment")
    async with prepared(env, bwrap, "p") as session:
        with pytest.raises(McpError, match=r"environment.tools.mcp\[0\] \(flood\): .*a line of more than 1048576"):
            async with sandbox_mcp_tools(env.mcp, session):
                pass
    monkeypatch.setattr(StdioMcpClient, "handshake_timeout_s", 1.0)
    env = environment_from_mapping({"tools": {"mcp": [
        {"name": "chatty", "command": "while true; do echo not json-rpc; sleep 0.1; done"}]}}, "environment")
    async with prepared(env, bwrap, "p") as session:
        with pytest.raises(McpError, match=r"\(chatty\): .*no answer to initialize within 1s"):
            async with sandbox_mcp_tools(env.mcp, session):
                pass


async def test_the_confined_rung_hosts_a_server_too(tmp_path: Path) -> None:
    # Landlock has no mount namespace: it runs only trusted code, with the host's root.
    opener = LadderOpener(Ladder(SandboxConfig(ladder=("landlock",), root=RootFilesystem("host"),
                                               cache_dir=tmp_path / "cache")))
    token = uuid.uuid4().hex
    env = environment_from_mapping({**environment(token), "sandbox": {"minIsolation": "confined"}}, "environment")
    async with prepared(env, opener, "p") as session:
        assert session.isolation.driver == "landlock"
        async with sandbox_mcp_tools(env.mcp, session) as tools:
            assert (await tools["fs_read"].call({"path": "notes.txt"})).value == "secret-42"
            assert running(token)
    assert running(token) == []


async def test_the_kernel_rung_hosts_a_server_and_its_destroy_ends_it(tmp_path: Path) -> None:
    opener = LadderOpener(Ladder(SandboxConfig(ladder=("gvisor",), cache_dir=tmp_path / "cache")))
    token = uuid.uuid4().hex
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's own\n")
    env = environment_from_mapping({**environment(token), "sandbox": {"minIsolation": "kernel"}}, "environment")
    async with prepared(env, opener, "p") as session:
        assert session.isolation.driver == "gvisor"
        async with sandbox_mcp_tools(env.mcp, session) as tools:
            assert (await tools["fs_read"].call({"path": "notes.txt"})).value == "secret-42"
            hidden = await tools["fs_read"].call({"path": str(secret)})
            assert hidden.error == "cannot read: No such file or directory"
            assert running(token)  # its runsc exec, on the host
            assert token in await guest_commands(session)
        # Killed, its runsc exec ended and its stdin closed: the server left the guest too.
        assert running(token) == []
        for _ in range(50):
            if token not in await guest_commands(session):
                break
            await asyncio.sleep(0.1)
        assert token not in await guest_commands(session)


async def guest_commands(session: Any) -> str:
    """Every command line in the sandbox, as its own /proc shows them."""
    result = await session.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
    return result.stdout.decode()


@pytest.mark.parametrize(("tools", "message"), [
    ({"mcp": [{"name": "fs"}]}, r"environment.tools.mcp\[0\].command: required"),
    ({"mcp": [{"name": "f s", "command": ["x"]}]}, r"environment.tools.mcp\[0\].name: 'f s'; a name is a letter"),
    ({"mcp": [{"name": "fs", "command": ["x"]}, {"name": "fs", "command": ["y"]}]},
     r"environment.tools.mcp\[1\].name: 'fs' names another server too"),
    ({"mcp": [{"name": "fs", "command": ["x"], "url": "http://h"}]}, r"mcp\[0\].url: unknown key"),
    ({"mcp": [{"name": f"s{i}", "command": ["x"]} for i in range(9)]}, r"a list of at most 8 servers"),
    ({"mcp": [{"name": "fs", "command": ["x"], "timeout": "2d"}]}, r"mcp\[0\].timeout: the server's lifetime"),
    ({"python": ["m:f"]}, r"environment.tools: expected an object with mcp"),
])
def test_a_bad_tools_key_is_refused_naming_the_field(tools: dict, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        environment_from_mapping({"tools": tools}, "environment")


async def test_after_a_granted_escalation_the_servers_run_in_the_wider_sandbox(bwrap: LadderOpener) -> None:
    token = uuid.uuid4().hex
    env = environment_from_mapping({**environment(token), "fileAccess": "read-only",
                                    "escalation": {"allow": {"fileAccess": ["workspace-write"]}}}, "environment")
    async with prepared(env, bwrap, "p") as session, sandbox_mcp_tools(env.mcp, session) as tools:
        shell = sandbox_tools(session)
        assert (await tools["fs_read"].call({"path": "notes.txt"})).value == "secret-42"
        granted = await shell["request_escalation"].call({"file_access": "workspace-write", "reason": "edit"})
        assert granted.error is None, granted.error
        wrote = await shell["run_shell"].call({"command": "echo changed > notes.txt"})
        assert wrote.value["exit_code"] == 0, wrote.value
        # The old sandbox is gone with its server; the tool now reads the wider sandbox's workspace.
        assert (await tools["fs_read"].call({"path": "notes.txt"})).value == "changed\n"
    assert running(token) == []


async def test_a_cli_agent_refuses_an_environment_with_servers_naming_the_field(workspaces: Path) -> None:
    (workspaces / "rows.jsonl").write_text(json.dumps({"id": "t", "input": "Fix it.",
                                                       "metadata": {"environment": environment("x")}}) + "\n")
    run = load_eval_run(EXAMPLE / "cli-agent.yaml")
    run.spec.dataset.path = "rows.jsonl"
    outcome = await execute_run(run, base_dir=workspaces, retry=FAST)
    [result] = outcome.results.run.results
    assert result.outcome != OUTCOME_SCORED
    assert "environment.tools.mcp: MCP servers in the sandbox give their tools to the built-in agent" in result.reason
    assert not list(workspaces.glob("evalsi-ws-*"))  # refused before any sandbox was opened


async def test_a_sandbox_of_sandboxd_refuses_a_server_and_the_trial_is_an_environment_failure(
        sandboxd: str, tmp_path: Path) -> None:
    from evalsi.sandbox.sandboxd_opener import SandboxdOpener

    opener = SandboxdOpener(sandboxd)
    token = uuid.uuid4().hex
    env = environment_from_mapping(environment(token), "environment")
    try:
        async with prepared(env, opener, "p") as session:
            with pytest.raises(EnvironmentFailure, match=r"SANDBOX_UNAVAILABLE: environment.tools.mcp\[0\] \(fs\): "
                                                         r"this sandbox \(rung bwrap, namespaced\) cannot host .* "
                                                         r"not the vm rung nor a sandbox of evalsi-sandboxd"):
                async with environment_mcp_tools(env, session):
                    pass
    finally:
        await opener.close()
    assert running(token) == []


async def test_evalsi_harness_trials_get_the_servers_tools_and_the_cassette_records_them(
        bwrap: LadderOpener) -> None:
    from harness_helpers import make_config

    from evalsi.harness import Harness, Task
    from evalsi.harness.environment_run import trial_in_environment

    def reply(body: dict) -> object:
        if not any(m["role"] == "tool" for m in body["messages"]):
            return ("tool_calls", [{"name": "fs_read", "arguments": {"path": "notes.txt"}}])
        return "The notes say " + next(m["content"] for m in body["messages"] if m["role"] == "tool")

    env = environment_from_mapping({**environment(uuid.uuid4().hex), "check": "true"}, "environment")
    async with FakeOpenAI(reply=reply) as model, Harness.open(make_config(model.base_url),
                                                              sandbox_tools=True) as harness:
        result = await trial_in_environment(harness, Task(id="t", input="Read the notes."), env, bwrap, "p",
                                            trial=1, run_id="r")
        plain = await harness.run(Task(id="u", input="Read the notes."), run_id="r")
    assert result.error is None and result.record.output.text == "The notes say secret-42"
    assert "fs_read" in [tool["name"] for tool in result.cassette.header["tools"]]
    # The harness's own tools stay as they were for a task without the environment's servers.
    assert "fs_read" not in [tool["name"] for tool in plain.cassette.header["tools"]]
    assert "fs_read" not in {t["function"]["name"] for t in model.requests[-1]["tools"]}
