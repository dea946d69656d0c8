"""``evalsi ci run``: what a CI job runs (the GitHub Action's entry point, the ci container's entrypoint)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from evalsi.ci.git_facts import checked_facts, detected_facts, read_event
from evalsi.ci.github import DEFAULT_API, PullRequest
from evalsi.ci.pipeline import Job, Outcome, run_job
from evalsi.ci.suite import Suite, spec_project
from evalsi.cli._common import (
    EXIT_GATE_FAILED,
    check_project_flag,
    client_for,
    credential_options,
    handle_errors,
    looking_in,
    parse_params,
    split_list,
    warn_on_stderr,
)
from evalsi.cli.runs_cmd import exit_code_of
from evalsi.errors import BadInputError


@click.group("ci")
def ci() -> None:
    """Continuous integration: run a suite, enforce its gates, write the reports and comment on the pull request
    (docs/ci.md)."""


@ci.command("run")
@click.option("--spec", "-f", metavar="FILE", help="An EvalRun spec to run (embedded, or on --server).")
@click.option("--data", metavar="FILE", help="Records to grade embedded, as `evalsi eval --data` (with --evaluators).")
@click.option("--evaluators", "-e", metavar="A,B,...", help="With --data: comma-separated evaluator names.")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=SOURCE", help="With --data: map a record field.")
@click.option("--param", "params", multiple=True, metavar="EVALUATOR.PARAM=VALUE", help="With --data: a param.")
@click.option(
    "--gate",
    "gates",
    multiple=True,
    metavar="CEL",
    help="A gate, repeatable: \"metric('exact-match').mean >= 0.8\". Added to a spec's own gates; with --data the "
    "only gates.",
)
@click.option("--name", default="", help="The suite's name (default: the spec's metadata.name, or --data's stem); "
              "it also tells this suite's comment and baseline runs from another suite's.")
@click.option("--server", metavar="URL", envvar="EVALSI_SERVER",
              help="An Evals.si server to run --spec on: http://host:8080 or grpc://host:8081, https:// or grpcs:// "
              "with TLS (default $EVALSI_SERVER). Without one the suite runs embedded, here.")
@click.option("--project", default=None, metavar="NAME", envvar="EVALSI_PROJECT", callback=check_project_flag,
              help="With --server: the project of the run and of its baseline (default: the spec's own, else "
              "'default').")
@credential_options
@click.option(
    "--baseline",
    default="",
    metavar="FILE|RUN_ID",
    help="What to compare with: a saved result (the base branch's results.json artifact; a missing file is a "
    "warning, not an error), or with --server a run id. Default with --server: the newest succeeded run of the "
    "same name labelled git.branch=<base branch>.",
)
@click.option("--output-dir", "-o", default="evalsi-ci", show_default=True, type=click.Path(file_okay=False),
              help="Where results.json, report.html and summary.md (and baseline.json from a server) are written.")
@click.option("--title", default="", help="The report's title.")
@click.option("--sha", default=None, help="The commit evaluated (default: from GitHub Actions or GitLab CI).")
@click.option("--branch", default=None, help="Its branch (default: from GitHub Actions or GitLab CI).")
@click.option("--base-branch", default=None, help="The branch it merges into: the baseline's (default: the pull "
              "request's base from GitHub Actions or GitLab CI).")
@click.option("--pr", default=None, help="The pull request's number (default: from GitHub Actions or GitLab CI).")
@click.option("--repository", default=None, metavar="OWNER/NAME", help="The GitHub repository to comment on "
              "(default $GITHUB_REPOSITORY).")
@click.option(
    "--comment/--no-comment",
    default=None,
    help="Post or update the summary comment on the pull request (default: when $GITHUB_TOKEN, the repository "
    "and the pull request number are all known). The token is read from $GITHUB_TOKEN only, never a flag.",
)
@click.option("--github-api", default=DEFAULT_API, envvar="GITHUB_API_URL", show_default=True, metavar="URL",
              help="GitHub's REST API (default $GITHUB_API_URL, which GitHub Enterprise runners set).")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 3 also when a metric got significantly worse than the baseline (as `evalsi compare`).")
@click.option("--allow-errors", is_flag=True,
              help="Exit 0 even when a metric's every evaluation is an infrastructure error (else exit 1).")
@handle_errors
def ci_run_command(
    spec: str | None, data: str | None, evaluators: str | None, mapping: tuple[str, ...], params: tuple[str, ...],
    gates: tuple[str, ...], name: str, server: str | None, project: str | None, baseline: str, output_dir: str,
    title: str, sha: str | None, branch: str | None, base_branch: str | None, pr: str | None,
    repository: str | None, comment: bool | None, github_api: str, fail_on_regression: bool, allow_errors: bool,
) -> None:
    """Run a suite for a CI job: enforce its gates, write the reports, post the summary on the pull request.

    \b
    1. runs --spec (embedded, or on --server) or --data with --evaluators (embedded), labelled with the commit's
       git.sha, git.branch and git.pr;
    2. saves the result as OUTPUT_DIR/results.json (keep it as an artifact: it is the next run's baseline);
    3. finds the baseline (--baseline, or the base branch's newest run on the server) and compares;
    4. writes OUTPUT_DIR/report.html (self-contained) and OUTPUT_DIR/summary.md (`evalsi report`; the comment
       as posted);
    5. appends the summary to $GITHUB_STEP_SUMMARY when it is set;
    6. posts or updates one comment on the pull request (a failure to post is a warning, never the exit code).

    \b
    Examples:
      evalsi ci run --data qa.jsonl -e exact-match --gate "metric('exact-match').mean >= 0.8"
      evalsi ci run --spec run.yaml --baseline base/results.json
      evalsi ci run --spec run.yaml --server https://evals.example.com --project agent-ci

    Exit codes, as `evalsi run`'s: 0 every gate passed, 3 a gate failed or the budget ran out (or, with
    --fail-on-regression, a metric got worse than the baseline), 2 bad input or usage, 1 the run failed, a metric
    measured nothing (every evaluation an infrastructure error; --allow-errors accepts it) or an internal error.
    """
    suite = Suite(spec=spec or "", data=data or "", evaluators=tuple(split_list(evaluators or "")),
                  gates=gates, params=parse_params(params), mapping=mapping, name=name)
    env = os.environ
    detected = detected_facts(env, read_event(env.get("GITHUB_EVENT_PATH", "")))
    given = {"sha": sha, "branch": branch, "base_branch": base_branch, "pr": pr, "repository": repository}
    facts = checked_facts(replace(detected, **{key: value for key, value in given.items() if value is not None}))
    job = Job(suite=suite, facts=facts, output_dir=Path(output_dir), baseline=baseline, title=title,
              pull=_pull_request(comment, facts.repository, facts.pr, github_api),
              step_summary=env.get("GITHUB_STEP_SUMMARY", ""))
    if server:
        if not project and suite.spec:  # one project for the run and the search for its baseline
            project = spec_project(suite)
        with client_for(server, project) as client, looking_in():
            outcome = run_job(job, client=client, warn=warn_on_stderr)
    else:
        if project:
            raise BadInputError("--project goes with --server; an embedded spec names its own metadata.project")
        outcome = run_job(job, client=None, warn=warn_on_stderr)
    sys.exit(_report(outcome, fail_on_regression=fail_on_regression, allow_errors=allow_errors))


def _pull_request(comment: bool | None, repository: str, number: str, api: str) -> PullRequest | None:
    token = os.environ.get("GITHUB_TOKEN", "")
    missing = [what for what, value in (("$GITHUB_TOKEN", token), ("the repository (--repository or "
               "$GITHUB_REPOSITORY)", repository), ("the pull request (--pr)", number)) if not value]
    if comment is False or (comment is None and missing):
        return None
    if missing:
        raise BadInputError(f"--comment needs {', '.join(missing)}")
    return PullRequest(repository=repository, number=number, token=token, api=api)


def _report(outcome: Outcome, *, fail_on_regression: bool, allow_errors: bool) -> int:
    """The table and gates on stdout, where everything went on stderr; the exit code."""
    run = outcome.results.run
    click.echo(outcome.results.table())
    if run.gates:
        click.echo("gates:")
        for gate in run.gates:
            why = f"  ({gate.message})" if gate.message else ""
            click.echo(f"  {'✓' if gate.passed else '✗'} {gate.expression}{why}")
    for path in (outcome.results_file, outcome.report_file, outcome.summary_file):
        click.echo(f"wrote {path}", err=True)
    if outcome.posted is not None:
        click.echo(f"{outcome.posted.action} comment {outcome.posted.url or outcome.posted.comment_id}", err=True)
    worse = [m.metric for m in outcome.comparison.metrics if m.verdict == "worse"] if outcome.comparison else []
    if worse:
        click.echo(f"regression against {outcome.baseline.source}: {', '.join(worse)} got worse", err=True)
    code = exit_code_of(run, allow_errors=allow_errors)
    failed = [g.expression for g in run.gates if not g.passed]
    if failed:
        click.echo(f"{len(failed)} of {len(run.gates)} gates failed: " + "; ".join(failed), err=True)
    if code == 0 and worse and fail_on_regression:
        code = EXIT_GATE_FAILED
    return code
