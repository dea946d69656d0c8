"""A report as one self-contained HTML file: inline CSS (light and dark by ``prefers-color-scheme``), inline SVG
plots, semantic tables, no script and no external reference, so it reads the same offline, attached to a CI run or
mailed.

Every text from data goes through ``html.escape``. A Content-Security-Policy in the page allows nothing but its own
stylesheet (by hash) and data: images, so even markup that got past the escaping could neither run nor fetch.
"""

from __future__ import annotations

import base64
import hashlib
from html import escape

from evalsi.reports import svg
from evalsi.reports.markdown import interval_text
from evalsi.reports.model import ComparisonView, Delta, MetricRow, RecordRow, Report
from evalsi.runs.results import _fmt

CSS = """
:root { color-scheme: light dark; --fg: #1b1f24; --muted: #57606a; --bg: #ffffff; --panel: #f6f8fa;
  --line: #d0d7de; --accent: #0969da; --good: #1a7f37; --bad: #cf222e; --warn: #9a6700; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --muted: #9da7b3; --bg: #0d1117; --panel: #161b22; --line: #30363d; --accent: #58a6ff;
    --good: #3fb950; --bad: #f85149; --warn: #d29922; }
}
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 20px; }
h1 { font-size: 1.6rem; margin: 20px 0 6px; } h2 { font-size: 1.25rem; margin-top: 28px; }
a { color: var(--accent); }
.skip { position: absolute; left: -9999px; } .skip:focus { left: 8px; top: 8px; background: var(--bg); }
.muted, .tick, caption, figcaption { color: var(--muted); }
dl.identity { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dl.identity dt { color: var(--muted); } dl.identity dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 8px 0; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { background: var(--panel); }
caption { text-align: left; caption-side: bottom; font-size: 0.85rem; padding-top: 4px; }
.pass, .better { color: var(--good); } .fail, .worse, .error { color: var(--bad); font-weight: 600; }
.banner { border: 1px solid var(--line); border-left: 6px solid var(--good); padding: 8px 12px;
  background: var(--panel); margin: 12px 0; }
.banner.failed { border-left-color: var(--bad); }
.text { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 16em; overflow: auto; margin: 0;
  font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
ul.scores { margin: 0; padding-left: 1.1em; }
.grid { display: flex; flex-wrap: wrap; gap: 12px; } figure { margin: 0; }
svg.plot { max-width: 100%; height: auto; font-size: 12px; }
svg text { fill: var(--fg); } svg .tick { fill: var(--muted); }
svg .axis, svg .zero { stroke: var(--muted); stroke-width: 1; } svg .zero { stroke-dasharray: 4 3; }
svg .interval { stroke: var(--accent); stroke-width: 3; } svg .mean { fill: var(--accent); }
svg .bar { fill: var(--accent); opacity: 0.85; }
svg .interval.better { stroke: var(--good); } svg .mean.better { fill: var(--good); }
svg .interval.worse { stroke: var(--bad); } svg .mean.worse { fill: var(--bad); }
""".strip()

_CSP = (f"default-src 'none'; style-src 'sha256-{base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()}'; "
        "img-src data:; base-uri 'none'; form-action 'none'")


