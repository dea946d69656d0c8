"""The vm rung's failure dialects: how the guest agent's report of one execution becomes an ``Outcome``.

Pure: the agent's final frame and the program's stderr in, an ``Outcome`` out. The agent's own failures (it could
not start the command for a reason that is not the program's) are runner failures; what the guest kernel refused
(its cgroup's memory and pids bounds, a read-only root, no network device, a root-only file) is the program's
behavior under the policy: a denial.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping
from typing import Any

from evalsi.sandbox.hidden_paths import hidden_host_path
from evalsi.sandbox.model import Outcome

__all__ = ["DENIAL_SIGNATURES", "classify", "count_field"]

# The program's own failure text that a guest-side bound produces (first match wins).
DENIAL_SIGNATURES: tuple[tuple[str, tuple[bytes, ...]], ...] = (
    ("pids limit (guest cgroup pids.max)", (b"Resource temporarily unavailable", b"[Errno 11]", b"can't fork",
                                            b"retry: fork")),
    ("memory limit (guest cgroup memory.max)", (b"MemoryError", b"Cannot allocate memory", b"out of memory")),
    ("guest: read-only file system", (b"Read-only file system", b"[Errno 30]")),
    ("guest: no network device", (b"Network is unreachable", b"[Errno 101]", b"Network unreachable")),
    ("guest: workspace full (disk_bytes)", (b"No space left on device", b"[Errno 28]")),
    ("guest: permission denied", (b"Permission denied", b"Operation not permitted", b"[Errno 13]", b"[Errno 1]")),
)
_SIGNAL_EFFECTS = {signal.SIGXCPU: "cpu time limit (RLIMIT_CPU)", signal.SIGXFSZ: "file size limit (RLIMIT_FSIZE)",
                   signal.SIGKILL: "killed (SIGKILL)"}


def classify(done: Mapping[str, Any], stderr: bytes) -> Outcome:
    agent_error = str(done.get("agent_error") or "")
    if agent_error:
        return Outcome("runner_failure", signature=f"vm guest agent: {agent_error}"[:500])
    start_error = str(done.get("start_error") or "")
    if start_error:
        if start_error.startswith("FileNotFoundError"):
            return Outcome("exit", code=127)  # like a shell: the command does not exist in the guest
        if start_error.startswith("PermissionError"):
            return Outcome("denied", effect=f"guest: cannot execute: {start_error}"[:500])
        return Outcome("runner_failure", signature=f"vm guest agent: {start_error}"[:500])
    if done.get("timed_out"):
        return Outcome("timeout")
    if done.get("output_capped"):
        return Outcome("denied", effect="output cap")
    if count_field(done, "oom_kills"):
        return Outcome("denied", effect="oom-kill")
    code = done.get("returncode")
    if not isinstance(code, int):
        return Outcome("runner_failure", signature="vm guest agent: no exit status")
    if code != 0 and count_field(done, "pids_max"):
        return Outcome("denied", effect="pids limit (guest cgroup pids.max)")
    if code < 0:
        effect = _SIGNAL_EFFECTS.get(signal.Signals(-code)) if -code in signal.valid_signals() else None
        return Outcome("denied", effect=effect) if effect else Outcome("exit", code=128 - code)
    if code != 0:
        for effect, needles in DENIAL_SIGNATURES:
            if any(needle in stderr for needle in needles):
                return Outcome("denied", effect=effect)
        hidden = hidden_host_path(stderr)
        if hidden:
            return Outcome("denied", effect=f"host path not visible in the guest: {hidden}", code=code)
    return Outcome("exit", code=code)


def count_field(done: Mapping[str, Any], key: str) -> int:
    """A non-negative integer of the agent's report (0 when absent or malformed: the guest is not trusted)."""
    value = done.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
