"""The case report as text (every check of every case, then the pass rate) and its exit code."""

from __future__ import annotations

from evalsi.cases.gate import render_gate
from evalsi.cases.pairwise import render_pairwise
from evalsi.cases.perf import render_perf
from evalsi.cases.runner import Report

_LABEL = {"pass": "PASS", "fail": "FAIL", "judge_pending": "PENDING", "skipped": "SKIP", "broken": "BROKEN",
          "error": "ERROR"}

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_GATE_FAILED = 0, 1, 2, 3


def exit_code(report: Report, *, accepting: bool = False) -> int:
    """2 when a case is broken (the suite itself needs fixing), else 3 when one fails (with ``--baseline``:
    only on a regression), else 1 when one could not run (a transport or judge error), else 0. Skipped and
    judge_pending cases never block. ``accepting`` (``--update-baseline``): failures are being accepted, so
    they do not block either."""
    counts = report.summary.counts
    if counts["broken"]:
        return EXIT_BAD_INPUT
    if not accepting and (report.gate["regressions"] if report.gate is not None else counts["fail"]):
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
        if result.pairwise is not None:
            flip = " (order-dependent)" if result.pairwise["order_dependent"] else ""
            lines.append(f"         pairwise      {result.pairwise['outcome']}{flip} vs: {result.pairwise['vs']}")
    summary = report.summary
    counts = ", ".join(f"{n} {status}" for status, n in summary.counts.items() if n)
    total = sum(summary.counts.values())
    if summary.pass_rate is None:
        rate = "pass rate: n/a (no case passed or failed)"
    else:
        rate = (f"pass rate {summary.pass_rate:.0%} (95% Wilson CI {summary.ci_low:.0%}–{summary.ci_high:.0%}, "
                f"n={summary.n})")
    lines.append(f"{total} case(s): {counts or 'none'}; {rate}")
    if report.panel is not None:
        judges = ", ".join(f"{j['name']} ({j['provider']}/{j['model']})" for j in report.panel["judges"])
        lines.append(f"panel: {judges}; aggregate {report.panel['aggregate']}, min_agreement "
                     f"{report.panel['min_agreement']}, quorum {report.panel['quorum']}")
    if report.perf is not None:
        lines.append(render_perf(report.perf))
    if report.pairwise is not None:
        lines.append(render_pairwise(report.pairwise))
    if report.gate is not None:
        lines.append(render_gate(report.gate))
    return "\n".join(lines)
