"""Deterministic fault injection: which tool call fails, and how. Pure functions.

A fault falls on a call when its number is listed (``calls``) or when a draw from ``rate`` says so. The draw
is seeded by the config's seed, the task, the trial, the tool and the call number, hashed with SHA-256
(Python's ``hash`` of a string changes per process), so a rerun injects the same faults on the same calls
whatever order parallel calls finish in, and different trials of a task get different, repeatable faults.

The kinds, as the agent sees them:

- ``timeout``: the call is abandoned as if it ran past the tool timeout (reported at once, no waiting);
- ``error``: the tool fails with an injected error, it is never called;
- ``malformed``: the tool is called, then its result is cut in half mid-JSON, as a broken server might send.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence

from .config import FaultConfig, FaultKind
from .tools import ToolResult


def fault_for(
    faults: Sequence[FaultConfig], tool: str, call_index: int, *, seed: int, task_id: str, trial: int
) -> FaultKind | None:
    """The fault to inject into the ``call_index``-th call (1-based) of ``tool`` in this trial, if any.
    The first matching entry wins, so a listed call cannot be overridden by a later rate."""
    for fault in faults:
        if fault.tool != tool:
            continue
        if call_index in fault.calls:
            return fault.kind
        if fault.rate and _draw(seed, task_id, trial, tool, call_index, fault.kind) < fault.rate:
            return fault.kind
    return None


def _draw(seed: int, task_id: str, trial: int, tool: str, call_index: int, kind: str) -> float:
    key = json.dumps([seed, task_id, trial, tool, call_index, kind]).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big")).random()


def timeout_result(tool: str, timeout_s: float) -> ToolResult:
    return ToolResult(error=f"tool {tool} timed out after {timeout_s:g} s")


def error_result(tool: str) -> ToolResult:
    return ToolResult(error=f"tool {tool} failed: 503 Service Unavailable (injected fault)")


def malformed(result: ToolResult) -> ToolResult:
    """The result's text cut in half: for a JSON result, JSON that no longer parses."""
    text = result.text if result.error is None else json.dumps({"error": result.error})
    if not text.startswith(("{", "[", '"')):
        text = json.dumps({"result": text})
    return ToolResult(value=text[: max(1, len(text) // 2)])
