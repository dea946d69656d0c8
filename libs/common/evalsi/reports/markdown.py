"""A report as GitHub-flavoured Markdown sized for a pull-request comment: always under GitHub's 65,536-character
limit (``COMMENT_LIMIT`` leaves room for a marker the poster adds), the record lists cut first, then the tables.

Every text that comes from data is escaped (``md_text``): it can neither break a table, nor open HTML, nor ping
someone with an @-mention or reference an issue, nor make GitHub fetch an image.
"""

from __future__ import annotations

import re

from evalsi.reports.model import ComparisonView, Delta, MetricRow, RecordRow, Report
from evalsi.runs.results import _fmt

COMMENT_LIMIT = 65_000
CELL_CHARS = 160  # of one explanation or reason in a list line
_LIST_STEPS = (50, 20, 5, 0)  # record lines listed per list, tried in turn until the comment fits
_ESCAPED = re.compile(r"([\\`*_\[\]~])")  # inline markup; nothing md_text returns starts a line
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;"}
# GitHub links @user and #123 in the rendered text (entities are decoded first), notifying the user or the issue;
# a word joiner after the sign breaks the link and shows nothing.
_REFERENCE = re.compile(r"(?<!\w)([@#])(?=\w)")


def md_text(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` as inert Markdown on one line: whitespace collapsed, at most ``limit`` characters, punctuation that
    Markdown reads inline backslash-escaped (no link, image, emphasis or code span), ``& < > |`` as entities (no
    HTML, no table break), and a word joiner after an ``@`` or ``#`` that starts a word (no mention, no issue
    reference)."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    line = _REFERENCE.sub("\\1\u2060", line)  # before the entities, whose '#' starts no reference
    line = "".join(_ENTITIES.get(char, char) for char in line)
    return _ESCAPED.sub(r"\\\1", line)


def render_markdown(report: Report, limit: int = COMMENT_LIMIT) -> str:
    """The report as Markdown of at most ``limit`` characters."""
    for listed in _LIST_STEPS:
        text = _render(report, listed, metrics=None)
        if len(text) <= limit:
            return text
    rows = len(report.metrics)
    while rows > 1:  # a run with thousands of metrics: keep the first ones and say how many are left out
        rows //= 2
        text = _render(report, 0, metrics=rows)
        if len(text) <= limit:
            return text
    cut = "\n\n_(cut to fit a comment: the HTML report has everything)_\n"
    text = _render(report, 0, metrics=1)
    return text[: limit - len(cut)].rsplit("\n", 1)[0] + cut


def _render(report: Report, listed: int, metrics: int | None) -> str:
    parts = [_heading(report), _gates(report), _metric_table(report, metrics), _errors(report), _budget(report)]
    if report.comparison is not None:
        parts.append(_deltas(report, metrics))
        parts.append(_flips(report.comparison, listed))
    parts.append(_failures(report, listed))
    parts.extend(f"> {md_text(note, 400)}" for note in report.notes)
    return "\n\n".join(part for part in parts if part) + "\n"


def _heading(report: Report) -> str:
    status = "✅" if not report.gates_failed else "❌"
    identity = " · ".join(f"**{md_text(label)}** {md_text(value, 120)}" for label, value in report.identity
                          if label in ("run", "dataset", "target", "evalsi", "not reproducible"))
    return f"## {status} {md_text(report.title, 200)}\n\n{identity} · **state** {md_text(report.state)}"


def _gates(report: Report) -> str:
    if not report.gates:
        return ""
    failed = report.gates_failed
    head = (f"### ❌ {failed} of {len(report.gates)} gates failed" if failed
            else f"### ✅ all {len(report.gates)} gates passed")
    lines = [head, ""]
    for gate in sorted(report.gates, key=lambda g: g.passed):
        mark = "✅" if gate.passed else "❌ **failed**"
        message = f" — {md_text(gate.message, 300)}" if gate.message and not gate.passed else ""
        lines.append(f"- {mark} `{_code(gate.expression)}`{message}")
    return "\n".join(lines)


def _code(text: str) -> str:
    """Text for an inline code span: one line, no backtick to end the span early, bounded."""
    line = " ".join(text.split()).replace("`", "'")
    return line if len(line) <= 300 else line[:299] + "…"


def _metric_table(report: Report, rows: int | None) -> str:
    shown = report.metrics if rows is None else report.metrics[:rows]
    header = f"| metric | n | mean | {report.level:.0%} CI | skipped | errors |\n|---|---:|---:|---:|---:|---:|"
    lines = ["### Metrics", "", header, *(_metric_line(m) for m in shown)]
    if len(shown) < len(report.metrics):
        lines.append(f"\n_{len(report.metrics) - len(shown)} more metrics left out to fit a comment_")
    if report.interval_methods:
        lines.append(f"\n<sub>intervals: {', '.join(md_text(m) for m in report.interval_methods)}</sub>")
    return "\n".join(lines)


def interval_text(low: float | None, high: float | None) -> str:
    return f"[{_fmt(low)}, {_fmt(high)}]" if low is not None and high is not None else "—"


def _metric_line(m: MetricRow) -> str:
    if m.kind == "label" and m.labels:
        mean = ", ".join(f"{md_text(label, 40)} {share:.0%}" for label, share in m.labels[:3])
        ci = ""
    else:
        mean, ci = _fmt(m.mean), interval_text(m.low, m.high)
    return f"| {md_text(m.metric)} | {m.n} | {mean} | {ci} | {m.skipped} | {md_text(m.errors)} |"


def _errors(report: Report) -> str:
    if not report.errors:
        return ""
    lines = ["**⚠️ Errors** (excluded from the metrics)", ""]
    lines += [f"- {md_text(note.text(), 400)}" for note in report.errors]
    return "\n".join(lines)


def _budget(report: Report) -> str:
    if not report.budget:
        return ""
    lines = ["**Budget use**", "", "| | used | limit | share |", "|---|---:|---:|---:|"]
    for line in report.budget:
        share = f"{line.used / line.limit:.0%}" if line.used is not None and line.limit else "—"
        lines.append(f"| {line.name} | {_fmt(line.used)} | {_fmt(line.limit)} | {share} |")
    return "\n".join(lines)


def _deltas(report: Report, rows: int | None) -> str:
    comparison = report.comparison
    assert comparison is not None
    deltas = comparison.deltas if rows is None else comparison.deltas[:rows]
    adjusted = comparison.adjust not in ("", "none")
    p_head = f"p ({comparison.adjust})" if adjusted else "p"
    head = [
        f"### Compared with the baseline {md_text(comparison.baseline_name or comparison.baseline_id)} "
        f"(`{_code(comparison.baseline_id)}`)",
        "",
        f"| metric | pairs | baseline | candidate | diff | {comparison.level:.0%} CI | {p_head} | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    worse = sum(d.verdict == "worse" for d in comparison.deltas)
    better = sum(d.verdict == "better" for d in comparison.deltas)
    summary = f"**{worse} worse ▼, {better} better ▲** of {len(comparison.deltas)} metrics compared"
    lines = [*head, *(_delta_line(d) for d in deltas)]
    if len(deltas) < len(comparison.deltas):
        lines.append(f"\n_{len(comparison.deltas) - len(deltas)} more metrics left out to fit a comment_")
    return summary + "\n\n" + "\n".join(lines)


def _delta_line(d: Delta) -> str:
    p = d.p_adjusted if d.p_adjusted is not None else d.p_value
    verdict = f"{d.marker} {d.verdict}".strip()
    if d.verdict == "worse":
        verdict = f"**{verdict}**"
    return (f"| {md_text(d.metric)} | {d.n_pairs} | {_fmt(d.baseline)} | {_fmt(d.candidate)} | {_fmt(d.diff)} | "
            f"{interval_text(d.low, d.high)} | {_fmt(p)} | {verdict} |")


def _flips(view: ComparisonView, listed: int) -> str:
    if not view.flips_total:
        return "_No record changed outcome._"
    better = view.flips_total - view.flips_worse
    lines = [f"<details><summary>{view.flips_total} records changed outcome ({view.flips_worse} worse, {better} "
             "better)</summary>", ""]
    shown = view.flips[:listed]
    for flip in shown:
        mark = "▲" if flip.improved else "▼"
        trial = f" (trial {flip.trial})" if flip.trial else ""
        lines.append(f"- {mark} `{_code(flip.record_id)}`{trial} {md_text(flip.metric)}: "
                     f"{md_text(flip.before)} → {md_text(flip.after)}")
    if view.flips_total > len(shown):
        lines.append(f"- … and {view.flips_total - len(shown)} more (the HTML report lists them)")
    return "\n".join([*lines, "", "</details>"])


def _failures(report: Report, listed: int) -> str:
    if not report.failures_total:
        return ""
    lines = [f"<details><summary>{report.failures_total} of {report.records_total} records failed a check or "
             "errored</summary>", ""]
    for row in report.failures[:listed]:
        lines.append(f"- `{_code(row.record_id)}`{f' (trial {row.trial})' if row.trial else ''}: {_failed(row)}")
    shown = min(listed, len(report.failures))
    if report.failures_total > shown:
        lines.append(f"- … and {report.failures_total - shown} more")
    return "\n".join([*lines, "", "</details>"])


def _failed(row: RecordRow) -> str:
    parts = []
    for cell in row.results:
        if cell.outcome == "error":
            parts.append(f"{md_text(cell.evaluator)} error: {md_text(cell.reason)}")
        for score in cell.scores:
            if score.value == "fail":
                why = f" ({md_text(score.explanation)})" if score.explanation else ""
                parts.append(f"{md_text(cell.evaluator)}.{md_text(score.name)} fail{why}")
    return "; ".join(parts)
