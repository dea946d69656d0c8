"""The functional probe's last step, the same on every rung: `true` under the real profile, then judged.

A rung is available only when `true` exits 0 in a session its driver created with its real profile (an installed
binary is no proof); the session is destroyed either way.
"""

from __future__ import annotations

from evalsi.sandbox.model import SandboxSession

__all__ = ["true_fails"]


async def true_fails(session: SandboxSession, *, timeout_s: float | None = None) -> str:
    """'' when `true` exits 0 in ``session``; else what happened instead (kind and detail). Destroys the session."""
    try:
        result = await session.exec(["true"], timeout_s=timeout_s)
    finally:
        await session.destroy()
    outcome = result.outcome
    if outcome.kind == "exit" and outcome.code == 0:
        return ""
    return f"{outcome.kind}: {outcome.signature or outcome.effect or f'exit {outcome.code}'}"
