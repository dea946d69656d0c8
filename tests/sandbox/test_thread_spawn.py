"""run_command with the wrapper started on another thread (process.Command.spawn_on, thread_spawn.py), as the bwrap
rung run by root starts bwrap from its host user's thread: the same streams, exit status, output cap and timeout as
a process asyncio starts, and nothing left running when the caller gives up during the start."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from evalsi.sandbox.process import Command, run_command

Spawner = Callable[[Callable[[], subprocess.Popen[bytes]]], "asyncio.Future[subprocess.Popen[bytes]]"]


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    pool = ThreadPoolExecutor(1, thread_name_prefix="spawner")
    yield pool
    pool.shutdown(wait=True)


def _on(pool: ThreadPoolExecutor, started_on: list[str] | None = None) -> Spawner:
    def spawn(start: Callable[[], subprocess.Popen[bytes]]) -> asyncio.Future[subprocess.Popen[bytes]]:
        def run() -> subprocess.Popen[bytes]:
            if started_on is not None:
                started_on.append(threading.current_thread().name)
            return start()

        return asyncio.get_running_loop().run_in_executor(pool, run)

    return spawn


async def test_streams_stdin_and_exit_status_come_back_from_a_process_started_on_another_thread(
        executor: ThreadPoolExecutor) -> None:
    started_on: list[str] = []
    streamed: list[tuple[str, bytes]] = []

    async def sink(stream: str, chunk: bytes) -> None:
        streamed.append((stream, chunk))

    command = Command(argv=["sh", "-c", "cat; echo err >&2; exit 3"], env={"PATH": os.environ["PATH"]},
                      timeout_s=10.0, output_bytes=1 << 16, stdin=b"from stdin\n", spawn_on=_on(executor, started_on))
    finished = await run_command(command, sink)
    assert started_on and started_on[0].startswith("spawner"), started_on
    assert (finished.returncode, finished.stdout, finished.stderr) == (3, b"from stdin\n", b"err\n"), finished
    assert ("stdout", b"from stdin\n") in streamed and not finished.timed_out


async def test_the_output_cap_and_the_timeout_kill_it(executor: ThreadPoolExecutor) -> None:
    env = {"PATH": os.environ["PATH"]}
    capped = await run_command(Command(argv=["sh", "-c", "yes"], env=env, timeout_s=10.0, output_bytes=4096,
                                       spawn_on=_on(executor)))
    assert capped.output_capped and len(capped.stdout) == 4096 and capped.returncode < 0, capped
    started = time.monotonic()
    slow = await run_command(Command(argv=["sleep", "30"], env=env, timeout_s=0.5, output_bytes=1024,
                                     spawn_on=_on(executor)))
    assert slow.timed_out and slow.returncode < 0 and time.monotonic() - started < 10, slow


async def test_a_start_that_fails_is_a_spawn_error(executor: ThreadPoolExecutor) -> None:
    finished = await run_command(Command(argv=["/nonexistent/wrapper"], env={}, timeout_s=5.0, output_bytes=1024,
                                         spawn_on=_on(executor)))
    assert "FileNotFoundError" in finished.spawn_error, finished


async def test_a_caller_cancelled_during_the_start_leaves_nothing_running(executor: ThreadPoolExecutor) -> None:
    marker = "9.7123"
    gate = threading.Event()
    spawn = _on(executor)

    def slow_spawn(start: Callable[[], subprocess.Popen[bytes]]) -> asyncio.Future[subprocess.Popen[bytes]]:
        def held() -> subprocess.Popen[bytes]:
            gate.wait(10)  # the thread is still starting it when the caller gives up
            return start()

        return spawn(held)

    running = asyncio.ensure_future(run_command(Command(
        argv=["sleep", marker], env={"PATH": os.environ["PATH"]}, timeout_s=30.0, output_bytes=1024,
        spawn_on=slow_spawn)))
    await asyncio.sleep(0.1)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    gate.set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if not _running(marker):
            break
    assert not _running(marker), "the process started after the cancellation is still running"


def _running(marker: str) -> bool:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    if handle.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                        with open(f"/proc/{entry.name}/stat", "rb") as stat:
                            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
            except OSError:
                continue
    return False
