"""``--trials N``: each case replayed (or simulated) N times in fresh conversations, pass@k and pass^k.

A trial passes or fails on its own. Per case, ``n`` is its graded trials (``pass`` + ``fail``; a skipped,
errored or judge_pending trial measured nothing) and ``c`` its passes. Over the case set, for each k from 1 to
N, the unbiased pass@k (at least one of k trials passes) and pass^k (all k pass) of ``evalsi.stats``,
averaged over the cases with at least k graded trials, with a Student-t interval over the per-case
estimates. A case with fewer than k graded trials has no unbiased estimate for that k and is left out of it
(counted in ``left_out``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from evalsi.stats import pass_at_k, pass_hat_k, summarize_pass_at_k, summarize_pass_hat_k

if TYPE_CHECKING:
    from evalsi.cases.result import CaseResult


def _aggregate(agg: Any) -> dict[str, Any]:
    return {"mean": None if agg.mean is None else round(agg.mean, 4),
            "ci_low": None if agg.ci_low is None else round(agg.ci_low, 4),
            "ci_high": None if agg.ci_high is None else round(agg.ci_high, 4),
            "level": agg.level, "method": agg.method}


def trials_summary(results: Sequence[CaseResult], trials: int) -> dict[str, Any]:
    """Per case its trials' outcomes, n, c, pass@k and pass^k; over the set, the same per k with intervals."""
    per_case: dict[str, dict[str, Any]] = {}
    for result in results:
        if result.trial is None or result.id is None:
            continue
        key = result.id if result.tenant in (None, "platform") else f"{result.id}@{result.tenant}"
        entry = per_case.setdefault(key, {"case": key, "agent": result.agent, "outcomes": [], "n": 0, "c": 0})
        entry["outcomes"].append(result.status)
        if result.status in ("pass", "fail"):
            entry["n"] += 1
            entry["c"] += result.status == "pass"
    for entry in per_case.values():
        n, c = entry["n"], entry["c"]
        entry["pass_at_k"] = {str(k): round(pass_at_k(n, c, k), 4) for k in range(1, n + 1)}
        entry["pass_hat_k"] = {str(k): round(pass_hat_k(n, c, k), 4) for k in range(1, n + 1)}
    by_k = []
    for k in range(1, trials + 1):
        eligible = [e for e in per_case.values() if e["n"] >= k]
        row: dict[str, Any] = {"k": k, "cases": len(eligible), "left_out": len(per_case) - len(eligible)}
        if eligible:
            ns, cs = [e["n"] for e in eligible], [e["c"] for e in eligible]
            row["pass_at_k"] = _aggregate(summarize_pass_at_k(ns, cs, k))
            row["pass_hat_k"] = _aggregate(summarize_pass_hat_k(ns, cs, k))
        else:
            row["pass_at_k"] = row["pass_hat_k"] = None
        by_k.append(row)
    return {"trials": trials, "estimator": "unbiased pass@k (Chen et al. 2021) and pass^k (Yao et al. 2024); "
            "Student-t interval over cases", "by_k": by_k, "cases": list(per_case.values())}


def render_trials(summary: dict[str, Any]) -> str:
    lines = [f"trials: {summary['trials']} per case, each in a fresh conversation"]
    for entry in summary["cases"]:
        lines.append(f"  {entry['case']}: {entry['c']}/{entry['n']} graded trials passed "
                     f"({', '.join(entry['outcomes'])})")

    def fmt(value: dict[str, Any] | None) -> str:
        if value is None or value["mean"] is None:
            return "n/a"
        if value["ci_low"] is None:
            return f"{value['mean']:.0%}"
        return f"{value['mean']:.0%} (95% CI {value['ci_low']:.0%}–{value['ci_high']:.0%})"

    for row in summary["by_k"]:
        left = f", {row['left_out']} left out (fewer than k graded trials)" if row["left_out"] else ""
        lines.append(f"  k={row['k']}: pass@k {fmt(row['pass_at_k'])}, pass^k {fmt(row['pass_hat_k'])} "
                     f"over {row['cases']} case(s){left}")
    return "\n".join(lines)
