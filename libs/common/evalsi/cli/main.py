"""The ``evalsi`` command group: every command named by where it lives, imported when it is used."""

from __future__ import annotations

import click

from evalsi.cli.lazy_group import LazyCommand, LazyGroup

# Command -> its module and the short help `evalsi --help` lists without importing it (tests/test_cli_lazy.py
# checks that each matches the command's own help).
COMMANDS = {
    "analyze": LazyCommand(
        "evalsi.cli.analyze_cmd:analyze",
        "Analyses across the records of one or more results: per-slice statistics.",
    ),
    "auth": LazyCommand(
        "evalsi.cli.auth_cmd:auth",
        "Identity and access: API key hashes, decisions explained offline, and a server's keys, roles, bindings, "
        "projects and audit log (docs/auth.md).",
    ),
    "bus": LazyCommand(
        "evalsi.cli.bus_cmd:bus",
        "The bus's NATS users for a nats-server you run yourself (docker compose): one per service (docs/server.md).",
    ),
    "cases": LazyCommand(
        "evalsi.cli.cases_cmd:cases",
        "Agent cases: conversations replayed against an agent, graded deterministically (docs/cases.md).",
    ),
    "catalog": LazyCommand(
        "evalsi.cli.catalog:catalog",
        "List and describe the installed evaluators and packs, with tiers; --server: a project's catalog.",
    ),
    "ci": LazyCommand(
        "evalsi.cli.ci_cmd:ci",
        "Continuous integration: run a suite, enforce its gates, write the reports and comment on the pull request "
        "(docs/ci.md).",
    ),
    "compare": LazyCommand(
        "evalsi.cli.compare_cmd:compare_command",
        "Compare result B with result A, record by record: two saved results (`evalsi eval --output`), or two "
        "runs on a server with --server.",
    ),
    "datasets": LazyCommand(
        "evalsi.cli.datasets_cmd:datasets",
        "Stored datasets on a server: what runs name with spec.dataset.ref (datasets/<name>[@<version>]).",
    ),
    "eval": LazyCommand("evalsi.cli.eval_cmd:eval_command", "Grade records you bring (Score), embedded: no server."),
    "import": LazyCommand(
        "evalsi.cli.import_cmd:import_group",
        "Import another framework's results as a record file (JSONL) for `evalsi eval` and `evalsi compare`.",
    ),
    "login": LazyCommand(
        "evalsi.cli.login_cmd:login_command",
        "Sign in to a server's identity provider and cache the tokens for that server.",
    ),
    "logout": LazyCommand(
        "evalsi.cli.login_cmd:logout_command",
        "Forget the tokens `evalsi login` cached for a server (or every server with --all).",
    ),
    "policies": LazyCommand(
        "evalsi.cli.policies_cmd:policies", "Online policies on a server: apply, list, get, stats, alerts, delete."
    ),
    "power": LazyCommand(
        "evalsi.cli.power_cmd:power_command",
        "How many records a comparison needs to detect a difference of --diff, per metric, for the test `evalsi "
        "compare` uses on it (McNemar's for pass/fail, the paired t for numbers), and the minimum detectable "
        "effect at the size a result already has.",
    ),
    "report": LazyCommand(
        "evalsi.cli.report_cmd:report_command",
        "Write a report of a run: metrics with their intervals, gates, budget use, errors and the records; with "
        "--compare, the paired comparison with the baseline and the records whose outcome flipped.",
    ),
    "run": LazyCommand(
        "evalsi.cli.run_cmd:run_command",
        "Run a target over a dataset and grade it (Run): embedded, or on a server with --server.",
    ),
    "runs": LazyCommand("evalsi.cli.runs_cmd:runs", "Runs on a server: list, get, watch, cancel, resume, results."),
    "sandbox": LazyCommand(
        "evalsi.cli.sandbox_cmd:sandbox",
        "Sandboxes for untrusted code: probe the isolation ladder, run a command on it (docs/sandbox.md).",
    ),
    "serve": LazyCommand(
        "evalsi.cli.serve_cmd:serve_command",
        "Run Evals.si standalone: nats-server with JetStream, the api, the scheduler, the workers (cpu, judge, "
        "harness), evalsi-ingest (OTLP on 4318/4317) and evalsi-policy (online policies).",
    ),
    "whoami": LazyCommand(
        "evalsi.cli.whoami_cmd:whoami_command",
        "Who the server says you are: the principal your credential proves, its roles in each project and the "
        "projects it can read (AuthService.WhoAmI).",
    ),
    "traces": LazyCommand(
        "evalsi.cli.traces_cmd:traces",
        "Traces received by evalsi-ingest: list, get, and late feedback (the server needs --traces-url).",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "EVALSI"},
)
@click.version_option(package_name="evalsi")
def cli() -> None:
    """Evals.si: evaluate LLM apps, RAG systems and agents, with confidence intervals.

    Exit codes: 0 ok, 1 internal error, 2 usage or bad input, 3 a gate failed or a regression was found.
    """


def main() -> None:
    cli()
