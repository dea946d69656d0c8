"""Progress without a terminal: plain lines (done/total, rate, ETA) every few seconds, and one when it ends."""

from __future__ import annotations

import io
import re
import time

from evalsi.runs.console import PlainProgress, progress_line


def test_progress_line_says_done_total_rate_and_eta() -> None:
    assert progress_line(0, 300, 2.0) == "evaluating: 0/300 (0%)"
    assert progress_line(120, 300, 5.0) == "evaluating: 120/300 (40%), 24.0/s, ETA 8s"
    assert progress_line(10, 3610, 10.0) == "evaluating: 10/3610 (0%), 1.0/s, ETA 1h00m"
    assert progress_line(300, 300, 5.0) == "evaluating: 300/300 (100%), 60.0/s"


def test_plain_progress_prints_while_the_run_goes_and_when_it_ends() -> None:
    out = io.StringIO()
    with PlainProgress(4, out, every_s=0.05) as progress:
        progress.advance(1)
        time.sleep(0.3)  # a stalled run still says where it is
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3
    assert all(re.fullmatch(r"evaluating: 1/4 \(25%\), [\d.]+/s, ETA \d+s", line) for line in lines[:-1]), lines
    assert lines[-1] == "evaluated 1/4 in 0s"
