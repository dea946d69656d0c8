"""Long-lived processes in a sandbox session (``session.spawn``) on the real bubblewrap rung: stdin and stdout as
streams, the session's bounds (lifetime timeout, memory), a line past the reader's bound refused, and ``kill``
leaving nothing behind."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from evalsi.sandbox.bwrap import BwrapSession
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Resources, SandboxSpec
from evalsi.sandbox.spawned import LineTooLong

ECHO = "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip(), flush=True)\n"


def host_pids(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[BwrapSession]:
    ladder = Ladder(SandboxConfig(ladder=("bwrap",), cache_dir=tmp_path / "cache"))
    spec = SandboxSpec(resources=Resources(timeout_s=20.0, memory_bytes=128 << 20, pids=32), env={"GREETING": "hi"})
    opened = await ladder.create(spec)
    assert isinstance(opened, BwrapSession)
    await opened.write_files({"echo.py": ECHO.encode()})
    yield opened
    await opened.destroy()


async def test_a_spawned_process_answers_line_by_line_and_kill_leaves_nothing(session: BwrapSession) -> None:
    token = uuid.uuid4().hex
    process = await session.spawn(["python3", "echo.py", token])
    await process.write(b"one\n")
    assert await process.readline() == b"got one\n"
    await process.write(b"two\n")
    assert await process.readline() == b"got two\n"
    assert host_pids(token)
    await process.kill()
    assert not process.running and host_pids(token) == []
    assert await process.readline() == b""
    with pytest.raises(BrokenPipeError):
        await process.write(b"three\n")


async def test_the_timeout_bounds_its_lifetime_and_stderr_is_kept(session: BwrapSession) -> None:
    process = await session.spawn(["sh", "-c", "echo starting >&2; sleep 30"], timeout_s=1.0)
    assert await process.readline() == b""
    result = await process.result()
    assert result is not None and result.outcome.kind == "timeout"
    assert process.stderr_tail == "starting\n"


async def test_the_memory_bound_applies(session: BwrapSession) -> None:
    process = await session.spawn(["python3", "-c", "b = bytearray(512 << 20)"])
    result = await process.result()
    # The cgroup's memory limit where one is delegated (an oom-kill), else the AS rlimit (MemoryError).
    assert result is not None and result.outcome.code != 0
    assert result.outcome.effect == "oom-kill" or "MemoryError" in process.stderr_tail


async def test_a_line_past_the_bound_is_refused(session: BwrapSession) -> None:
    process = await session.spawn(["python3", "-c", "import sys, time; sys.stdout.write('x' * 300000); "
                                   "sys.stdout.flush(); time.sleep(30)"], max_line=100_000)
    with pytest.raises(LineTooLong, match="a line of more than 100000 bytes"):
        await process.readline()
    await process.kill()


async def test_a_spawned_process_sees_the_sessions_environment(session: BwrapSession) -> None:
    process = await session.spawn(["sh", "-c", 'echo "$GREETING $EXTRA $(pwd)"'], env={"EXTRA": "there"})
    assert await process.readline() == b"hi there /workspace\n"
    await process.kill()
