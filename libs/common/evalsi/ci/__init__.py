"""CI: a suite run for a CI job, labelled with its commit, compared with the base branch's run, reported as HTML
and Markdown and posted as one pull request comment (``evalsi ci run``, the GitHub Action, docs/ci.md)."""

from evalsi.ci.git_facts import GitFacts, checked_facts, detected_facts, read_event
from evalsi.ci.github import CommentError, Posted, PullRequest, marker, upsert_comment
from evalsi.ci.pipeline import Job, Outcome, run_job
from evalsi.ci.suite import Suite

__all__ = [
    "CommentError",
    "GitFacts",
    "Job",
    "Outcome",
    "Posted",
    "PullRequest",
    "Suite",
    "checked_facts",
    "detected_facts",
    "marker",
    "read_event",
    "run_job",
    "upsert_comment",
]
