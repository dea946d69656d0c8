"""One sandboxed command as a child process group: stdin, capped and streamed output, a wall-clock timeout, and
everything it started killed at the end.

The confined and kernel rungs (``landlock``, ``gvisor``) share it: each builds its own argv (the launcher, or
``runsc exec``) and classifies the ``Spawned`` it gets back in its own failure dialect. A launcher that reports on a
status descriptor passes ``status=True``: the descriptor's number is handed to ``argv_for``, and what the launcher
wrote there comes back in ``Spawned.status`` (empty when the command was exec'd).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from evalsi.sandbox.model import OutputSink

__all__ = ["Spawned", "spawn"]

_CHUNK = 65536


@dataclass(frozen=True)
class Spawned:
    """How the process ended: ``returncode`` (negative: killed by that signal), unless ``timed_out`` or
    ``output_capped`` (we killed it), or ``start_error`` (it never started)."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    timed_out: bool
    output_capped: bool
    duration_s: float
    status: bytes = b""
    start_error: str = ""


class _Capture:
    def __init__(self, name: str, cap: int, sink: OutputSink | None, over: asyncio.Event) -> None:
        self.name, self.cap, self.sink, self.over = name, cap, sink, over
        self.data = bytearray()
        self.truncated = False

    async def pump(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_CHUNK):
            room = self.cap - len(self.data)
            kept = chunk[:max(room, 0)]
            if kept:
                self.data += kept
                if self.sink is not None:
                    await self.sink(self.name, bytes(kept))
            if len(chunk) > room:
                # Past the cap the program is stopped: endless output is a bound it crossed, not data to buffer.
                self.truncated = True
                self.over.set()
                return


async def spawn(argv_for: Callable[[int], list[str]], *, env: Mapping[str, str], cwd: str, stdin: bytes,
                timeout_s: float, output_bytes: int, on_output: OutputSink | None = None,
                status: bool = False, on_exit: Callable[[], Awaitable[None]] | None = None) -> Spawned:
    """Run ``argv_for(status_fd)`` (status_fd -1 without ``status``) in a new session and wait, at most
    ``timeout_s``. ``on_exit`` is awaited after the group is killed (a rung's own kill of what left the group:
    its cgroups, ``runsc kill``)."""
    started = time.monotonic()
    read_fd, write_fd = os.pipe() if status else (-1, -1)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv_for(write_fd), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=dict(env), cwd=cwd, start_new_session=True,
            pass_fds=(write_fd,) if status else ())
    except OSError as exc:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        return Spawned(None, b"", b"", False, False, False, False, time.monotonic() - started,
                       start_error=f"{exc.strerror or exc}: {exc.filename or argv_for(-1)[0]}")
    if write_fd >= 0:
        os.close(write_fd)
    over = asyncio.Event()
    out = _Capture("stdout", output_bytes, on_output, over)
    err = _Capture("stderr", output_bytes, on_output, over)
    assert process.stdout is not None and process.stderr is not None and process.stdin is not None
    pumps = asyncio.gather(out.pump(process.stdout), err.pump(process.stderr), _feed(process.stdin, stdin))
    waiter = asyncio.ensure_future(process.wait())
    capper = asyncio.ensure_future(over.wait())
    timed_out = False
    try:
        done, _ = await asyncio.wait({waiter, capper}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        timed_out = not done
    finally:
        _kill_group(process.pid)
        if on_exit is not None:
            await on_exit()
        capper.cancel()
        returncode = await waiter
        # The pipes close when the last holder dies; a descendant that left the group keeps them open, so the
        # pumps get a short grace and are then abandoned (the data they hold so far is kept).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(pumps), 1.0)
        pumps.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pumps
    report = _read_status(read_fd) if status else b""
    return Spawned(returncode, bytes(out.data), bytes(err.data), out.truncated, err.truncated, timed_out,
                   over.is_set() and not timed_out, time.monotonic() - started, report)


async def _feed(writer: asyncio.StreamWriter, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if data:
            writer.write(data)
            await writer.drain()
        writer.close()
        await writer.wait_closed()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_status(fd: int) -> bytes:
    """What the launcher wrote before exec'ing or failing; every writer is gone once the process was reaped."""
    try:
        os.set_blocking(fd, False)
        chunks = []
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            if sum(map(len, chunks)) > 8192:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)
