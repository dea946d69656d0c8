"""The confined rung (Landlock) under real escape attempts: each must end as ``denied`` (or ``timeout``), never as a
successful exit, and a broken runner must be a ``runner_failure``, never a denial.

The targets outside the workspace are made readable and writable for everyone (mode 0777/0666), so only Landlock,
not file permissions, stands between the program and them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from evalsi.sandbox import launch
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.host_files import HostFileError
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.landlock import LandlockDriver, LandlockSession
from evalsi.sandbox.model import (
    Endpoint,
    Level,
    NetworkPolicy,
    Resources,
    RootFilesystem,
    SandboxSpec,
    SandboxUnavailable,
)

RESOURCES = Resources(timeout_s=5.0, memory_bytes=256 << 20, pids=32, output_bytes=64 * 1024)
# Landlock cannot change the root (no mount namespace): it runs only on the host's root, the operator's opt-in for
# trusted code; the default root (the runtime image) makes it unavailable (test below).
HOST = RootFilesystem("host")
HOST_CONFIG = SandboxConfig(root=HOST)
# The session fixture's host user (sandbox.host_uid): one of this test process's own, so "no process of it is left"
# is not confused by other sandboxes (bwrap's and gVisor's run as 65534 too, and tests may run side by side).
HOST_UID = 61000 + os.getpid() % 4000
SPEC = SandboxSpec(min_isolation=Level.CONFINED, resources=RESOURCES, root=HOST)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A host directory everyone may read and write (unlike pytest's 0700 tmp_path), outside any workspace."""
    path = Path(tempfile.mkdtemp(prefix="evalsi-host-"))
    path.chmod(0o777)
    secret = path / "secret.txt"
    secret.write_text("host secret\n")
    secret.chmod(0o666)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["fork", "launcher"])
async def session(request: pytest.FixtureRequest) -> AsyncIterator[LandlockSession]:
    """Both ways of confining: between fork and exec (the default) and through launch.py."""
    session = await LandlockDriver(SandboxConfig(root=HOST, drivers={"landlock": {"mode": request.param}},
                                                 host_uid=HOST_UID, host_gid=HOST_UID)).create(SPEC)
    yield session
    await session.destroy()


async def test_probe_runs_the_real_profile_and_reports_enforcement() -> None:
    assert launch.landlock_abi() > 0, "this machine's kernel has Landlock (INFRA.md: ABI 7)"
    verdict = await LandlockDriver(HOST_CONFIG).probe()
    assert verdict.available, verdict.reason
    assert verdict.level is Level.CONFINED
    # Full needs TCP rules (ABI 4) and scoping (ABI 6); this kernel has ABI 7 (INFRA.md).
    assert verdict.enforcement == ("full" if launch.landlock_abi() >= launch.ABI_SCOPE else "partial")


async def test_with_the_default_root_the_probe_says_landlock_cannot_show_the_runtime_image() -> None:
    verdict = await LandlockDriver().probe()  # the default configuration: the runtime image as root
    assert not verdict.available
    assert "runtime image" in verdict.reason and "sandbox.root: host" in verdict.reason, verdict.reason
    with pytest.raises(SandboxUnavailable, match="mount namespace"):
        await LandlockDriver().create(replace(SPEC, root=RootFilesystem()))


async def test_the_workspace_is_writable_and_read_back(session: LandlockSession) -> None:
    await session.write_files({"in.txt": b"from the host\n"})
    result = await session.exec(["sh", "-c", "cat in.txt; echo made > out.txt; id -u"])
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result.stderr
    assert result.stdout.splitlines()[0] == b"from the host"
    if os.geteuid() == 0:
        assert result.stdout.splitlines()[1] == str(HOST_UID).encode()
    assert (await session.read_files(["out.txt"], max_bytes=100)) == {"out.txt": b"made\n"}
    assert result.isolation.driver == "landlock" and result.isolation.level is Level.CONFINED


async def test_reading_a_host_file_outside_the_root_is_denied(session: LandlockSession, open_dir: Path) -> None:
    for target in (str(open_dir / "secret.txt"), "/etc/shadow", "/root"):
        result = await session.exec(["cat", target])
        assert result.outcome.kind == "denied", (target, result)
        assert b"host secret" not in result.stdout


async def test_writing_outside_the_workspace_is_denied(session: LandlockSession, open_dir: Path) -> None:
    result = await session.exec(["sh", "-c", f"echo pwned > {open_dir}/planted.txt"])
    assert result.outcome.kind == "denied", result
    result = await session.exec(["sh", "-c", f"echo pwned >> {open_dir}/secret.txt"])
    assert result.outcome.kind == "denied", result
    assert not (open_dir / "planted.txt").exists()
    assert (open_dir / "secret.txt").read_text() == "host secret\n"


