"""Inline SVG plots for the HTML report: metric intervals as error bars, a histogram per metric, and a forest plot
of the paired differences of a comparison.

Plain SVG elements with classes (the report's stylesheet colours them, light and dark), no script, no external
reference, each with a ``<title>`` and an ``aria-label`` so a screen reader names it. Every text is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from evalsi.reports.model import Bin, Delta, MetricRow
from evalsi.runs.results import _fmt

WIDTH = 640
ROW = 26
LABEL = 200  # px for the metric names left of a plot
PAD = 12


@dataclass(frozen=True)
class _Scale:
    low: float
    high: float
    left: float
    right: float

    def x(self, value: float) -> float:
        span = self.high - self.low or 1.0
        return self.left + (value - self.low) / span * (self.right - self.left)


def _scale(values: Sequence[float], left: float, right: float, *, include: Sequence[float] = ()) -> _Scale:
    every = [*values, *include]
    low, high = min(every), max(every)
    if low == high:
        low, high = low - 0.5, high + 0.5
    margin = (high - low) * 0.05
    return _Scale(low - margin, high + margin, left, right)


def _svg(title: str, height: float, body: list[str]) -> str:
    label = escape(title)
    return (f'<svg class="plot" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" role="img" '
            f'aria-label="{label}"><title>{label}</title>{"".join(body)}</svg>')


def _axis(scale: _Scale, y: float) -> list[str]:
    """A baseline at ``y`` with the two ends labelled."""
    return [
        f'<line class="axis" x1="{scale.left:.1f}" y1="{y:.1f}" x2="{scale.right:.1f}" y2="{y:.1f}"/>',
        f'<text class="tick" x="{scale.left:.1f}" y="{y + 14:.1f}">{escape(_fmt(scale.low))}</text>',
        f'<text class="tick" x="{scale.right:.1f}" y="{y + 14:.1f}" text-anchor="end">'
        f"{escape(_fmt(scale.high))}</text>",
    ]


def error_bars(metrics: Sequence[MetricRow]) -> str:
    """Each metric's mean as a dot with its interval as a bar. Pass/fail rates share one axis from 0 to 1; a number
    (a similarity, seconds, dollars) is drawn on its own scale, its ends labelled on its row, since one axis for
    all would flatten the small ones. Empty when no metric has an interval."""
    shown = [m for m in metrics if m.mean is not None and m.low is not None and m.high is not None]
    if not shown:
        return ""
    unit = _Scale(0.0, 1.0, LABEL + 20, WIDTH - PAD - 70)  # room left and right for a row's own scale's ends
    body: list[str] = []
    for i, m in enumerate(shown):
        y = PAD + i * ROW + ROW / 2
        assert m.low is not None and m.high is not None and m.mean is not None
        scale = unit
        if m.kind != "boolean":
            scale = _scale([m.low, m.high, m.mean], unit.left, unit.right)
            body += [f'<text class="tick" x="{scale.left - 4:.1f}" y="{y + 4:.1f}" text-anchor="end">'
                     f"{escape(_fmt(scale.low))}</text>",
                     f'<text class="tick" x="{scale.right + 4:.1f}" y="{y + 4:.1f}">{escape(_fmt(scale.high))}</text>']
        body += [
            f'<text class="label" x="{LABEL - 56}" y="{y + 4:.1f}" text-anchor="end">'
            f"{escape(_short(m.metric, 22))}</text>",
            f'<line class="interval" x1="{scale.x(m.low):.1f}" y1="{y:.1f}" x2="{scale.x(m.high):.1f}" y2="{y:.1f}"/>',
            f'<circle class="mean" cx="{scale.x(m.mean):.1f}" cy="{y:.1f}" r="4"><title>'
            f"{escape(m.metric)}: {_fmt(m.mean)} [{_fmt(m.low)}, {_fmt(m.high)}]</title></circle>",
        ]
    height = PAD + len(shown) * ROW + 24
    body += _axis(unit, height - 22)
    return _svg("Mean of each metric with its confidence interval", height, body)


def histogram(metric: str, bins: Sequence[Bin]) -> str:
    """Bars of the record counts in each bin, labelled under the first and last bar (both bars for pass/fail)."""
    if not bins:
        return ""
    width, height, top, bottom = 300.0, 140.0, 10.0, 110.0
    most = max(b.count for b in bins) or 1
    step = (width - 2 * PAD) / len(bins)
    body = []
    for i, b in enumerate(bins):
        h = (bottom - top) * b.count / most
        x = PAD + i * step
        body.append(f'<rect class="bar" x="{x + 1:.1f}" y="{bottom - h:.1f}" width="{max(step - 2, 1):.1f}" '
                    f'height="{h:.1f}"><title>{escape(b.label)}: {b.count}</title></rect>')
    labelled = range(len(bins)) if len(bins) <= 2 else (0, len(bins) - 1)
    for i in labelled:
        anchor = "start" if i == 0 and len(bins) > 2 else ("end" if len(bins) > 2 else "middle")
        x = PAD + i * step + (step / 2 if len(bins) <= 2 else (0 if i == 0 else step))
        text = bins[i].label if len(bins) <= 2 else _fmt(bins[i].low if i == 0 else bins[i].high)
        body.append(f'<text class="tick" x="{x:.1f}" y="{bottom + 16:.1f}" text-anchor="{anchor}">'
                    f"{escape(text)}</text>")
    body.append(f'<line class="axis" x1="{PAD}" y1="{bottom}" x2="{width - PAD}" y2="{bottom}"/>')
    label = escape(f"Distribution of {metric}: {sum(b.count for b in bins)} values")
    return (f'<svg class="plot hist" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
            f'role="img" aria-label="{label}"><title>{label}</title>{"".join(body)}</svg>')


def forest(deltas: Sequence[Delta]) -> str:
    """Each metric's paired difference (candidate − baseline) with its interval, a line at zero; the marks carry the
    verdict's class (better, worse, same)."""
    shown = [d for d in deltas if d.diff is not None]
    if not shown:
        return ""
    values = [v for d in shown for v in (d.low, d.high, d.diff) if v is not None]
    scale = _scale(values, LABEL, WIDTH - PAD, include=(0.0,))
    height = PAD + len(shown) * ROW + 24
    zero = scale.x(0.0)
    body = [f'<line class="zero" x1="{zero:.1f}" y1="{PAD / 2:.1f}" x2="{zero:.1f}" y2="{height - 22:.1f}"/>']
    for i, d in enumerate(shown):
        assert d.diff is not None
        y = PAD + i * ROW + ROW / 2
        verdict = {"better": "better", "worse": "worse"}.get(d.verdict, "same")
        body.append(f'<text class="label" x="{LABEL - 8}" y="{y + 4:.1f}" text-anchor="end">'
                    f"{escape(_short(d.metric))}</text>")
        if d.low is not None and d.high is not None:
            body.append(f'<line class="interval {verdict}" x1="{scale.x(d.low):.1f}" y1="{y:.1f}" '
                        f'x2="{scale.x(d.high):.1f}" y2="{y:.1f}"/>')
        body.append(f'<rect class="mean {verdict}" x="{scale.x(d.diff) - 4:.1f}" y="{y - 4:.1f}" width="8" height="8">'
                    f"<title>{escape(d.metric)}: {_fmt(d.diff)} [{_fmt(d.low)}, {_fmt(d.high)}], "
                    f"{escape(d.verdict)}</title></rect>")
    body += _axis(scale, height - 22)
    return _svg("Paired difference of each metric (candidate minus baseline) with its confidence interval",
                height, body)


def _short(name: str, limit: int = 28) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
