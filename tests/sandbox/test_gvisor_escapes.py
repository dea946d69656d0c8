"""The kernel rung (gVisor's runsc, ptrace platform) under real escape attempts: each ends as ``denied`` (or
``timeout``); a host file outside the sandbox's world is a denial too (the host has it, the sandbox hid it), never
a successful escape. A broken runsc is a ``runner_failure``, never a denial.

Needs runsc (scripts/test.sh installs Debian's ``runsc`` when missing).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from evalsi.errors import InfraError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.gvisor import GvisorDriver, GvisorSession
from evalsi.sandbox.host_files import HostFileError
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Level, Outcome, Resources, RootFilesystem, SandboxSpec
from evalsi.sandbox.process import Command, run_command
from evalsi.testing.sandbox_images import busybox_image, busybox_tarball

RESOURCES = Resources(timeout_s=10.0, memory_bytes=256 << 20, pids=32, output_bytes=64 * 1024)
SPEC = SandboxSpec(min_isolation=Level.KERNEL, resources=RESOURCES)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A host directory everyone may read and write, with a secret in it, outside any sandbox."""
    path = Path(tempfile.mkdtemp(prefix="evalsi-host-"))
    path.chmod(0o777)
    (path / "secret.txt").write_text("host secret\n")
    (path / "secret.txt").chmod(0o666)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def session() -> AsyncIterator[GvisorSession]:
    assert shutil.which("runsc"), "runsc is missing: scripts/test.sh installs it (apt-get install runsc)"
    session = await GvisorDriver().create(SPEC)
    yield session
    await session.destroy()
    assert not session.directory.exists()


async def test_probe_boots_a_real_sandbox() -> None:
    verdict = await GvisorDriver().probe()
    assert verdict.available, verdict.reason
    assert (verdict.level, verdict.enforcement) == (Level.KERNEL, "full")


async def test_a_session_keeps_its_workspace_between_executions(session: GvisorSession) -> None:
    await session.write_files({"in.txt": b"from the host\n"})
    first = await session.exec(["sh", "-c", "cat in.txt; echo made > out.txt; id -u; uname -r"])
    assert first.outcome == Outcome("exit", code=0), first.stderr
    lines = first.stdout.splitlines()
    assert lines[:2] == [b"from the host", b"65534"]
    assert (await session.read_files(["out.txt"], max_bytes=100)) == {"out.txt": b"made\n"}
    second = await session.exec(["cat", "out.txt"], stdin=b"")
    assert second.stdout == b"made\n"
    assert first.isolation.driver == "gvisor" and first.isolation.level is Level.KERNEL


async def test_host_files_outside_the_root_are_not_in_the_sandboxes_world(session: GvisorSession,
                                                                          open_dir: Path) -> None:
    for target in (str(open_dir / "secret.txt"), "/etc/shadow", "/root/.bashrc"):
        result = await session.exec(["cat", target])
        assert result.outcome.kind == "denied" and result.outcome.code != 0, (target, result)
        assert b"host secret" not in result.stdout


async def test_writing_outside_the_workspace_is_denied(session: GvisorSession, open_dir: Path) -> None:
    result = await session.exec(["sh", "-c", "echo pwned > /usr/planted"])
    assert result.outcome.kind == "denied", result
    assert not Path("/usr/planted").exists()
    result = await session.exec(["sh", "-c", f"echo pwned > {open_dir}/planted.txt"])
    assert result.outcome.kind in ("exit", "denied") and result.outcome.code != 0, result
    assert not (open_dir / "planted.txt").exists()


async def test_a_loopback_listener_on_the_host_is_unreachable(session: GvisorSession) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        server.setblocking(False)
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')"
        result = await session.exec(["python3", "-c", code])
        assert result.outcome.kind == "denied", result
        assert b"connected" not in result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()


async def test_a_fork_bomb_is_stopped_and_the_session_recovers(session: GvisorSession) -> None:
    result = await session.exec(["python3", "-c", "import os\nwhile True:\n    os.fork()"], timeout_s=8.0)
    assert result.outcome.kind in ("denied", "timeout"), result
    after = await session.exec(["true"])
    assert after.outcome == Outcome("exit", code=0), after


async def test_allocating_past_the_memory_bound_is_denied(session: GvisorSession) -> None:
    result = await session.exec(["python3", "-c", "blob = bytearray(400 << 20); print('allocated')"])
    assert result.outcome.kind == "denied", result
    assert b"allocated" not in result.stdout


