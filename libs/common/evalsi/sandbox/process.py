"""Running one sandbox command on the host: a wall-clock timeout, output caps, streaming, rlimits and cgroup entry,
and the classification of how it ended into ``exit`` / ``denied`` / ``runner_failure`` / ``timeout``.

The runner knows nothing of a rung; a driver builds the ``Command`` (its wrapper's argv and fds), runs it, and
classifies the ``Finished`` with its own ``Dialect``: how its wrapper says that setup failed (a runner failure,
never the program's fault) and which messages of a program mean the policy denied it something.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from evalsi.sandbox.cgroups import join_cgroups
from evalsi.sandbox.hidden_paths import hidden_host_path
from evalsi.sandbox.model import Outcome, OutputSink
from evalsi.sandbox.spawned import InputChannel
from evalsi.sandbox.thread_spawn import ThreadStarted, start_on

__all__ = ["COMMON_DENIALS", "Command", "Dialect", "Finished", "classify", "rlimits_for", "run_command"]

_READ_CHUNK = 65536
_KILLED_GRACE_S = 5.0  # how long a killed wrapper's exit (and its pipes' close) is waited for


@dataclass(frozen=True)
class Command:
    argv: Sequence[str]
    env: Mapping[str, str]
    timeout_s: float
    output_bytes: int
    # Bytes fed at once, or a channel a spawned process reads for its whole life (spawned.py): such a command's
    # output is streamed to ``on_output`` and never kept, its reader bounds it.
    stdin: bytes | InputChannel = b""
    pass_fds: tuple[int, ...] = ()
    # (resource.RLIMIT_*, value) applied as soft and hard limit in the child before it executes.
    rlimits: tuple[tuple[int, int], ...] = ()
    # cgroup.procs files the child joins before it executes (cgroups.ExecutionCgroups.join_paths).
    cgroup_procs: tuple[str, ...] = ()
    # A rung's own last step in the child before it executes, after the cgroups and rlimits (the confined rung
    # drops privileges and applies its Landlock ruleset here); it must do only what is safe between fork and exec.
    preexec: Callable[[], None] | None = None
    # Awaited with the wrapper's pid as soon as it started, within the timeout: a wrapper that waits for its caller
    # (bwrap's --block-fd) is joined to its cgroups and given its rlimits from outside here, so the spawn needs no
    # pre-exec hook (which forces a fork of this whole process and blocks the event loop until the exec).
    on_spawn: Callable[[int], Awaitable[None]] | None = None
    # Where the wrapper is started (its subprocess.Popen run): by default on the event loop's thread, as asyncio
    # starts processes; else on the thread ``spawn_on`` runs it on, whose credentials the child begins with
    # (host_user.HostUserThread.run). With no pre-exec step (preexec, rlimits, cgroup_procs) it is a vfork.
    spawn_on: Callable[[Callable[[], subprocess.Popen[bytes]]], Awaitable[subprocess.Popen[bytes]]] | None = None


@dataclass(frozen=True)
class Finished:
    """What the host saw: the wrapper's exit status (negative: killed by that signal), the output, and whether we
    stopped it (timeout, output cap) or could not start it (``spawn_error``)."""

    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    timed_out: bool = False
    output_capped: bool = False
    duration_s: float = 0.0
    spawn_error: str = ""


def rlimits_for(memory_bytes: int, pids: int, cpu_seconds: int | None, file_bytes: int) -> tuple[tuple[int, int], ...]:
    """The per-process bounds every execution gets, with or without a cgroup."""
    limits = [(resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_NPROC, pids), (resource.RLIMIT_FSIZE, file_bytes),
              (resource.RLIMIT_CORE, 0)]
    if cpu_seconds is not None:
        limits.append((resource.RLIMIT_CPU, cpu_seconds))
    return tuple(limits)


async def run_command(command: Command, on_output: OutputSink | None = None) -> Finished:
    """Run ``command`` to its end, or kill it at its timeout or when its output passes the cap."""
    started = time.monotonic()
    preexec = (_child_setup(command.rlimits, command.cgroup_procs, command.preexec)
               if command.rlimits or command.cgroup_procs or command.preexec is not None else None)
    process: asyncio.subprocess.Process | ThreadStarted
    try:
        if command.spawn_on is None:
            process = await asyncio.create_subprocess_exec(
                *command.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=dict(command.env), pass_fds=command.pass_fds,
                start_new_session=True, preexec_fn=preexec)
        else:
            process = await start_on(command.spawn_on, command.argv, env=command.env, pass_fds=command.pass_fds,
                                     preexec=preexec)
    except (OSError, ValueError, RuntimeError, subprocess.SubprocessError) as exc:  # a failed preexec: SubprocessError
        return Finished(returncode=-1, spawn_error=f"{type(exc).__name__}: {exc}",
                        duration_s=time.monotonic() - started)
    capture = _Capture(command.output_bytes, on_output, keep=not isinstance(command.stdin, InputChannel))
    assert process.stdout is not None and process.stderr is not None and process.stdin is not None
    readers = [asyncio.ensure_future(capture.pump("stdout", process.stdout)),
               asyncio.ensure_future(capture.pump("stderr", process.stderr)),
               asyncio.ensure_future(_feed(process.stdin, command.stdin))]
    waiter = asyncio.ensure_future(process.wait())
    capped = asyncio.ensure_future(capture.capped.wait())
    timed_out = False
    try:
        remaining = command.timeout_s
        if command.on_spawn is not None:
            with contextlib.suppress(TimeoutError):  # then nothing of the timeout is left: killed below
                await asyncio.wait_for(command.on_spawn(process.pid), timeout=remaining)
            remaining = max(0.0, command.timeout_s - (time.monotonic() - started))
        done, _ = await asyncio.wait({waiter, capped}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            timed_out = not capped.done()
            _kill_group(process.pid)
            # Bounded: Python 3.11's wait() also waits for the pipes, which a straggler outside the killed group
            # may still hold (the rung's cgroup.kill, after this returns, is what ends it).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), timeout=_KILLED_GRACE_S)
        # The wrapper exited; its pipes close when the last holder does (cgroup.kill reaps stragglers after this).
        # The output readers only: nobody reads stdin any more (a spawned process's channel would wait forever).
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*readers[:2], return_exceptions=True), timeout=2.0)
    except BaseException:
        _kill_group(process.pid)
        raise
    finally:
        capped.cancel()
        for reader in readers:
            reader.cancel()
        if not waiter.done():
            _kill_group(process.pid)
            waiter.cancel()
        if isinstance(process, ThreadStarted):
            process.close()
    return Finished(returncode=process.returncode if process.returncode is not None else -signal.SIGKILL,
                    stdout=bytes(capture.kept["stdout"]), stderr=bytes(capture.kept["stderr"]),
                    stdout_truncated=capture.truncated["stdout"], stderr_truncated=capture.truncated["stderr"],
                    timed_out=timed_out, output_capped=capture.capped.is_set() and not timed_out,
                    duration_s=time.monotonic() - started)


class _Capture:
    """Both streams, each kept up to the cap; past it the rest is dropped and ``capped`` set (the caller kills)."""

    def __init__(self, cap: int, on_output: OutputSink | None, *, keep: bool = True) -> None:
        self.cap = cap
        self.keep = keep
        self.on_output = on_output
        self.kept = {"stdout": bytearray(), "stderr": bytearray()}
        self.truncated = {"stdout": False, "stderr": False}
        self.capped = asyncio.Event()

    async def pump(self, name: str, stream: asyncio.StreamReader) -> None:
        kept = self.kept[name]
        while chunk := await stream.read(_READ_CHUNK):
            if not self.keep:  # a spawned process's: its reader bounds what it holds
                if self.on_output is not None:
                    await self.on_output(name, chunk)
                continue
            room = self.cap - len(kept)
            if len(chunk) > room:
                chunk = chunk[:max(room, 0)]
                self.truncated[name] = True
                self.capped.set()
            if chunk:
                kept.extend(chunk)
                if self.on_output is not None:
                    await self.on_output(name, chunk)
            # Past the cap the rest is read and dropped, never left unread: a paused pipe never reaches EOF, and
            # Python 3.11's Process.wait() returns only after every pipe closed (a hang under load otherwise).


async def _feed(stdin: asyncio.StreamWriter, data: bytes | InputChannel) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        if isinstance(data, InputChannel):
            async for chunk in data.chunks():
                stdin.write(chunk)
                await stdin.drain()
        elif data:
            stdin.write(data)
            await stdin.drain()
        stdin.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _child_setup(rlimits: tuple[tuple[int, int], ...], cgroup_procs: tuple[str, ...],
                 then: Callable[[], None] | None = None) -> Callable[[], None]:
    def setup() -> None:
        # Cgroups first: everything the wrapper forks from here on is inside them.
        join_cgroups(cgroup_procs)
        for limit, value in rlimits:
            resource.setrlimit(limit, (value, value))
        if then is not None:
            then()

    return setup


@dataclass(frozen=True)
class Dialect:
    """How one rung's wrapper and programs speak: ``runner_failure`` answers the wrapper's failure signature (or
    "") from what it reported; ``denials`` are (pattern, effect) pairs matched against a failed program's stderr."""

    runner_failure: Callable[[Finished], str]
    denials: tuple[tuple[re.Pattern[str], str], ...] = field(default_factory=tuple)