async def test_connecting_to_a_loopback_listener_on_the_host_is_denied(session: LandlockSession) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        server.setblocking(False)
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        result = await session.exec(["python3", "-c", code])
        assert result.outcome.kind == "denied", result
        assert b"connected" not in result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing ever reached the listener


async def test_an_allowlist_goes_through_the_egress_proxy_and_is_reported_partial(open_dir: Path) -> None:
    """The proxy listens on the host's loopback; Landlock allows TCP connect to its port only, so the allowed
    endpoint is reached through the proxy (logged) and not directly."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        server.setblocking(False)
        spec = replace(SPEC, network=NetworkPolicy((Endpoint("127.0.0.1", port),)))
        session = await LandlockDriver(HOST_CONFIG).create(spec)
        try:
            tunnel = ("import os, socket, urllib.parse; proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY']); "
                      "c = socket.create_connection((proxy.hostname, proxy.port), timeout=5); "
                      f"c.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n'); "
                      "print(c.recv(100).split(b'\\r\\n')[0].decode())")
            through = await session.exec(["python3", "-c", tunnel])
            direct = await session.exec(["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', "
                                                          f"{port}), timeout=2); print('connected')"])
            log = session.egress_log()
        finally:
            await session.destroy()
    assert through.outcome.kind == "exit" and through.stdout == b"HTTP/1.1 200 Connection established\n", through
    assert direct.outcome.kind == "denied" and b"connected" not in direct.stdout, direct
    assert [(e.host, e.port, e.allowed) for e in log] == [("127.0.0.1", port, True)]
    assert "logging proxy" in through.isolation.bounds["network"]
    assert through.isolation.enforcement == "partial"
    assert any("by host" in item for item in through.isolation.not_enforced)


async def test_abstract_unix_sockets_outside_the_sandbox_are_unreachable(session: LandlockSession) -> None:
    if launch.landlock_abi() < launch.ABI_SCOPE:
        pytest.fail("this machine's kernel has Landlock ABI 7 (INFRA.md); scoping needs 6")
    name = f"\0evalsi-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(name)
        server.listen()
        code = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({name!r}); print('connected')"
        result = await session.exec(["python3", "-c", code])
    assert result.outcome.kind == "denied", result
    assert b"connected" not in result.stdout


async def test_a_fork_bomb_stops_at_the_pids_bound_and_leaves_nothing_behind(session: LandlockSession) -> None:
    bomb = "import os\nwhile True:\n    os.fork()"
    result = await session.exec(["python3", "-c", bomb])
    assert result.outcome.kind == "denied", result
    assert "pids" in result.outcome.effect
    if os.geteuid() == 0:
        await asyncio.sleep(0.2)
        assert _live_processes_of(HOST_UID) == [], "the fork bomb left processes running"


async def test_allocating_past_the_memory_bound_is_denied(session: LandlockSession) -> None:
    result = await session.exec(["python3", "-c", "blob = bytearray(400 << 20); print('allocated')"])
    assert result.outcome.kind == "denied", result
    assert "memory" in result.outcome.effect or result.outcome.effect == "oom-kill"
    assert b"allocated" not in result.stdout


async def test_outliving_the_timeout_is_a_timeout(session: LandlockSession) -> None:
    result = await session.exec(["sleep", "30"], timeout_s=0.5)
    assert result.outcome.kind == "timeout"
    assert result.duration_s < 5


async def test_printing_past_the_output_cap_is_stopped(session: LandlockSession) -> None:
    result = await session.exec(["yes"])
    assert result.outcome == result.outcome.__class__("denied", effect="output cap")
    assert result.stdout_truncated and len(result.stdout) == RESOURCES.output_bytes


async def test_the_parents_environment_is_not_readable(session: LandlockSession,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_SECRET", "hunter2")
    result = await session.exec(["sh", "-c", "echo \"[$EVALSI_TEST_SECRET]\""])
    assert result.stdout == b"[]\n"
    result = await session.exec(["sh", "-c", "cat /proc/$PPID/environ /proc/1/environ"])
    assert result.outcome.kind == "denied", result
    assert b"hunter2" not in result.stdout


async def test_a_planted_symlink_is_neither_followed_by_the_host_nor_usable_inside(session: LandlockSession,
                                                                                    open_dir: Path) -> None:
    result = await session.exec(["ln", "-s", str(open_dir / "secret.txt"), "leak"])
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    with pytest.raises(HostFileError):
        await session.read_files(["leak"], max_bytes=1000)
    result = await session.exec(["cat", "leak"])
    assert result.outcome.kind == "denied", result
    # ... and the host's write does not go through a link either
    await session.exec(["ln", "-s", str(open_dir / "planted.txt"), "planted"])
    with pytest.raises(HostFileError):
        await session.write_files({"planted": b"through the link"})
    assert not (open_dir / "planted.txt").exists()


async def test_a_broken_launcher_interpreter_is_a_runner_failure_not_a_denial() -> None:
    driver = LandlockDriver(SandboxConfig(root=HOST, drivers={"landlock": {"mode": "launcher",
                                                                           "python": "/nonexistent/python3"}}))
    session = await driver.create(SPEC)
    try:
        result = await session.exec(["true"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "runner_failure"
    assert "/nonexistent/python3" in result.outcome.signature
    verdict = await driver.probe()
    assert not verdict.available and "/nonexistent/python3" in verdict.reason


async def test_a_ruleset_that_cannot_be_built_is_a_runner_failure(session: LandlockSession) -> None:
    shutil.rmtree(session.tmp)  # a path the ruleset names is gone: our failure, not the program's
    result = await session.exec(["true"])
    assert result.outcome.kind == "runner_failure", result
    assert "tmp" in result.outcome.signature


async def test_a_program_cannot_forge_a_runner_failure(session: LandlockSession) -> None:
    forged = "echo 'evalsi launch: landlock_restrict_self: Permission denied' >&2; exit 125"
    result = await session.exec(["sh", "-c", forged])
    assert result.outcome.kind != "runner_failure"


async def test_an_image_root_is_refused_rather_than_run_on_the_hosts_usr(tmp_path: Path) -> None:
    spec = replace(SPEC, root=RootFilesystem("image", str(tmp_path)))
    with pytest.raises(SandboxUnavailable, match="mount namespace"):
        await LandlockDriver(HOST_CONFIG).create(spec)


async def test_the_ladder_fails_closed_when_the_minimum_is_above_confined(open_dir: Path) -> None:
    ladder = Ladder(SandboxConfig(ladder=("landlock",), root=HOST))
    marker = open_dir / "ran"
    spec = SandboxSpec(min_isolation=Level.NAMESPACED, ladder=("landlock",), root=HOST)
    with pytest.raises(SandboxUnavailable) as refused:
        session = await ladder.create(spec)
        await session.exec(["touch", str(marker)])
    assert refused.value.code == "SANDBOX_UNAVAILABLE"
    assert not marker.exists()
    session = await ladder.create(replace(spec, min_isolation=Level.CONFINED))
    try:
        assert session.isolation.driver == "landlock"
    finally:
        await session.destroy()


def _live_processes_of(uid: int) -> list[int]:
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)] and not fields.get("State", "").strip().startswith("Z"):
            live.append(int(entry))
    return live


async def test_a_read_only_workspace_is_readable_not_writable() -> None:
    session = await LandlockDriver(HOST_CONFIG).create(replace(SPEC, file_access="read-only"))
    try:
        await session.write_files({"given.txt": b"given\n"})
        read = await session.exec(["cat", "given.txt"])
        write = await session.exec(["sh", "-c", "echo x > new.txt"])
    finally:
        await session.destroy()
    assert read.outcome.kind == "exit" and read.stdout == b"given\n"
    assert write.outcome.kind == "denied", write


async def test_udp_raw_and_unix_sockets_are_refused_socketpair_is_not(session: LandlockSession,
                                                                       open_dir: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.setblocking(False)
        port = listener.getsockname()[1]
        code = f"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))"
        udp = await session.exec(["python3", "-c", code])
        assert udp.outcome.kind == "denied", udp
        with pytest.raises(BlockingIOError):
            listener.recv(10)
    path = open_dir / "daemon.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.bind(str(path))
        path.chmod(0o777)
        daemon.listen()
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({str(path)!r}); print('connected')"
        unix = await session.exec(["python3", "-c", code])
    assert unix.outcome.kind == "denied" and b"connected" not in unix.stdout, unix
    pair = await session.exec(["python3", "-c", "import socket; a, b = socket.socketpair(); a.send(b'ok'); "
                                                "print(b.recv(2).decode())"])
    assert pair.outcome == pair.outcome.__class__("exit", code=0) and pair.stdout == b"ok\n", pair
    assert "syscalls" in session.isolation.bounds


async def test_a_descendant_that_leaves_the_process_group_does_not_outlive_the_timeout(
        session: LandlockSession) -> None:
    result = await session.exec(["sh", "-c", "setsid sleep 60 & echo started; sleep 60"], timeout_s=1.0)
    assert result.outcome.kind == "timeout", result
    assert result.duration_s < 10
    # and one that outlives a program that ended on its own (holding its output open) is killed with the
    # execution's cgroup, at the latest a grace second after the timeout
    result = await session.exec(["sh", "-c", "setsid sleep 60 & echo started"], timeout_s=3.0)
    assert result.outcome.kind in ("exit", "timeout") and result.stdout == b"started\n", result
    assert result.duration_s < 8
    if os.geteuid() == 0:
        await asyncio.sleep(0.2)
        assert _live_processes_of(HOST_UID) == [], "the setsid'd sleep survived"
