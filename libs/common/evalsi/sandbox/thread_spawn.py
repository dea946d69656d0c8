"""A process started on another thread (its ``subprocess.Popen`` run there), driven from the event loop like one
asyncio started: its pipes as streams, its exit seen through a pidfd.

asyncio starts a process on the loop's thread, so the child begins with that thread's credentials. The bwrap rung
run by root starts bwrap on a thread that became the sandbox's host user (host_user.HostUserThread): the vfork that
starts it copies that thread's credentials, which no asyncio call can ask for.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence

__all__ = ["ThreadStarted", "start_on"]

_READ_LIMIT = 1 << 16


async def start_on(spawn_on: Callable[[Callable[[], subprocess.Popen[bytes]]], Awaitable[subprocess.Popen[bytes]]],
                   argv: Sequence[str], *, env: Mapping[str, str], pass_fds: tuple[int, ...],
                   preexec: Callable[[], None] | None = None) -> ThreadStarted:
    """``argv`` started by ``spawn_on`` in a new session, with its stdin, stdout and stderr on pipes."""

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(env), pass_fds=pass_fds, start_new_session=True, preexec_fn=preexec)

    pending = asyncio.ensure_future(spawn_on(start))
    try:
        popen = await asyncio.shield(pending)
    except asyncio.CancelledError:
        # The thread still starts it: killed as soon as it has (its pipes closed; subprocess reaps it later).
        pending.add_done_callback(_kill_when_started)
        raise
    try:
        return await ThreadStarted.attach(popen)
    except BaseException:
        _kill(popen)
        raise


class ThreadStarted:
    """What run_command uses of an ``asyncio.subprocess.Process``: pid, the three streams, ``wait`` and
    ``returncode``."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader,
                 stderr: asyncio.StreamReader, transports: list[asyncio.BaseTransport]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self._transports = transports
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._watch_exit()

    @classmethod
    async def attach(cls, popen: subprocess.Popen[bytes]) -> ThreadStarted:
        loop = asyncio.get_running_loop()
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        transports: list[asyncio.BaseTransport] = []
        readers = []
        try:
            for pipe in (popen.stdout, popen.stderr):
                reader = asyncio.StreamReader(limit=_READ_LIMIT)
                read_transport, _ = await loop.connect_read_pipe(
                    functools.partial(asyncio.StreamReaderProtocol, reader), pipe)
                transports.append(read_transport)
                readers.append(reader)
            write_transport, flow = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
            transports.append(write_transport)
        except BaseException:
            for opened in transports:
                opened.close()
            raise
        writer = asyncio.StreamWriter(write_transport, flow, None, loop)
        return cls(popen, writer, readers[0], readers[1], transports)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def close(self) -> None:
        """The pipes' ends closed here (those a reader stopped reading before their EOF)."""
        for transport in self._transports:
            transport.close()

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:  # a kernel before 5.3: a thread waits instead, as asyncio's own child watcher does
            waiting = loop.run_in_executor(None, self.popen.wait)
            waiting.add_done_callback(lambda _: self._reaped())
            return

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            self._reaped()

        loop.add_reader(pidfd, exited)

    def _reaped(self) -> None:
        code = self.popen.poll()
        if not self._exited.done():
            self._exited.set_result(code if code is not None else -signal.SIGKILL)


def _kill(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    for pipe in (popen.stdin, popen.stdout, popen.stderr):
        if pipe is not None:
            pipe.close()


def _kill_when_started(pending: asyncio.Future[subprocess.Popen[bytes]]) -> None:
    if not pending.cancelled() and pending.exception() is None:
        _kill(pending.result())
