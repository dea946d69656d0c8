"""The commit's facts from GitHub Actions' and GitLab CI's variables, and flags checked before anything runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from evalsi.ci.git_facts import GitFacts, checked_facts, detected_facts, read_event
from evalsi.errors import BadInputError

HEAD = "a" * 40
MERGE = "b" * 40


def test_a_github_pull_request_is_its_head_commit_branch_base_and_number(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"number": 42, "pull_request": {"number": 42, "head": {"sha": HEAD, "ref": "fix"},
                                                                "base": {"ref": "main"}}}))
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_SHA": MERGE,
           "GITHUB_REF": "refs/pull/42/merge", "GITHUB_REF_NAME": "42/merge", "GITHUB_HEAD_REF": "fix",
           "GITHUB_BASE_REF": "main", "GITHUB_REPOSITORY": "acme/app", "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_RUN_ID": "987"}
    facts = detected_facts(env, read_event(str(event)))
    # The head the author pushed, not the merge commit GitHub made for the check.
    assert facts == GitFacts(sha=HEAD, branch="fix", base_branch="main", pr="42", repository="acme/app",
                             run_url="https://github.com/acme/app/actions/runs/987")
    assert facts.labels() == {"git.sha": HEAD, "git.branch": "fix", "git.pr": "42"}


def test_a_github_pull_request_without_its_event_file_takes_the_number_from_the_ref() -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": MERGE, "GITHUB_REF": "refs/pull/7/merge",
           "GITHUB_HEAD_REF": "feature", "GITHUB_BASE_REF": "develop"}
    facts = detected_facts(env, read_event("/nonexistent/event.json"))
    assert (facts.sha, facts.branch, facts.base_branch, facts.pr) == (MERGE, "feature", "develop", "7")


def test_a_github_push_has_a_branch_and_no_base() -> None:
    env = {"GITHUB_ACTIONS": "true", "GITHUB_SHA": HEAD, "GITHUB_REF": "refs/heads/main", "GITHUB_REF_NAME": "main"}
    facts = detected_facts(env, {})
    assert facts.labels() == {"git.sha": HEAD, "git.branch": "main"}
    assert facts.base_branch == "" and facts.pr == ""


def test_gitlab_merge_requests_map_like_pull_requests() -> None:
    env = {"GITLAB_CI": "true", "CI_COMMIT_SHA": HEAD, "CI_COMMIT_REF_NAME": "fix",
           "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "fix", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
           "CI_MERGE_REQUEST_IID": "12", "CI_PIPELINE_URL": "https://gitlab.example/acme/app/-/pipelines/5"}
    facts = detected_facts(env, {})
    assert facts == GitFacts(sha=HEAD, branch="fix", base_branch="main", pr="12",
                             run_url="https://gitlab.example/acme/app/-/pipelines/5")


def test_elsewhere_nothing_is_guessed() -> None:
    assert detected_facts({"GITHUB_SHA": HEAD, "CI_COMMIT_SHA": HEAD}, {}) == GitFacts()


@pytest.mark.parametrize(
    ("change", "flag"),
    [({"sha": "not-a-sha"}, "--sha"), ({"branch": "a\nb"}, "--branch"), ({"base_branch": "x" * 256}, "--base-branch"),
     ({"pr": "12a"}, "--pr"), ({"pr": "0"}, "--pr"), ({"repository": "acme/app/extra"}, "--repository")],
)
def test_a_bad_value_is_refused_naming_its_flag(change: dict[str, str], flag: str) -> None:
    with pytest.raises(BadInputError, match=f"^{flag} "):
        checked_facts(replace(GitFacts(), **change))


def test_a_good_value_passes() -> None:
    facts = GitFacts(sha=HEAD[:7], branch="release/1.2", base_branch="main", pr="3", repository="acme/app.js")
    assert checked_facts(facts) is facts


def test_an_event_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text("{not json")
    with pytest.raises(BadInputError, match=r"GITHUB_EVENT_PATH .*not a readable JSON event"):
        read_event(str(event))
