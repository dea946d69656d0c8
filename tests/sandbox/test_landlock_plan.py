"""The confined rung's pure parts: what a policy becomes on each Landlock ABI, and the outcome dialects."""

from __future__ import annotations

import json
import signal

from evalsi.sandbox import launch
from evalsi.sandbox.landlock import LaunchStatus, classify_confined, parse_status
from evalsi.sandbox.model import Outcome
from evalsi.sandbox.process import Finished


def classify(finished: Finished, status: bytes = b"", **verdicts: bool) -> Outcome:
    return classify_confined(finished, parse_status(status), **verdicts)


def _spawned(code: int = 0, *, stderr: bytes = b"", **flags: bool) -> Finished:
    return Finished(code, b"", stderr, timed_out=flags.get("timed_out", False),
                    output_capped=flags.get("capped", False), duration_s=0.01)


def test_older_abis_are_planned_as_partial_with_what_is_missing() -> None:
    policy = {"read": ["/usr"], "write": ["/w"], "connect": [443], "scope": True}
    old = launch.plan_rules(policy, 3)
    assert old.handled_net == 0 and old.ports == [] and old.scoped == 0
    assert any("tcp" in item for item in old.not_enforced)
    assert any("scoping" in item for item in old.not_enforced)
    assert old.handled_fs & launch.TRUNCATE and not old.handled_fs & launch.IOCTL_DEV
    new = launch.plan_rules(policy, 7)
    assert new.not_enforced == []
    assert new.ports == [(443, launch.NET_CONNECT_TCP)]
    assert new.scoped == launch.SCOPE_SIGNAL | launch.SCOPE_ABSTRACT_UNIX


def test_read_rules_never_grant_writes_and_file_rules_carry_only_file_rights() -> None:
    plan = launch.plan_rules({"read": ["/usr"], "write": ["/w"]}, 7)
    (read_path, read_dir, read_file), (write_path, write_dir, write_file) = plan.paths
    assert (read_path, write_path) == ("/usr", "/w")
    assert not read_dir & (launch.WRITE_FILE | launch.MAKE_REG | launch.REMOVE_FILE | launch.TRUNCATE)
    assert write_dir == plan.handled_fs
    assert not read_file & launch.READ_DIR and not write_file & launch.MAKE_DIR


def test_the_launchers_status_decides_runner_failures_and_exec_denials() -> None:
    failed = json.dumps({"kind": "runner_failure", "message": "landlock_create_ruleset: Invalid argument"}).encode()
    assert classify(_spawned(125), failed).kind == "runner_failure"
    refused = json.dumps({"kind": "denied", "message": "exec /opt/x: Permission denied"}).encode()
    assert classify(_spawned(126), refused).kind == "denied"
    assert classify(_spawned(125), b"garbage").kind == "runner_failure"
    assert parse_status(b"") == LaunchStatus()
    # the same text on the program's stderr, without the status descriptor, is the program's exit
    assert classify(_spawned(125, stderr=b"evalsi launch: landlock_create_ruleset")) == Outcome("exit", code=125)


def test_signals_and_denial_texts_are_the_programs_behavior() -> None:
    assert classify(_spawned(-signal.SIGXCPU)).effect == "cpu time limit"
    assert classify(_spawned(-signal.SIGSEGV)) == Outcome("exit", code=128 + signal.SIGSEGV)
    assert classify(_spawned(1, stderr=b"cat: /etc/shadow: Permission denied")).kind == "denied"
    assert classify(_spawned(0, stderr=b"Permission denied")) == Outcome("exit", code=0)
    assert classify(_spawned(-signal.SIGKILL), oom_killed=True) == Outcome("denied", effect="oom-kill")
    assert classify(_spawned(-9, timed_out=True)) == Outcome("timeout")
    assert classify(_spawned(-9, capped=True)) == Outcome("denied", effect="output cap")
    assert classify(Finished(-1, spawn_error="FileNotFoundError: /nonexistent/python3")).kind == "runner_failure"
