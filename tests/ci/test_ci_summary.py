"""The comment body: the marker first, the report's Markdown, the footer, never over the limit (pure)."""

from __future__ import annotations

from evalsi.ci.git_facts import GitFacts
from evalsi.ci.github import marker
from evalsi.ci.summary import MAX_COMMENT_CHARS, comment_body, footer


def test_a_summary_that_fits_is_kept_whole() -> None:
    tail = footer(GitFacts(sha="a" * 40, run_url="https://github.com/acme/app/actions/runs/1"), "run r-1")
    body = comment_body(marker("qa"), "## report\n\n| a | b |\n", tail)
    assert body == "<!-- evalsi-ci:qa -->\n## report\n\n| a | b |\n" + tail
    assert "baseline: run r-1 · commit `aaaaaaaaaaaa` · [CI job](https://github.com/acme/app/actions/runs/1)" in tail


def test_a_summary_too_long_is_cut_at_a_line_and_says_so() -> None:
    markdown = "".join(f"| record {n} | {'x' * 80} |\n" for n in range(2000))  # about 190,000 characters
    tail = footer(GitFacts(), "results.json")
    body = comment_body(marker("qa"), markdown, tail)
    assert len(body) <= MAX_COMMENT_CHARS
    assert body.startswith("<!-- evalsi-ci:qa -->\n| record 0 |") and body.endswith(tail)
    kept = body.split("\n\n_…the summary was cut")[0]
    assert kept.endswith("|")  # whole lines only: no half a table row
    assert "the full report is the job's `report.html` artifact" in body


def test_names_from_data_cannot_open_html_in_the_footer() -> None:
    tail = footer(GitFacts(), "no baseline: </sub><img src=x> does not exist")
    assert "<img" not in tail and "&lt;/sub&gt;&lt;img src=x&gt;" in tail


def test_the_marker_keeps_only_safe_characters() -> None:
    mark = marker("qa suite --> <b>")
    assert mark == "<!-- evalsi-ci:qa-suite------b- -->"
    assert mark.count("-->") == 1  # a name cannot close the comment early and show the rest
