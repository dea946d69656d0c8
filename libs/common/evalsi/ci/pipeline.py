"""A CI job's evaluation from start to end: run the suite, save its result, find the baseline, write the HTML
report and the Markdown summary, add the summary to the job's page and post it on the pull request.

Publishing is best effort: a comment GitHub refuses or a step summary that cannot be written is a warning, and the
job's exit code stays the suite's (the caller's ``evalsi ci run`` decides it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalsi.ci.baseline import Baseline, baseline_file, baseline_run, newest_run_of_branch
from evalsi.ci.git_facts import GitFacts
from evalsi.ci.github import CommentError, Posted, PullRequest, marker, upsert_comment
from evalsi.ci.render import render
from evalsi.ci.suite import Suite, run_embedded, run_on_server
from evalsi.ci.summary import comment_body, footer
from evalsi.runs.compare import compare_runs
from evalsi.runs.results import EvaluationResults

if TYPE_CHECKING:
    from evalsi.client import Client
    from evalsi.v1alpha1.run_pb2 import Comparison

RESULTS_FILE = "results.json"
BASELINE_FILE = "baseline.json"
REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.md"


@dataclass(frozen=True)
class Job:
    """What the job does. ``baseline``: a result file, or with a server a run id; empty for the newest run of
    the base branch on the server. ``pull``: where to comment (None: no comment). ``step_summary``: the file the
    summary is appended to (GitHub's ``$GITHUB_STEP_SUMMARY``), or empty."""

    suite: Suite
    facts: GitFacts
    output_dir: Path
    baseline: str = ""
    title: str = ""
    pull: PullRequest | None = None
    step_summary: str = ""


@dataclass(frozen=True)
class Outcome:
    results: EvaluationResults
    baseline: Baseline
    comparison: Comparison | None
    results_file: Path
    report_file: Path
    summary_file: Path  # the comment's body, as posted
    posted: Posted | None


def _named_run(job: Job, client: Client | None) -> Baseline | None:
    """The baseline run the job names on the server, fetched before the suite runs: an unknown id is refused
    before anything is spent."""
    if client is None or not job.baseline or Path(job.baseline).is_file():
        return None
    return baseline_run(client, job.baseline, "")


def _baseline(job: Job, client: Client | None, results: EvaluationResults) -> Baseline:
    if job.baseline:
        return baseline_file(job.baseline)
    if client is None:
        return Baseline(None, "no baseline: none given (--baseline FILE)")
    if not job.facts.base_branch:
        return Baseline(None, "no baseline: not a pull request, and no --base-branch or --baseline given")
    return newest_run_of_branch(client, branch=job.facts.base_branch, name=results.run.name,
                                exclude=results.run.id)


def run_job(job: Job, *, client: Client | None, warn: Callable[[str], None]) -> Outcome:
    """Run the suite (on the server when ``client`` is given), then write, summarize and publish."""
    job.output_dir.mkdir(parents=True, exist_ok=True)
    labels = job.facts.labels()
    named = _named_run(job, client)
    results = run_on_server(client, job.suite, labels) if client is not None else run_embedded(
        job.suite, labels, warn=warn)
    results_file = results.save(job.output_dir / RESULTS_FILE)
    baseline = named or _baseline(job, client, results)
    baseline_path: Path | None = None
    comparison = None
    if baseline.results is not None:
        baseline_path = (Path(job.baseline) if named is None and job.baseline
                         else baseline.results.save(job.output_dir / BASELINE_FILE))
        comparison = compare_runs(baseline.results.run, results.run)
    else:
        warn(baseline.source)
    report_file = render(results_file, job.output_dir / REPORT_FILE, "html", baseline=baseline_path,
                         title=job.title)
    summary_file = render(results_file, job.output_dir / SUMMARY_FILE, "md", baseline=baseline_path,
                          title=job.title)
    mark = marker(results.run.name or job.title or "evalsi")
    body = comment_body(mark, summary_file.read_text(encoding="utf-8"), footer(job.facts, baseline.source))
    summary_file.write_text(body, encoding="utf-8")  # what is posted, for CI systems that post it themselves
    if job.step_summary:
        _append_step_summary(Path(job.step_summary), body, warn)
    posted = None
    if job.pull is not None:
        try:
            posted = asyncio.run(upsert_comment(job.pull, body, mark))
        except CommentError as exc:
            warn(f"the pull request comment was not posted: {exc}")
    return Outcome(results, baseline, comparison, results_file, report_file, summary_file, posted)


def _append_step_summary(path: Path, body: str, warn: Callable[[str], None]) -> None:
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(body + "\n")
    except OSError as exc:
        warn(f"the step summary {path} was not written: {exc.strerror or exc}")
