"""``--mode perf``: time to first byte and total latency per turn over the replayed conversations.

The HTTP transport times each turn from sending ``POST /v1/responses``: TTFB at the stream's first event,
latency at ``response.completed``. An in-process agent answers whole, so it has a latency and no TTFB.
Only turns of cases that ran to the end count: an errored turn's timing measures the failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evalsi.cases.result import CaseResult


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (rank - low), 3)


def perf_summary(results: Sequence[CaseResult]) -> dict[str, Any]:
    turns = [turn for result in results if result.status in ("pass", "fail", "judge_pending") for turn in result.turns]
    ttfb = [turn.ttfb_ms for turn in turns if turn.ttfb_ms is not None]
    latency = [turn.latency_ms for turn in turns if turn.latency_ms is not None]
    return {
        "turns": len(turns),
        "ttfb_ms": {"n": len(ttfb), "p50": percentile(ttfb, 50), "p95": percentile(ttfb, 95)},
        "latency_ms": {"n": len(latency), "p50": percentile(latency, 50), "p95": percentile(latency, 95)},
    }


def render_perf(perf: dict[str, Any]) -> str:
    def line(name: str, stats: dict[str, Any]) -> str:
        if not stats["n"]:
            return f"{name}: n/a (not measured)"
        return f"{name}: p50 {stats['p50']:.1f} ms, p95 {stats['p95']:.1f} ms (n={stats['n']})"

    return f"perf over {perf['turns']} turn(s): {line('TTFB', perf['ttfb_ms'])}; {line('latency', perf['latency_ms'])}"
