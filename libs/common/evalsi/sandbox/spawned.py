"""A long-lived process inside a sandbox session, with its stdin and stdout as streams (an MCP server over stdio).

A rung whose executions are host processes (bubblewrap, Landlock) spawns one as an ordinary execution, under the
same profile and bounds (root, workspace, network, seccomp, cgroups, rlimits, the timeout as the process's
lifetime), whose stdin is an ``InputChannel`` instead of bytes. Such an execution keeps none of its output: every
chunk goes to the ``SandboxProcess``, which holds at most ``MAX_PENDING_CHUNKS`` unread (past that the pipe fills
and the process waits for its reader) and refuses a line longer than its ``max_line`` (``LineTooLong``), so a
hostile process cannot make the host buffer more than about a megabyte. Only the tail of its stderr is kept.

``kill`` cancels the execution: the runner kills its process group, and the rung's teardown (bwrap's pid namespace
and --die-with-parent, the execution's cgroup) ends whatever it started.

gVisor spawns one as a ``runsc exec`` the same way; killed, that ends and the guest's stdin closes, and a guest
process that outlives it ends with its container (at the latest when the session is destroyed).

A rung that cannot host one (the vm rung, whose executions go over its guest agent's channel, and a sandboxd
session, whose API has no long-lived process) has no ``spawn``: ``spawn_in`` refuses with ``SpawnUnsupported``
naming the field and the rung.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol, runtime_checkable

from evalsi.errors import EvalsiError
from evalsi.sandbox.model import ExecResult, OutputSink, SandboxSession

__all__ = ["InputChannel", "LineTooLong", "SandboxProcess", "SpawnUnsupported", "SpawningSession", "spawn_in",
           "start_process"]

MAX_PENDING_CHUNKS = 16  # unread stdout chunks (each at most the runner's 64 KiB read) before the pipe backs up
DEFAULT_MAX_LINE = 1024 * 1024
_STDERR_KEEP = 4000


class SpawnUnsupported(EvalsiError):
    """The sandbox's rung cannot host a long-lived process: nothing was started (SANDBOX_UNAVAILABLE)."""

    code = "SANDBOX_UNAVAILABLE"


class LineTooLong(EvalsiError):
    """The process wrote a line longer than its reader accepts."""


class InputChannel:
    """A process's stdin as the caller writes it; ``close`` ends it (EOF). Bounded: a writer waits while
    ``MAX_PENDING_CHUNKS`` chunks are not yet in the pipe."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(MAX_PENDING_CHUNKS)

    async def put(self, data: bytes | None) -> None:
        await self._queue.put(data)

    async def chunks(self) -> AsyncIterator[bytes]:
        while (chunk := await self._queue.get()) is not None:
            yield chunk


class SandboxProcess:
    """One spawned process: ``write`` to its stdin, ``readline`` from its stdout (b"" at its end), ``kill``,
    ``result`` (its ``ExecResult`` once it ended: the outcome says how) and ``stderr_tail``."""

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self.stdin = InputChannel()
        self._stdout: asyncio.Queue[bytes] = asyncio.Queue(MAX_PENDING_CHUNKS)
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._task: asyncio.Task[ExecResult] | None = None

    def attach(self, running: Awaitable[ExecResult]) -> None:
        """The execution this process is (``start_process``)."""
        self._task = asyncio.ensure_future(running)

    async def sink(self, stream: str, chunk: bytes) -> None:
        """The runner's ``on_output``: stdout queued for ``readline`` (waiting while the queue is full), stderr's
        tail kept."""
        if stream == "stdout":
            await self._stdout.put(chunk)
        else:
            self._stderr = (self._stderr + chunk)[-_STDERR_KEEP:]

    @property
    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def write(self, data: bytes) -> None:
        """``data`` to the process's stdin; ``BrokenPipeError`` once it has ended."""
        task = self._task
        if task is None or task.done():
            raise BrokenPipeError("the process has ended")
        put = asyncio.ensure_future(self.stdin.put(data))
        await asyncio.wait({put, task}, return_when=asyncio.FIRST_COMPLETED)
        if not put.done():
            put.cancel()
            raise BrokenPipeError("the process has ended")

    async def readline(self) -> bytes:
        """The next line of stdout with its newline; the unterminated rest (or b"") once the process ended;
        ``LineTooLong`` past ``max_line`` bytes without a newline."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                return line
            if len(self._buffer) > self.max_line:
                raise LineTooLong(f"a line of more than {self.max_line} bytes")
            chunk = await self._next_chunk()
            if chunk is None:
                rest = bytes(self._buffer)
                self._buffer.clear()
                return rest
            self._buffer.extend(chunk)

    async def _next_chunk(self) -> bytes | None:
        if not self._stdout.empty():
            return self._stdout.get_nowait()
        task = self._task
        if task is None or task.done():
            return None
        get = asyncio.ensure_future(self._stdout.get())
        try:
            await asyncio.wait({get, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not get.done():
                get.cancel()
        if get.done() and not get.cancelled():
            return get.result()
        return self._stdout.get_nowait() if not self._stdout.empty() else None

    async def result(self) -> ExecResult | None:
        """How the process ended (waiting for it); None when it was killed or its runner failed."""
        task = self._task
        if task is None:
            return None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                return None
            raise
        except Exception:  # the runner's own failure: the caller reports the process as ended without a result
            return None

    async def kill(self) -> None:
        """End the process (its group killed by the runner, the rung's teardown ending what it started)."""
        task = self._task
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


Exec = Callable[..., Awaitable[ExecResult]]


def start_process(exec_: Exec, argv: list[str], *, env: Mapping[str, str] | None, timeout_s: float | None,
                  max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess:
    """``argv`` started through a rung's ``exec`` with a channel as its stdin and its output streamed."""
    process = SandboxProcess(max_line=max_line)
    sink: OutputSink = process.sink
    process.attach(exec_(argv, stdin=process.stdin, env=env, timeout_s=timeout_s, on_output=sink))
    return process


@runtime_checkable
class SpawningSession(Protocol):
    """A session whose rung can host a long-lived process with pipes."""

    async def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout_s: float | None = None,
                    max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess: ...


async def spawn_in(session: SandboxSession, argv: list[str], *, where: str, env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess:
    """``argv`` as a long-lived process in ``session``; ``SpawnUnsupported`` naming ``where`` and the rung when the
    rung cannot host one (it is never run anywhere else)."""
    current = getattr(session, "current", session)  # an environment's session: the sandbox it holds now
    if not isinstance(current, SpawningSession):
        isolation = session.isolation
        raise SpawnUnsupported(
            f"SANDBOX_UNAVAILABLE: {where}: this sandbox (rung {isolation.driver}, {isolation.level.label}) cannot "
            "host a long-lived process with pipes: only the kernel (gvisor), namespaced (bwrap) and confined "
            "(landlock) rungs opened in this process can, not the vm rung nor a sandbox of evalsi-sandboxd; nothing "
            "was started")
    return await current.spawn(argv, env=env, timeout_s=timeout_s, max_line=max_line)
