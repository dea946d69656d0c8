"""What a CI job knows about the commit it evaluates: its SHA, branch, pull request and base branch, read from the
CI system's variables (GitHub Actions, GitLab CI) or given as flags, and the run labels made of them (pure, but for
reading GitHub's event file)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError

# A webhook payload is at most 25 MiB (GitHub's limit); the event file holds one.
MAX_EVENT_BYTES = 25 * 1024 * 1024
# git refuses longer ref names on most file systems; a label value is bounded by MAX_LABEL_VALUE_CHARS anyway.
MAX_BRANCH_CHARS = 255
_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")
_REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_PULL_REF = re.compile(r"^refs/pull/(\d+)/(?:merge|head)$")

SHA_LABEL = "git.sha"
BRANCH_LABEL = "git.branch"
PR_LABEL = "git.pr"


@dataclass(frozen=True)
class GitFacts:
    """The commit under evaluation. ``base_branch`` is the branch a pull request merges into (the baseline's
    branch), empty outside a pull request; ``pr`` the pull (or merge) request's number, empty outside one."""

    sha: str = ""
    branch: str = ""
    base_branch: str = ""
    pr: str = ""
    repository: str = ""  # owner/name on GitHub, where the comment goes
    run_url: str = ""  # the CI job's page, linked from the summary

    def labels(self) -> dict[str, str]:
        """The run's labels: ``git.sha``, ``git.branch`` and ``git.pr``, those that are known."""
        pairs = ((SHA_LABEL, self.sha), (BRANCH_LABEL, self.branch), (PR_LABEL, self.pr))
        return {key: value for key, value in pairs if value}


def read_event(path: str) -> dict[str, Any]:
    """GitHub's event payload (``$GITHUB_EVENT_PATH``); an empty mapping when there is none to read."""
    if not path:
        return {}
    source = Path(path)
    try:
        size = source.stat().st_size
        if size > MAX_EVENT_BYTES:
            raise BadInputError(f"GITHUB_EVENT_PATH {path}: {size} bytes exceed the limit of {MAX_EVENT_BYTES}")
        document = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"GITHUB_EVENT_PATH {path}: not a readable JSON event ({exc})") from None
    return document if isinstance(document, dict) else {}


def _pull_request(event: Mapping[str, Any]) -> Mapping[str, Any]:
    pull = event.get("pull_request")
    return pull if isinstance(pull, Mapping) else {}


def _nested(mapping: Mapping[str, Any], *keys: str) -> str:
    value: Any = mapping
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""


def _github(env: Mapping[str, str], event: Mapping[str, Any]) -> GitFacts:
    pull = _pull_request(event)
    pr = _nested(pull, "number") or _nested(event, "number")
    if not pr:
        match = _PULL_REF.match(env.get("GITHUB_REF", ""))
        pr = match.group(1) if match else ""
    run_id, server, repository = env.get("GITHUB_RUN_ID", ""), env.get("GITHUB_SERVER_URL", ""), env.get(
        "GITHUB_REPOSITORY", "")
    return GitFacts(
        # On a pull_request event GITHUB_SHA is a merge commit GitHub made; the head is what the author pushed.
        sha=_nested(pull, "head", "sha") or env.get("GITHUB_SHA", ""),
        branch=env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME", ""),
        base_branch=env.get("GITHUB_BASE_REF") or _nested(pull, "base", "ref"),
        pr=pr,
        repository=repository,
        run_url=f"{server}/{repository}/actions/runs/{run_id}" if server and repository and run_id else "",
    )


def _gitlab(env: Mapping[str, str]) -> GitFacts:
    return GitFacts(
        sha=env.get("CI_COMMIT_SHA", ""),
        branch=env.get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME") or env.get("CI_COMMIT_REF_NAME", ""),
        base_branch=env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", ""),
        pr=env.get("CI_MERGE_REQUEST_IID", ""),
        run_url=env.get("CI_PIPELINE_URL", ""),
    )


def detected_facts(env: Mapping[str, str], event: Mapping[str, Any]) -> GitFacts:
    """The facts the CI system's variables give: GitHub Actions (``GITHUB_ACTIONS``), GitLab CI (``GITLAB_CI``),
    none elsewhere (flags give them there)."""
    if env.get("GITHUB_ACTIONS") == "true":
        return _github(env, event)
    if env.get("GITLAB_CI") == "true":
        return _gitlab(env)
    return GitFacts()


def checked_facts(facts: GitFacts) -> GitFacts:
    """``facts`` refused when a value is not what it claims to be, naming the flag that sets it."""
    if facts.sha and not _SHA.match(facts.sha):
        raise BadInputError(f"--sha {facts.sha[:80]!r}: expected a commit SHA (7 to 64 hex digits)")
    for flag, value in (("--branch", facts.branch), ("--base-branch", facts.base_branch)):
        if len(value) > MAX_BRANCH_CHARS or any(ord(c) < 32 or c == "\x7f" for c in value):
            raise BadInputError(f"{flag} {value[:80]!r}: expected a branch name of at most {MAX_BRANCH_CHARS} "
                                "characters without control characters")
    if facts.pr and not (facts.pr.isdigit() and 0 < int(facts.pr) < 2**31):
        raise BadInputError(f"--pr {facts.pr[:80]!r}: expected a pull request number (a positive integer)")
    if facts.repository and not _REPOSITORY.match(facts.repository):
        raise BadInputError(f"--repository {facts.repository[:120]!r}: expected OWNER/NAME as GitHub spells it")
    return facts