def render_html(report: Report) -> str:
    """The report as a complete HTML document."""
    sections = [
        _gates(report),
        _metrics(report),
        _distributions(report),
        _errors(report),
        _budget(report),
        _manifest(report),
        _comparison(report.comparison) if report.comparison is not None else "",
        _records(report),
        _notes(report),
    ]
    status = "failed" if report.gates_failed else ""
    version = dict(report.identity).get("evalsi", "")
    return "\n".join([
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<title>{escape(report.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        '<a class="skip" href="#metrics">Skip to the metrics</a>',
        "<header>",
        f"<h1>{escape(report.title)}</h1>",
        f'<p class="banner {status}">{escape(_status_line(report))}</p>',
        _identity(report),
        "</header>",
        "<main>",
        *(section for section in sections if section),
        "</main>",
        f'<footer><p class="muted">Made by <code>evalsi report</code>{" " + escape(version) if version else ""}: '
        "one file, no script, nothing fetched.</p></footer>",
        "</body>",
        "</html>",
        "",
    ])


def _status_line(report: Report) -> str:
    parts = [f"state: {report.state}"]
    if report.gates:
        failed = report.gates_failed
        parts.append(f"{failed} of {len(report.gates)} gates failed" if failed else f"all {len(report.gates)} gates "
                     "passed")
    if report.comparison is not None:
        worse = sum(d.verdict == "worse" for d in report.comparison.deltas)
        better = sum(d.verdict == "better" for d in report.comparison.deltas)
        parts.append(f"against the baseline: {worse} metrics worse, {better} better")
    return " · ".join(parts)


def _identity(report: Report) -> str:
    rows = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in report.identity)
    return f'<dl class="identity">{rows}</dl>'


def _section(anchor: str, title: str, *body: str) -> str:
    return (f'<section id="{anchor}" aria-labelledby="{anchor}-h"><h2 id="{anchor}-h">{escape(title)}</h2>'
            + "".join(body) + "</section>")


def _table(caption: str, headers: list[tuple[str, bool]], rows: list[str]) -> str:
    """A table with column headers (``(text, numeric)``) and rows already made of cells."""
    head = "".join(f'<th scope="col"{" class=num" if numeric else ""}>{escape(text)}</th>' for text, numeric in headers)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _num(value: str) -> str:
    return f'<td class="num">{escape(value)}</td>'


def _gates(report: Report) -> str:
    if not report.gates:
        return ""
    rows = [
        f'<tr><th scope="row"><code>{escape(g.expression)}</code></th>'
        f'<td class="{"pass" if g.passed else "fail"}">{"passed" if g.passed else "failed"}</td>'
        f"<td>{escape(g.message)}</td></tr>"
        for g in sorted(report.gates, key=lambda g: g.passed)
    ]
    return _section("gates", "Gates", _table("", [("gate", False), ("result", False), ("message", False)], rows))


def _metrics(report: Report) -> str:
    level = f"{report.level:.0%} CI"
    headers = [("metric", False), ("n", True), ("mean", True), (level, True), ("skipped", True), ("errors", True)]
    caption = "Only scored records count; skipped and errored evaluations are counted apart."
    if report.interval_methods:
        caption += " Intervals: " + ", ".join(report.interval_methods) + "."
    rows = [_metric_row(m) for m in report.metrics]
    plot = svg.error_bars(report.metrics)
    if plot:
        plot = (f"<figure>{plot}<figcaption>Means with their intervals: pass/fail rates on the axis from 0 to 1, "
                "each number on its own scale, its ends labelled on its row.</figcaption></figure>")
    return _section("metrics", "Metrics", _table(caption, headers, rows), plot)


def _metric_row(m: MetricRow) -> str:
    if m.kind == "label" and m.labels:
        mean = ", ".join(f"{label} {share:.0%}" for label, share in m.labels[:5])
        ci = ""
    else:
        mean, ci = _fmt(m.mean), interval_text(m.low, m.high)
    return (f'<tr><th scope="row">{escape(m.metric)}</th>{_num(str(m.n))}{_num(mean)}{_num(ci)}'
            f"{_num(str(m.skipped))}{_num(m.errors)}</tr>")


def _distributions(report: Report) -> str:
    if not report.histograms:
        return ""
    figures = "".join(
        f"<figure><figcaption>{escape(h.metric)}</figcaption>{svg.histogram(h.metric, h.bins)}</figure>"
        for h in report.histograms
    )
    return _section("distributions", "Distributions", f'<div class="grid">{figures}</div>')


def _errors(report: Report) -> str:
    if not report.errors:
        return ""
    items = "".join(f"<li>{escape(note.text())}</li>" for note in report.errors)
    return _section("errors", "Errors (excluded from the metrics)", f"<ul>{items}</ul>")


def _budget(report: Report) -> str:
    if not report.budget:
        return ""
    rows = []
    for line in report.budget:
        share = f"{line.used / line.limit:.0%}" if line.used is not None and line.limit else "—"
        rows.append(f'<tr><th scope="row">{escape(line.name)}</th>{_num(_fmt(line.used))}{_num(_fmt(line.limit))}'
                    f"{_num(share)}</tr>")
    headers = [("budget", False), ("used", True), ("limit", True), ("share", True)]
    return _section("budget", "Budget use", _table("", headers, rows))


def _manifest(report: Report) -> str:
    if not report.manifest:
        return ""
    rows = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in report.manifest)
    return _section("manifest", "Manifest", f'<details><summary>What this run pinned ({len(report.manifest)} '
                    f'entries)</summary><dl class="identity">{rows}</dl></details>')


def _comparison(view: ComparisonView) -> str:
    adjusted = view.adjust not in ("", "none")
    headers = [("metric", False), ("pairs", True), ("baseline", True), ("candidate", True), ("diff", True),
               (f"{view.level:.0%} CI", True), ("test", False), ("p", True),
               *([(f"p ({view.adjust})", True)] if adjusted else []), ("verdict", False)]
    rows = [_delta_row(d, adjusted) for d in view.deltas]
    caption = (f"Paired by record: candidate (this run) minus baseline. A verdict is better or worse only when the "
               f"{'adjusted ' if adjusted else ''}p is below {1 - view.level:.2g}.")
    flips = _flips(view)
    return _section(
        "comparison",
        f"Compared with the baseline {view.baseline_name or view.baseline_id} ({view.baseline_id})",
        _table(caption, headers, rows),
        svg.forest(view.deltas),
        flips,
    )


