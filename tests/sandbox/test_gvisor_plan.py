"""The kernel rung's pure parts: the session's OCI spec and the outcome dialects."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from evalsi.sandbox.gvisor import SANDBOX_UID, bundle_config, classify_kernel
from evalsi.sandbox.model import Level, Outcome, Resources, SandboxSpec
from evalsi.sandbox.process import Finished

SPEC = SandboxSpec(min_isolation=Level.KERNEL, resources=Resources(memory_bytes=1 << 28, pids=40, cpu_seconds=5))


def test_the_bundle_is_unprivileged_read_only_and_bounded() -> None:
    config = bundle_config(root=Path("/images/py"), host_usr=False, workspace="/srv/ws", workdir="/workspace",
                           env={"PATH": "/usr/bin"}, spec=SPEC)
    process = config["process"]
    assert process["user"] == {"uid": SANDBOX_UID, "gid": SANDBOX_UID}
    assert process["noNewPrivileges"] is True
    assert all(value == [] for value in process["capabilities"].values())
    assert process["env"] == ["PATH=/usr/bin"]
    limits = {item["type"]: item["hard"] for item in process["rlimits"]}
    assert limits["RLIMIT_AS"] == 1 << 28 and limits["RLIMIT_NPROC"] == 40 and limits["RLIMIT_CPU"] == 5
    assert config["root"] == {"path": "/images/py", "readonly": True}
    assert {"type": "network"} in config["linux"]["namespaces"]
    destinations = {mount["destination"]: mount for mount in config["mounts"]}
    assert "/usr" not in destinations  # an image brings its own
    assert destinations["/workspace"]["source"] == "/srv/ws" and "rw" in destinations["/workspace"]["options"]


def test_host_mode_binds_usr_read_only_and_a_read_only_workspace_stays_so() -> None:
    config = bundle_config(root=Path("/skeleton"), host_usr=True, workspace="/srv/ws", workdir="/w",
                           env={}, spec=replace(SPEC, file_access="read-only"))
    destinations = {mount["destination"]: mount for mount in config["mounts"]}
    assert destinations["/usr"]["options"] == ["rbind", "ro"]
    assert "ro" in destinations["/w"]["options"]


def _finished(code: int, stderr: bytes = b"", **flags: bool) -> Finished:
    return Finished(code, b"", stderr, timed_out=flags.get("timed_out", False),
                    output_capped=flags.get("capped", False))


def test_before_the_guest_starts_runsc_speaks_after_it_the_program_does() -> None:
    gone = _finished(128, b"container \"x\" not found\n")
    assert classify_kernel(gone, started=False).kind == "runner_failure"
    assert classify_kernel(gone, started=True) == Outcome("exit", code=128)
    missing = _finished(128, b'sandbox: error finding executable "nope" in PATH: no such file or directory\n')
    assert classify_kernel(missing, started=False) == Outcome("exit", code=127)
    full = _finished(128, b"executing command \"true\" in sandbox: try again\n")
    assert classify_kernel(full, started=False).kind == "denied"
    assert classify_kernel(Finished(-1, spawn_error="FileNotFoundError: runsc"), started=False).kind \
        == "runner_failure"


def test_the_programs_own_outcomes() -> None:
    assert classify_kernel(_finished(1, b"sh: cannot create /usr/x: Read-only file system"), started=True).kind \
        == "denied"
    assert classify_kernel(_finished(-9, timed_out=True), started=True) == Outcome("timeout")
    assert classify_kernel(_finished(-9, capped=True), started=True) == Outcome("denied", effect="output cap")
    assert classify_kernel(_finished(-9), started=True, oom_killed=True) == Outcome("denied", effect="oom-kill")
    assert classify_kernel(_finished(0), started=True) == Outcome("exit", code=0)
