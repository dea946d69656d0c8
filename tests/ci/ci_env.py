"""The environment of an ``evalsi ci run`` under test: every CI variable of the machine running the tests cleared
(these tests may themselves run in GitHub Actions or GitLab CI), then the job's own."""

from __future__ import annotations

import json
from pathlib import Path

CI_VARIABLES = (
    "GITHUB_ACTIONS", "GITHUB_SHA", "GITHUB_REF", "GITHUB_REF_NAME", "GITHUB_HEAD_REF", "GITHUB_BASE_REF",
    "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_SERVER_URL", "GITHUB_RUN_ID",
    "GITHUB_API_URL", "GITHUB_TOKEN", "GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITLAB_CI", "CI_COMMIT_SHA",
    "CI_COMMIT_REF_NAME", "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME",
    "CI_MERGE_REQUEST_IID", "CI_PIPELINE_URL", "EVALSI_SERVER", "EVALSI_PROJECT", "EVALSI_TOKEN", "EVALSI_API_KEY",
)
HEAD_SHA = "0123456789abcdef0123456789abcdef01234567"


def clean_env(**values: str) -> dict[str, str | None]:
    """For CliRunner.invoke(env=...): None unsets a variable."""
    env: dict[str, str | None] = dict.fromkeys(CI_VARIABLES)
    env.update(values)
    return env


def pull_request_env(tmp: Path, *, number: int = 5, api: str = "", token: str = "",
                     head: str = "fix", base: str = "main") -> dict[str, str]:
    """What GitHub Actions sets for a pull_request job, with its event file."""
    event = tmp / "event.json"
    event.write_text(json.dumps({"number": number, "pull_request": {
        "number": number, "head": {"sha": HEAD_SHA, "ref": head}, "base": {"ref": base}}}))
    env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event),
           "GITHUB_SHA": "f" * 40, "GITHUB_REF": f"refs/pull/{number}/merge", "GITHUB_HEAD_REF": head,
           "GITHUB_BASE_REF": base, "GITHUB_REPOSITORY": "acme/app", "GITHUB_SERVER_URL": "https://github.com",
           "GITHUB_RUN_ID": "4242", "GITHUB_STEP_SUMMARY": str(tmp / "step_summary.md")}
    if api:
        env["GITHUB_API_URL"] = api
    if token:
        env["GITHUB_TOKEN"] = token
    return env