async def test_outliving_the_timeout_is_a_timeout_and_the_next_exec_works(session: GvisorSession) -> None:
    result = await session.exec(["sleep", "60"], timeout_s=1.0)
    assert result.outcome.kind == "timeout"
    assert result.duration_s < 15
    assert (await session.exec(["true"])).outcome == Outcome("exit", code=0)


async def test_printing_past_the_output_cap_is_stopped(session: GvisorSession) -> None:
    result = await session.exec(["yes"])
    assert result.outcome == Outcome("denied", effect="output cap")
    assert result.stdout_truncated and len(result.stdout) == RESOURCES.output_bytes


async def test_the_parents_environment_is_not_readable(session: GvisorSession,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_SECRET", "hunter2")
    result = await session.exec(["sh", "-c", "echo \"[$EVALSI_TEST_SECRET]\"; cat /proc/1/environ"])
    assert result.stdout.startswith(b"[]\n")
    assert b"hunter2" not in result.stdout


async def test_a_planted_symlink_is_not_followed_by_the_host(session: GvisorSession, open_dir: Path) -> None:
    result = await session.exec(["ln", "-s", str(open_dir / "secret.txt"), "leak"])
    assert result.outcome == Outcome("exit", code=0), result
    with pytest.raises(HostFileError):
        await session.read_files(["leak"], max_bytes=1000)
    await session.exec(["ln", "-s", str(open_dir / "planted.txt"), "planted"])
    with pytest.raises(HostFileError):
        await session.write_files({"planted": b"through the link"})
    assert not (open_dir / "planted.txt").exists()


async def test_a_container_gone_behind_the_sessions_back_is_a_runner_failure(session: GvisorSession) -> None:
    await run_command(Command([*session.driver.runsc(session.state), "delete", "--force", session.id],
                              {"PATH": "/usr/bin:/bin"}, 30.0, 4096))
    result = await session.exec(["true"])
    assert result.outcome.kind == "runner_failure", result
    assert result.outcome.signature.startswith("runsc")
    # the session boots a fresh container for the next execution
    assert (await session.exec(["true"])).outcome == Outcome("exit", code=0)


async def test_a_program_cannot_forge_a_runner_failure(session: GvisorSession) -> None:
    forged = "echo 'executing processes for container: error' >&2; exit 128"
    result = await session.exec(["sh", "-c", forged])
    assert result.outcome == Outcome("exit", code=128)


async def test_a_broken_runsc_path_is_unavailable_not_a_denial() -> None:
    driver = GvisorDriver(SandboxConfig(drivers={"gvisor": {"binary": "/nonexistent/runsc"}}))
    verdict = await driver.probe()
    assert not verdict.available and "/nonexistent/runsc" in verdict.reason
    with pytest.raises(InfraError, match="nonexistent"):
        await driver.create(SPEC)


async def test_the_ladder_takes_gvisor_for_a_kernel_minimum() -> None:
    ladder = Ladder(SandboxConfig(ladder=("gvisor", "landlock")))
    session = await ladder.create(replace(SPEC, ladder=("gvisor", "landlock")))
    try:
        assert session.isolation.driver == "gvisor"
        result = await asyncio.wait_for(session.exec(["true"]), 30)
        assert result.outcome == Outcome("exit", code=0)
    finally:
        await session.destroy()


async def test_an_image_root_and_a_tarball_root_are_the_sandboxes_whole_world(tmp_path: Path) -> None:
    image = busybox_image(tmp_path / "image")
    tarball = busybox_tarball(tmp_path / "root.tar", tmp_path / "build")
    driver = GvisorDriver(SandboxConfig(cache_dir=tmp_path / "cache"))
    for root in (RootFilesystem("image", str(image)), RootFilesystem("tarball", str(tarball))):
        session = await driver.create(replace(SPEC, root=root))
        try:
            script = "cat /etc/passwd; [ -e /usr/bin/python3 ] && echo host-python; echo x > /bin/y"
            listing = await session.exec(["sh", "-c", script])
            shadow = await session.exec(["cat", "/etc/shadow"])
        finally:
            await session.destroy()
        assert b"nobody:x:65534" in listing.stdout and b"root:x:0:0:root:/root:/bin/sh" in listing.stdout
        assert listing.outcome.kind == "denied", listing  # the read-only image refuses the write
        assert b"host-python" not in listing.stdout  # the host's /usr is not there
        assert shadow.outcome.kind == "denied" and b"image-shadow" not in shadow.stdout
    assert session.isolation.bounds["root"].startswith(f"tarball {tmp_path / 'cache'}")  # the unpacked tarball
    assert session.isolation.bounds["root"].endswith(" read-only")