# Messages with which the kernel's refusals reach a program's stderr, in the words libc, coreutils and Python use.
COMMON_DENIALS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), effect) for pattern, effect in (
    (r"Read-only file system", "write to a read-only path"),
    (r"Permission denied|PermissionError", "permission denied"),
    (r"Operation not permitted", "operation not permitted"),
    # In the sandbox's own network namespace nothing but its loopback answers: a refused connection is the policy.
    (r"Network is unreachable|Address family not supported|Cannot assign requested address|Connection refused",
     "network denied"),
    # The egress proxy's refusal of an endpoint off the allowlist, as curl, urllib and http.client report it.
    (r"CONNECT tunnel failed, response 403|403:? Egress Denied", "egress denied"),
    (r"Resource temporarily unavailable|BlockingIOError: \[Errno 11\]", "process limit"),
    (r"Cannot allocate memory|MemoryError|std::bad_alloc|out of memory", "memory limit"),
    (r"File too large|File size limit exceeded", "file size limit"),
    (r"No space left on device|Disk quota exceeded", "disk limit"),
))

_SIGNAL_EFFECTS = {signal.SIGSYS: "seccomp: a forbidden system call", signal.SIGXCPU: "cpu time limit",
                   signal.SIGXFSZ: "file size limit"}


def classify(finished: Finished, dialect: Dialect, *, exit_code: int | None = None, oom_killed: bool = False,
             pids_exhausted: bool = False) -> Outcome:
    """How the execution ended. A runner failure (the wrapper or host failed) is never a denial, and a denial (the
    program met the policy) is never a runner failure. ``exit_code``: the program's own status where the wrapper
    reported it apart from its own (bwrap's status fd); else the wrapper's."""
    if finished.spawn_error:
        return Outcome("runner_failure", signature=finished.spawn_error)
    signature = dialect.runner_failure(finished)
    if signature:
        return Outcome("runner_failure", signature=signature)
    if finished.timed_out:
        return Outcome("timeout")
    if finished.output_capped:
        return Outcome("denied", effect="output cap")
    if oom_killed:
        return Outcome("denied", effect="oom-kill")
    code = finished.returncode if exit_code is None else exit_code
    if code < 0 or code > 128:
        number = -code if code < 0 else code - 128
        killer = _signal(number)
        effect = _SIGNAL_EFFECTS.get(killer) if killer is not None else None
        if effect:
            return Outcome("denied", effect=effect)
    if code == 0:
        return Outcome("exit", code=0)
    if pids_exhausted:
        return Outcome("denied", effect="pids limit", code=code)
    text = finished.stderr.decode("utf-8", "replace")
    for pattern, effect in dialect.denials:
        if pattern.search(text):
            return Outcome("denied", effect=effect, code=code)
    hidden = hidden_host_path(text)
    if hidden:
        return Outcome("denied", effect=f"host path not visible in the sandbox: {hidden}", code=code)
    return Outcome("exit", code=code if code >= 0 else 128 - code)


def _signal(number: int) -> signal.Signals | None:
    try:
        return signal.Signals(number)
    except ValueError:
        return None
