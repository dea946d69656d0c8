"""The case report as text (every check of every case, then the pass rate) and its exit code."""

from __future__ import annotations

from evalsi.cases.runner import Report

_LABEL = {"pass": "PASS", "fail": "FAIL", "judge_pending": "PENDING", "skipped": "SKIP", "broken": "BROKEN",
          "error": "ERROR"}

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_GATE_FAILED = 0, 1, 2, 3


def exit_code(report: Report) -> int:
    """2 when a case is broken (the suite itself needs fixing), else 3 when one fails, else 1 when one could
    not run (a transport error), else 0. Skipped and judge_pending cases never block."""
    counts = report.summary.counts
    if counts["broken"]:
        return EXIT_BAD_INPUT
    if counts["fail"]:
        return EXIT_GATE_FAILED
    if counts["error"]:
        return EXIT_INTERNAL
    return EXIT_OK


def render_table(report: Report) -> str:
    lines = [f"notice: {notice}" for notice in report.notices]
    for result in report.results:
        lines.append(f"{_LABEL[result.status]:<8} {result.id or '(unreadable)'}  {result.where}")
        if result.status in ("skipped", "broken", "error", "judge_pending") or not result.checks:
            lines.append(f"         {result.reason}")
        for check in result.checks:
            lines.append(f"         {check.status:<13} {check.name}: {check.reason}")
    summary = report.summary
    counts = ", ".join(f"{n} {status}" for status, n in summary.counts.items() if n)
    total = sum(summary.counts.values())
    if summary.pass_rate is None:
        rate = "pass rate: n/a (no case passed or failed)"
    else:
        rate = (f"pass rate {summary.pass_rate:.0%} (95% Wilson CI {summary.ci_low:.0%}–{summary.ci_high:.0%}, "
                f"n={summary.n})")
    lines.append(f"{total} case(s): {counts or 'none'}; {rate}")
    return "\n".join(lines)
