"""The pull request comment: the report's Markdown under the suite's marker, with where the baseline came from and
a link to the job, kept within GitHub's comment limit (pure)."""

from __future__ import annotations

from evalsi.ci.git_facts import GitFacts

# GitHub refuses a comment over 65,536 characters; this leaves room for what GitHub itself adds.
MAX_COMMENT_CHARS = 65_000
_CUT = "\n\n_…the summary was cut to fit a comment; the full report is the job's `report.html` artifact._\n"


def footer(facts: GitFacts, baseline: str) -> str:
    """One small line: the baseline, the commit and the job that made the summary."""
    parts = [f"baseline: {baseline}"]
    if facts.sha:
        parts.append(f"commit `{facts.sha[:12]}`")
    if facts.run_url:
        parts.append(f"[CI job]({facts.run_url}) (full HTML report in its artifacts)")
    return "\n\n---\n<sub>" + " · ".join(_plain(p) for p in parts) + "</sub>\n"


def _plain(text: str) -> str:
    # A branch or file name must not close the <sub> element or open another.
    return text.replace("<", "&lt;").replace(">", "&gt;")


def comment_body(mark: str, markdown: str, tail: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """``mark``, ``markdown`` and ``tail`` in at most ``limit`` characters: the Markdown is cut at a line
    boundary when it does not fit, and says so."""
    head = mark + "\n"
    whole = head + markdown.rstrip("\n") + "\n" + tail
    if len(whole) <= limit:
        return whole
    room = limit - len(head) - len(tail) - len(_CUT)
    if room <= 0:
        raise ValueError(f"the marker and footer alone exceed {limit} characters")
    kept = markdown[:room]
    cut = kept.rfind("\n")
    kept = kept[:cut] if cut > 0 else kept
    return head + kept + _CUT + tail