def _delta_row(d: Delta, adjusted: bool) -> str:
    verdict_class = {"better": "better", "worse": "worse"}.get(d.verdict, "")
    p_adjusted = _num(_fmt(d.p_adjusted)) if adjusted else ""
    return (f'<tr><th scope="row">{escape(d.metric)}</th>{_num(str(d.n_pairs))}{_num(_fmt(d.baseline))}'
            f"{_num(_fmt(d.candidate))}{_num(_fmt(d.diff))}{_num(interval_text(d.low, d.high))}"
            f"<td>{escape(d.test)}</td>{_num(_fmt(d.p_value))}{p_adjusted}"
            f'<td class="{verdict_class}">{escape((d.marker + " " + d.verdict).strip())}</td></tr>')


def _flips(view: ComparisonView) -> str:
    if not view.flips_total:
        return "<p>No record changed outcome.</p>"
    rows = [
        f'<tr><th scope="row">{escape(f.record_id)}</th>{_num(str(f.trial))}<td>{escape(f.metric)}</td>'
        f"<td>{escape(f.before)}</td><td>{escape(f.after)}</td>"
        f'<td class="{"better" if f.improved else "worse"}">{"▲ better" if f.improved else "▼ worse"}</td></tr>'
        for f in view.flips
    ]
    headers = [("record", False), ("trial", True), ("metric", False), ("baseline", False), ("candidate", False),
               ("change", False)]
    left_out = view.flips_total - len(view.flips)
    note = f" ({left_out} more left out: raise --max-records to see them)" if left_out else ""
    return (f'<h3 id="flips">{view.flips_total} records changed outcome ({view.flips_worse} worse){escape(note)}</h3>'
            + _table("", headers, rows))


def _records(report: Report) -> str:
    if not report.records_total:
        return ""
    left_out = report.records_total - len(report.records)
    note = f"{len(report.records)} of {report.records_total} records, failing ones first"
    note += f"; {left_out} left out (raise --max-records to see more)." if left_out else "."
    if not report.records_at_hand:
        note += (" Input, output and reference are not in a saved result: give the data with --data to show "
                 "them.")
    headers = [("record", False), ("trial", True)]
    if report.records_at_hand:
        headers += [("input", False), ("output", False), ("reference", False)]
    agents = any(row.trajectory for row in report.records)
    if agents:
        headers.append(("trajectory", False))
    headers.append(("results", False))
    rows = [_record_row(row, report.records_at_hand, agents) for row in report.records]
    return _section("records", "Records", f'<p class="muted">{escape(note)}</p>', _table("", headers, rows))


def _record_row(row: RecordRow, at_hand: bool, agents: bool) -> str:
    cells = [f'<th scope="row">{escape(row.record_id)}</th>', _num(str(row.trial))]
    if at_hand:
        for text in (row.input, row.output, row.reference):
            cells.append(f'<td><div class="text">{escape(text)}</div></td>' if text is not None
                         else '<td class="muted">not in the data</td>')
    if agents:
        cells.append(f'<td><div class="text">{escape(row.trajectory)}</div></td>')
    items = []
    for cell in row.results:
        scores = "".join(
            f'<li><span class="{escape(s.value) if s.value in ("pass", "fail") else ""}">{escape(s.name)} = '
            f"{escape(s.value)}</span>"
            + (f'<div class="text">{escape(s.explanation)}</div>' if s.explanation else "") + "</li>"
            for s in cell.scores
        )
        reason = f'<div class="text">{escape(cell.reason)}</div>' if cell.reason else ""
        outcome = f' <span class="{escape(cell.outcome)}">{escape(cell.outcome)}</span>' if cell.outcome != "scored" \
            else ""
        items.append(f"<li><strong>{escape(cell.evaluator)}</strong>{outcome}"
                     f'{f"<ul class=scores>{scores}</ul>" if scores else ""}{reason}</li>')
    cells.append(f'<td><ul class="scores">{"".join(items)}</ul></td>')
    return f"<tr>{''.join(cells)}</tr>"


def _notes(report: Report) -> str:
    if not report.notes:
        return ""
    return _section("notes", "Notes", "<ul>" + "".join(f"<li>{escape(n)}</li>" for n in report.notes) + "</ul>")
