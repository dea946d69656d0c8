"""Reports of runs: a pure model built from a run document (``model``), rendered as Markdown for a pull-request
comment (``markdown``) or as one self-contained HTML file with inline SVG plots (``html``, ``svg``); and per-slice
statistics of a metric (``slices``) for ``evalsi analyze slice``."""

from evalsi.reports.html import render_html
from evalsi.reports.markdown import COMMENT_LIMIT, render_markdown
from evalsi.reports.model import Report, build_report

__all__ = ["COMMENT_LIMIT", "Report", "build_report", "render_html", "render_markdown"]
