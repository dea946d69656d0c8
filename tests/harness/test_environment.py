"""Harness environments (§11): the format's checks, the checker's verdicts, and the sandbox's life on the real
bubblewrap rung (files written, setup run, the agent's tools acting inside, denials as tool errors with a policy
event, the sandbox destroyed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.harness.checker import CheckerError, junit_verdict, verdict_of
from evalsi.harness.environment import Checker, environment_from_mapping
from evalsi.harness.environment_run import EnvironmentFailure, prepared, run_checker
from evalsi.harness.sandbox_tools import sandbox_tools
from evalsi.sandbox.access import LadderOpener
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import ExecResult, IsolationReport, Level, Outcome

BUGGY = {"calc.py": "def add(a, b):\n    return a - b\n",
         "test_calc.py": "from calc import add\nassert add(1, 2) == 3, 'add(1, 2) != 3'\nprint('ok')\n"}


@pytest.fixture
def opener(tmp_path: Path) -> LadderOpener:
    return LadderOpener(Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=tmp_path / "cache")))


def _result(kind: str, code: int | None = None, stdout: bytes = b"", effect: str = "",
            signature: str = "") -> ExecResult:
    return ExecResult(Outcome(kind, code=code, effect=effect, signature=signature),  # type: ignore[arg-type]
                      IsolationReport("bwrap", Level.NAMESPACED, "full"), stdout=stdout)


# --- the format ------------------------------------------------------------------------------------------------


def test_an_environment_reads_files_setup_checker_and_sandbox() -> None:
    env = environment_from_mapping({
        "files": BUGGY, "setup": ["python3 -m py_compile calc.py", ["true"]],
        "check": {"command": "python3 test_calc.py", "format": "junit", "junit": "report.xml", "timeout": "20s"},
        "sandbox": {"minIsolation": "kernel", "resources": {"timeout": "5s", "pids": 64}},
    }, "spec.harness.environment")
    assert env.files["calc.py"] == BUGGY["calc.py"].encode()
    assert env.setup == (("sh", "-c", "python3 -m py_compile calc.py"), ("true",))
    assert env.check == Checker(("sh", "-c", "python3 test_calc.py"), "junit", "report.xml", 20.0)
    spec = env.sandbox_spec()
    assert spec.min_isolation == Level.KERNEL and spec.resources.timeout_s == 5.0 and spec.resources.pids == 64


@pytest.mark.parametrize(("doc", "message"), [
    ({"file": {}}, "spec.harness.environment.file: unknown key; expected one of files, setup, check"),
    ({"files": {"../etc/passwd": "x"}}, "spec.harness.environment.files.../etc/passwd: a file lives in the workspace"),
    ({"files": {"/etc/passwd": "x"}}, "a file lives in the workspace"),
    ({"files": {"/workspace/": "x"}}, "names the workspace itself, not a file in it"),
    ({"files": {"a.py": "x", "./a.py": "y"}}, "spec.harness.environment.files../a.py: names the file 'a.py' a second"),
    ({"check": {"command": "x", "format": "junit", "junit": "/etc/report.xml"}},
     "spec.harness.environment.check.junit: a file lives in the workspace"),
    ({"files": {"a": 3}}, "spec.harness.environment.files.a: expected the file's text"),
    ({"files": {f"f{i}": "" for i in range(300)}}, "300 files is over the limit of 256"),
    ({"files": {"a": "x" * (9 * 1024 * 1024)}}, "over the limit of 8388608 bytes"),
    ({"setup": "make"}, "spec.harness.environment.setup: expected a list of commands"),
    ({"setup": [""]}, "spec.harness.environment.setup[0]: an empty command"),
    ({"check": {"command": "x", "format": "tap"}}, "check.format: 'tap'; accepted: exit, json, junit"),
    ({"check": {"command": "x", "format": "junit"}}, "check.junit: format junit needs the report's workspace path"),
    ({"check": {"format": "exit"}}, "check.command: required"),
    ({"check": {"command": "x", "timeout": "2h"}}, "check.timeout: must be between 0 and 3600s"),
    ({"sandbox": {"minIsolation": "strong"}}, "sandbox.minIsolation: 'strong' is not an isolation level"),
    ({"sandbox": {"memroy": 1}}, "spec.harness.environment.sandbox: "),
    ({"root": {"docker": "python:3"}}, "spec.harness.environment.root: expected {image: DIR} or {tarball: FILE}"),
])
def test_a_bad_environment_is_refused_naming_the_field(doc: dict, message: str) -> None:
    with pytest.raises(BadInputError) as caught:
        environment_from_mapping(doc, "spec.harness.environment")
    assert message in str(caught.value)


# --- the checker -----------------------------------------------------------------------------------------------


def test_the_checker_verdict_from_exit_json_and_junit() -> None:
    exit_check = Checker(("true",))
    assert verdict_of(exit_check, _result("exit", 0, b"ok")).passed
    failed = verdict_of(exit_check, _result("exit", 1, b"AssertionError: add is wrong"))
    assert not failed.passed and failed.reason == "the checker exited 1: AssertionError: add is wrong"

    json_check = Checker(("true",), "json")
    lines = b'noise\n{"success": true, "reason": "3/3", "score": 1}\n{"other": 1}\n'
    verdict = verdict_of(json_check, _result("exit", 0, lines))
    assert (verdict.passed, verdict.reason, verdict.score) == (True, "3/3", 1.0)
    assert not verdict_of(json_check, _result("exit", 0, b"all good")).passed  # no verdict line is a failure

    report = (b'<testsuite><testcase classname="t" name="a"/><testcase classname="t" name="b">'
              b'<failure message="no"/></testcase></testsuite>')
    junit = verdict_of(Checker(("true",), "junit", "r.xml"), _result("exit", 1), report)
    assert (junit.passed, junit.tests, junit.failures, junit.reason) == (False, 2, 1, "1/2 tests passed; failed: t.b")
    assert not verdict_of(Checker(("true",), "junit", "r.xml"), _result("exit", 0), None).passed


def test_a_checker_timeout_or_denial_fails_the_task_and_a_runner_failure_is_infra() -> None:
    check = Checker(("true",), timeout_s=3)
    assert verdict_of(check, _result("timeout")).reason == "the checker timed out after 3s"
    denied = verdict_of(check, _result("denied", effect="oom-kill"))
    assert not denied.passed and "oom-kill" in denied.reason
    with pytest.raises(CheckerError, match="could not run: bwrap: broken") as caught:
        verdict_of(check, _result("runner_failure", signature="bwrap: broken"))
    assert isinstance(caught.value, InfraError)


def test_a_hostile_junit_report_is_refused() -> None:
    bomb = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa">]><testsuite>&a;</testsuite>'
    with pytest.raises(CheckerError, match="DOCTYPE"):
        junit_verdict(bomb)
    with pytest.raises(CheckerError, match="not XML"):
        junit_verdict(b"<testsuite>")


# --- on the real sandbox ---------------------------------------------------------------------------------------


async def test_files_setup_tools_and_checker_run_in_a_sandbox_destroyed_afterwards(opener: LadderOpener) -> None:
    # No .pyc: a fix written within the second of the original, at its size, would be read from a stale cache.
    env = environment_from_mapping({"files": BUGGY, "setup": ["python3 -c 'import calc'"],
                                    "check": "python3 test_calc.py", "env": {"PYTHONDONTWRITEBYTECODE": "1"}}, "env")
    async with prepared(env, opener, "p") as session:
        workspace = session.current.host_workspace  # type: ignore[attr-defined]
        assert session.isolation.driver == "bwrap"
        tools = sandbox_tools(session)
        listed = await tools["list_files"].call({})
        assert "calc.py" in listed.value and "test_calc.py" in listed.value
        before = await run_checker(env, session)
        assert before is not None and not before.passed and "add(1, 2) != 3" in before.reason
        text = (await tools["read_file"].call({"path": "calc.py"})).value
        await tools["write_file"].call({"path": "calc.py", "content": text.replace("a - b", "a + b")})
        ran = await tools["run_shell"].call({"command": "python3 test_calc.py; id -u"})
        assert ran.error is None and ran.value["exit_code"] == 0 and ran.value["stdout"].split() == ["ok", "65534"]
        after = await run_checker(env, session)
        assert after is not None and after.passed
    assert not os.path.exists(workspace)  # destroyed with the context


async def test_the_agents_tools_are_bounded_and_a_denial_is_a_tool_error_with_a_policy_event(
        opener: LadderOpener) -> None:
    env = environment_from_mapping({}, "env")
    async with prepared(env, opener, "p") as session:
        tools = sandbox_tools(session)
        planting = await tools["run_shell"].call({"command": "echo x > /usr/planted"})
        assert planting.error == "denied by the sandbox: write to a read-only path"
        assert planting.sandbox_event == {"kind": "denied", "effect": "write to a read-only path", "tool": "run_shell",
                                          "driver": "bwrap"}
        flood = await tools["run_shell"].call({"command": "head -c 20000 /dev/zero | tr '\\0' x"})
        assert flood.error is None and flood.value["stdout"] == "x" * 16384 + "\n[... cut: 3616 more characters]"
        outside = await tools["read_file"].call({"path": "../../etc/shadow"})
        assert outside.error is not None and "'..' is not accepted" in outside.error
        await tools["run_shell"].call({"command": "ln -s /etc/passwd planted"})
        planted = await tools["read_file"].call({"path": "planted"})
        assert planted.error is not None and "root:" not in planted.error  # the host never follows the link
        slow = await tools["run_shell"].call({"command": "sleep 5", "timeout": 0.5})
        assert slow.error == "the command timed out after 0.5s"
        bad = await tools["run_shell"].call({"command": 3})
        assert bad.error == "run_shell: command: expected a string"


async def test_a_failing_setup_is_an_environment_failure_and_the_sandbox_is_destroyed(
        opener: LadderOpener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the bwrap rung's workspaces land here
    env = environment_from_mapping({"setup": ["echo preparing; echo broken dependency >&2; exit 3"]}, "env")
    with pytest.raises(EnvironmentFailure) as caught:
        async with prepared(env, opener, "p"):
            pytest.fail("the agent must not start after a failed setup")
    assert str(caught.value) == ("environment setup[0] 'sh -c echo preparing; echo broken dependency >&2; exit 3' "
                                 "exited 3: broken dependency")
    assert isinstance(caught.value, InfraError)
    assert not list(tmp_path.glob("evalsi-ws-*"))


async def test_a_minimum_no_rung_meets_is_an_environment_failure_with_nothing_run(opener: LadderOpener) -> None:
    env = environment_from_mapping({"sandbox": {"minIsolation": "vm"}, "setup": ["touch /tmp/ran"]}, "env")
    with pytest.raises(EnvironmentFailure, match="SANDBOX_UNAVAILABLE"):
        async with prepared(env, opener, "p"):
            pytest.fail("no sandbox, no agent")


async def test_a_junit_checker_reads_its_report_from_the_sandbox(opener: LadderOpener) -> None:
    report = ('<testsuite><testcase classname="calc" name="add"/><testcase classname="calc" name="neg">'
              '<failure message="-1 + 1 != 0"/></testcase></testsuite>')
    env = environment_from_mapping({
        "files": {"report.tmpl": report},
        "check": {"command": "mkdir -p out && cp report.tmpl out/junit.xml; exit 1", "format": "junit",
                  "junit": "out/junit.xml"}}, "env")
    async with prepared(env, opener, "p") as session:
        verdict = await run_checker(env, session)
        missing = await run_checker(environment_from_mapping(
            {"check": {"command": "true", "format": "junit", "junit": "none.xml"}}, "env"), session)
    assert verdict is not None and (verdict.passed, verdict.reason, verdict.score) == (
        False, "1/2 tests passed; failed: calc.neg", 0.5)
    assert missing is not None and (missing.passed, missing.reason) == (False, "no JUnit report at none.xml (the "
                                                                               "checker exited 0)")


async def test_a_root_the_machine_lacks_is_an_environment_failure(opener: LadderOpener, tmp_path: Path) -> None:
    env = environment_from_mapping({"root": {"image": str(tmp_path / "no-such-image")}}, "env")
    with pytest.raises(EnvironmentFailure, match=r"environment sandbox: .*no-such-image"):
        async with prepared(env, opener, "p"):
            pytest.fail("no root, no agent")


def test_a_sandbox_event_survives_the_cassette() -> None:
    from evalsi.harness.tools import ToolResult

    result = ToolResult(error="denied by the sandbox: output cap", sandbox_event={"kind": "denied"})
    assert ToolResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert "sandbox_event" not in ToolResult(value=1).to_dict()


def test_task_success_reads_the_environment_checkers_verdict_first() -> None:
    from evalsi.packs.agent.outcome import task_success
    from evalsi.records import to_value
    from evalsi.v1alpha1.record_pb2 import Record

    record = Record(id="r")
    record.metadata["task_success"].bool_value = True  # an older marker the checker's own verdict overrides
    record.metadata["checker"].CopyFrom(to_value({"passed": False, "reason": "1/2 tests passed; failed: t.b",
                                                  "format": "junit", "tests": 2, "failures": 1}))
    score = task_success(record)
    assert (score.passed, score.explanation) == (False, "1/2 tests passed; failed: t.b")
