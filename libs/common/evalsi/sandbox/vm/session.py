"""One microVM sandbox session: executions, file transfer and saved state, all through the guest agent.

Host-side file access never touches a path the program controls: reads and writes are requests to the agent, which
resolves them inside the guest beneath ``/workspace`` without following links. A link planted in the sandbox can
only ever name a file of the guest (whose root is the read-only runtime disk), never one of the host.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.egress_attach import EgressAttachment, proxy_env
from evalsi.sandbox.model import EgressEvent, ExecResult, IsolationReport, Outcome, OutputSink, SandboxSpec
from evalsi.sandbox.vm.egress_bridge import GUEST_PROXY_PORT, EgressBridge
from evalsi.sandbox.vm.outcome import classify, count_field
from evalsi.sandbox.vm.protocol import AgentGone, b64, read_frame, unb64, write_frame
from evalsi.sandbox.vm.qemu import Machine, MachineFailed

__all__ = ["MAX_ARGV_BYTES", "MAX_PATHS", "MAX_PATH_CHARS", "MAX_TRANSFER_BYTES", "Restored", "VmSession"]

MAX_TRANSFER_BYTES = 32 * 1024 * 1024  # stdin, or one write_files call, or one read_files answer
MAX_ARGV_BYTES = 1024 * 1024
MAX_PATHS = 4096  # files in one write_files or read_files call
MAX_PATH_CHARS = 4096
# The agent enforces the timeout; the host waits this much longer before it declares the guest itself stuck.
HOST_GRACE_S = 10.0
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_STATE_MAGIC = b"evalsi-vm-state-1\n"
_STATE_SLACK_MIB = 192  # the guest's own reserve (the driver's), on top of the executions' memory cap

# Starts a machine from a saved state file (the driver's restore), for load_state: the machine and, for a sandbox
# with an allowlist, its egress port's bridge to the session's proxy.
Restored = tuple[Machine, EgressBridge | None]
Restorer = Callable[[Path], Awaitable[Restored]]


class VmSession:
    """A guest of its own; ``exec`` calls are serialized (the agent runs one request at a time)."""

    def __init__(self, machine: Machine, spec: SandboxSpec, isolation: IsolationReport, *, memory_cap: int,
                 restore: Restorer, egress: EgressAttachment | None = None,
                 bridge: EgressBridge | None = None) -> None:
        self.id = f"vm-{secrets.token_hex(8)}"
        self.isolation = isolation
        self._machine: Machine | None = machine
        self._spec = spec
        self._memory_cap = memory_cap
        self._restore = restore
        # The session's logging proxy (one for its whole life, so its log spans restores) and the current
        # machine's bridge to it.
        self._egress = egress
        self._bridge = bridge
        self._lock = asyncio.Lock()

    @property
    def machine(self) -> Machine | None:
        return self._machine

    @property
    def bridge(self) -> EgressBridge | None:
        return self._bridge

    def egress_log(self) -> tuple[EgressEvent, ...]:
        return self._egress.egress_log() if self._egress is not None else ()

    async def exec(self, argv: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        _check_argv(argv)
        if len(stdin) > MAX_TRANSFER_BYTES:
            raise BadInputError(f"stdin: {len(stdin)} bytes, over the limit of {MAX_TRANSFER_BYTES}")
        resources = self._spec.resources
        timeout = resources.timeout_s if timeout_s is None else timeout_s
        if timeout <= 0:
            raise BadInputError(f"timeout_s: {timeout} must be positive")
        variables = {"PATH": _DEFAULT_PATH, "HOME": "/workspace", **self._spec.env, **(env or {})}
        if self._egress is not None:  # as the other rungs do: the proxy's variables win over the caller's
            variables.update(proxy_env(f"http://127.0.0.1:{GUEST_PROXY_PORT}"))
        request = {
            "op": "exec", "argv": argv, "stdin": b64(stdin), "timeout": timeout, "cwd": self._spec.workdir,
            "env": variables,
            "memory": min(resources.memory_bytes, self._memory_cap), "pids": resources.pids,
            "output": resources.output_bytes, "disk": resources.disk_bytes, "cpu": resources.cpu_seconds,
            "readonly": self._spec.file_access == "read-only",
        }
        async with self._lock:
            started = time.monotonic()
            machine = self._machine
            if machine is None:
                return self._failed("vm: the guest is gone (destroyed, or broken by an earlier failure)", started)
            captured: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
            try:
                async with asyncio.timeout(timeout + HOST_GRACE_S):
                    done = await self._run(machine, request, captured, on_output)
            except TimeoutError:
                # The agent did not end it in time: the guest itself is stuck. It is discarded.
                await self._discard()
                return self._result(Outcome("timeout"), captured, {}, started)
            except (AgentGone, MachineFailed, OSError) as exc:
                diagnostics = machine.diagnostics()
                await self._discard()
                return self._failed(f"vm: {exc}{diagnostics}", started, captured)
            except BaseException:
                # Cancelled, or the output sink failed, mid-exchange: the agent's frames are still coming and the
                # next request would read them as its answer. The guest goes; later calls get runner_failure.
                await asyncio.shield(self._discard())
                raise
            return self._result(classify(done, bytes(captured["stderr"])), captured, done, started)

    async def _run(self, machine: Machine, request: dict[str, Any], captured: dict[str, bytearray],
                   on_output: OutputSink | None) -> dict[str, Any]:
        reader, writer = _streams(machine)
        await write_frame(writer, request)
        cap = self._spec.resources.output_bytes
        while True:
            frame = await read_frame(reader)
            if frame.get("done"):
                return frame
            name = frame.get("stream")
            if name not in captured:
                raise AgentGone(f"guest agent sent an unexpected frame: {str(frame)[:200]}")
            data = unb64(str(frame.get("data", "")))
            room = cap - len(captured[name])
            data = data[:max(room, 0)]  # the agent caps too; the host never trusts it to
            captured[name] += data
            if on_output is not None and data:
                await on_output(str(name), data)

    def _result(self, outcome: Outcome, captured: dict[str, bytearray], done: Mapping[str, Any],
                started: float) -> ExecResult:
        truncated = done.get("truncated") if isinstance(done.get("truncated"), dict) else {}
        assert isinstance(truncated, dict)
        return ExecResult(outcome, self.isolation, bytes(captured["stdout"]), bytes(captured["stderr"]),
                          stdout_truncated=bool(truncated.get("stdout")),
                          stderr_truncated=bool(truncated.get("stderr")), duration_s=time.monotonic() - started,
                          cpu_s=count_field(done, "cpu_usec") / 1e6, max_rss_bytes=count_field(done, "memory_peak"))

    def _failed(self, signature: str, started: float, captured: dict[str, bytearray] | None = None) -> ExecResult:
        return self._result(Outcome("runner_failure", signature=signature[:500]),
                            captured or {"stdout": bytearray(), "stderr": bytearray()}, {}, started)

    async def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            machine = self._machine
            if machine is None:
                raise MachineFailed("vm: the guest is gone (destroyed, or broken by an earlier failure)")
            reader, writer = _streams(machine)
            try:
                async with asyncio.timeout(60):
                    await write_frame(writer, message)
                    reply = await read_frame(reader)
            except (TimeoutError, AgentGone, OSError) as exc:
                await self._discard()
                raise MachineFailed(f"vm: guest agent did not answer {message.get('op')}: {exc!r}") from exc
            except BaseException:  # cancelled mid-exchange: the answer would be read by the next request
                await asyncio.shield(self._discard())
                raise
        if "error" in reply:
            raise BadInputError(f"{message.get('op')}: {reply['error']}"[:1000])
        return reply

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        _check_paths(list(files), "files")
        total = sum(len(data) for data in files.values())
        if total > MAX_TRANSFER_BYTES:
            raise BadInputError(f"files: {total} bytes in one call, over the limit of {MAX_TRANSFER_BYTES}")
        await self._request({"op": "write", "files": {path: b64(data) for path, data in files.items()}})

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        _check_paths(paths, "paths")
        if max_bytes < 0:
            raise BadInputError(f"max_bytes: {max_bytes} must not be negative")
        if max_bytes * max(len(paths), 1) > MAX_TRANSFER_BYTES:
            raise BadInputError(f"max_bytes: {max_bytes} for {len(paths)} files is over the limit of "
                                f"{MAX_TRANSFER_BYTES} bytes per call")
        reply = await self._request({"op": "read", "paths": list(paths), "max": max_bytes})
        files = reply.get("files")
        if not isinstance(files, dict):
            raise MachineFailed("vm: guest agent's read answer has no files")
        return {str(path): unb64(str(data)) for path, data in files.items()}

    async def save_state(self) -> bytes:
        """The guest's memory and devices (its workspace is tmpfs, so in memory), as QEMU's migration stream."""
        async with self._lock:
            machine = self._machine
            if machine is None:
                raise MachineFailed("vm: the guest is gone (destroyed, or broken by an earlier failure)")
            path = machine.run_dir / "state.bin"
            try:
                await machine.save(path)
                data = await asyncio.to_thread(_pack_state, path)
                await machine.resume()
            finally:
                path.unlink(missing_ok=True)
            return data

    async def load_state(self, state: bytes) -> None:
        """This session becomes a guest restored from ``state`` (``save_state``'s bytes); the old guest ends."""
        async with self._lock:
            old, old_bridge = self._machine, self._bridge
            limit = self._memory_cap + (_STATE_SLACK_MIB << 20) + (512 << 20)
            holder = Path(await asyncio.to_thread(_write_state, state, limit))
            try:
                self._machine, self._bridge = await self._restore(holder)
            finally:
                shutil.rmtree(holder.parent, ignore_errors=True)
            if old_bridge is not None:
                await old_bridge.close()
            if old is not None:
                await _stop(old)

    async def destroy(self) -> None:
        async with self._lock:
            await self._discard()
            if self._egress is not None:
                await self._egress.close()  # its log stays readable

    async def _discard(self) -> None:
        machine, self._machine = self._machine, None
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            await bridge.close()
        if machine is not None:
            await _stop(machine)


def _pack_state(path: Path) -> bytes:
    # Level 1: a guest's state shrinks about 4x (91 MB to 23 MB) for under a CPU second; snapshots are stored.
    return _STATE_MAGIC + zlib.compress(path.read_bytes(), 1)


def _write_state(state: bytes, limit: int) -> str:
    """The migration stream of ``save_state``'s blob, in a file for QEMU's ``-incoming``; refused when it is not
    such a blob or inflates past ``limit`` (a guest's memory and devices)."""
    if not state.startswith(_STATE_MAGIC):
        raise BadInputError("state: not a saved microVM state (load_state takes what save_state returned)")
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(state[len(_STATE_MAGIC):], limit + 1)
    except zlib.error as exc:
        raise BadInputError(f"state: a corrupt saved microVM state: {exc}") from None
    if len(raw) > limit or inflater.unconsumed_tail:
        raise BadInputError(f"state: inflates past {limit} bytes, more than a guest of this size can hold")
    folder = tempfile.mkdtemp(prefix="evalsi-vm-state-")
    path = os.path.join(folder, "state.bin")
    with open(path, "wb") as f:
        f.write(raw)
    return path


async def _stop(machine: Machine) -> None:
    await machine.kill()


def _streams(machine: Machine) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if machine.agent_reader is None or machine.agent_writer is None:
        raise MachineFailed("vm: guest agent is not connected")
    return machine.agent_reader, machine.agent_writer


def _check_argv(argv: list[str]) -> None:
    if not argv or not all(isinstance(arg, str) for arg in argv):
        raise BadInputError("argv: expected a non-empty list of strings (the command and its arguments)")
    size = sum(len(arg.encode()) + 1 for arg in argv)
    if size > MAX_ARGV_BYTES:
        raise BadInputError(f"argv: {size} bytes, over the limit of {MAX_ARGV_BYTES}")


def _check_paths(paths: list[str], where: str) -> None:
    if len(paths) > MAX_PATHS:
        raise BadInputError(f"{where}: {len(paths)} paths in one call, over the limit of {MAX_PATHS}")
    for path in paths:
        if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\0" in path:
            raise BadInputError(f"{where}: {str(path)[:80]!r} is not a workspace path (1 to {MAX_PATH_CHARS} "
                                "characters, no NUL)")
