"""``evalsi eval``: grade outputs you bring, embedded, and print the metric table."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    handle_errors,
    parse_key_values,
    parse_params,
    split_list,
    warn_on_stderr,
)
from evalsi.cli._memory import memory_options
from evalsi.cli._plugins import plugins_dir_option, registry_with_plugins
from evalsi.errors import BadInputError
from evalsi.stats.defaults import DEFAULT_CONFIDENCE

# --judge-<flag> to the judge config key it sets.
_JUDGE_FLAGS = {
    "judge_provider": "provider",
    "judge_base_url": "base_url",
    "judge_api_key_env": "api_key_env",
    "judge_rpm": "rpm",
    "judge_tpm": "tpm",
    "judge_timeout": "timeout_s",
    "judge_template": "template",
}


def _judge(model: str | None, flags: dict[str, Any], params: tuple[str, ...]) -> dict[str, Any] | None:
    """The default judge from the --judge-* flags, or None when no judge model is given."""
    given = {_JUDGE_FLAGS[name]: value for name, value in flags.items() if value is not None}
    if model is None:
        if given or params:
            raise BadInputError("--judge-model is required when any other --judge-* flag is given")
        return None
    judge: dict[str, Any] = {"model": model, **given}
    if params:
        judge["params"] = parse_key_values(params, "--judge-param")
    return judge


@click.command("eval")
@click.option(
    "--data",
    "data",
    required=True,
    metavar="FILE",
    help="Records to grade: .jsonl, .json, .csv, .parquet, or hf://owner/name.",
)
@click.option(
    "--evaluators",
    "-e",
    required=True,
    metavar="A,B,...",
    help="Comma-separated evaluator names (exact-match, builtin/llm-judge@1.0.0, ...).",
)
@click.option(
    "--map",
    "mapping",
    multiple=True,
    metavar="FIELD=SOURCE",
    help="Map a record field to a source field: --map input=question --map reference=answer.text.",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="EVALUATOR.PARAM=VALUE",
    help="An evaluator param; VALUE is JSON when it parses: --param exact-match.normalize=false.",
)
@click.option("--limit", type=click.IntRange(min=1), help="Evaluate only the first N records.")
@click.option(
    "--judge-provider",
    type=click.Choice(["openai", "openai-compatible", "anthropic"]),
    help="Judge connector (default openai, which also speaks to any OpenAI-compatible server).",
)
@click.option("--judge-model", help="Judge model id; enables model-graded evaluators.")
@click.option("--judge-base-url", help="Judge endpoint, e.g. http://127.0.0.1:8000/v1 for a local server.")
@click.option("--judge-api-key-env", help="Environment variable holding the judge's API key.")
@click.option(
    "--judge-param",
    "judge_params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Judge sampling parameter (temperature=0, max_tokens=512, seed=1).",
)
@click.option("--judge-rpm", type=click.IntRange(min=1), help="Judge requests per minute limit.")
@click.option("--judge-tpm", type=click.IntRange(min=1), help="Judge tokens per minute limit.")
@click.option(
    "--judge-template",
    metavar="NAME@VERSION",
    help="Prompt template for the judge (llm-judge@1, reference-correctness@1, pairwise@1, ...).",
)
@click.option("--judge-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds per judge request.")
@click.option("--no-cache", is_flag=True, help="Bypass the judge cache (always call the provider).")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False),
    help="Judge cache directory (default $EVALSI_CACHE_DIR/judge or ~/.cache/evalsi/judge).",
)
@click.option(
    "--compare-to",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A second record set for comparative evaluators (pairwise-preference), paired by id.",
)
@click.option(
    "--concurrency",
    default=16,
    show_default=True,
    type=click.IntRange(min=1),
    help="Concurrent evaluator calls (judges).",
)
@click.option(
    "--confidence",
    default=DEFAULT_CONFIDENCE,
    show_default=True,
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Confidence level of the intervals.",
)
@click.option(
    "--interval",
    type=click.Choice(["auto", "bootstrap"]),
    default="auto",
    show_default=True,
    help="auto: Wilson for pass/fail, Student-t for numbers, cluster-robust with clusters or trials.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for the bootstrap.")
@click.option("--cluster-by", metavar="KEY", help="Metadata key whose records share a cluster (cluster-robust CIs).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "md"]),
    default="table",
    show_default=True,
    help="What to print on stdout.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Save the full result document (JSON) here.")
@click.option("--name", default="", help="A name for this evaluation, shown in the table and saved results.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress on stderr (default: when stderr is a terminal); forced on elsewhere, a plain line every 5 s.",
)
@click.option(
    "--allow-errors",
    "allow_errors",
    is_flag=True,
    help="Exit 0 even when a metric's every evaluation is an infrastructure error (else exit 1).",
)
@plugins_dir_option("-e may name")
@memory_options
@handle_errors
def eval_command(
    data: str,
    evaluators: str,
    mapping: tuple[str, ...],
    params: tuple[str, ...],
    limit: int | None,
    judge_model: str | None,
    judge_params: tuple[str, ...],
    no_cache: bool,
    cache_dir: str | None,
    compare_to: str | None,
    concurrency: int,
    confidence: float,
    interval: str,
    seed: int,
    cluster_by: str | None,
    fmt: str,
    output: str | None,
    name: str,
    progress: bool | None,
    allow_errors: bool,
    memory_budget: float | None,
    store_dir: str | None,
    plugins_dir: str | None,
    **judge_flags: Any,
) -> None:
    """Grade records you bring (Score), embedded: no server.

    Prints n, mean, the confidence interval, skipped and errors per metric. Only scored records count;
    records missing what an evaluator needs are skipped with the reason, and infrastructure failures
    (a judge provider down after retries) are errors counted apart, never scores.

    \b
    Examples:
      evalsi eval --data examples/quickstart/qa.jsonl --evaluators exact-match,fuzzy-match
      evalsi eval --data qa.csv --map input=question --map reference=answer -e exact-match --format md
      evalsi eval --data qa.jsonl -e llm-judge --judge-model gpt-4o-mini --param llm-judge.rubric=helpfulness

    Ctrl-C stops it as it stops `evalsi run`: calls in flight finish, nothing new starts, finished work is kept
    and printed (a second Ctrl-C aborts). Beyond --memory-budget the results go to a local SQLite store and are
    printed and saved from it a page at a time.

    Under the table, each evaluator's errors by kind (infra, evaluator) with the first cause. An evaluator that
    needs a judge (llm-judge, ...) without --judge-model is refused before anything runs.

    Exit codes: 0 ok, 1 a metric whose every evaluation is an infrastructure error (nothing was measured;
    --allow-errors accepts it) or an internal error, 2 bad input or usage (an unknown --cluster-by key, a judge
    evaluator without --judge-model), 130 interrupted (the figures are partial).
    """
    from evalsi.sdk import evaluate

    judge = _judge(judge_model, judge_flags, judge_params)
    with contextlib.ExitStack() as plugins:
        results = evaluate(
            data,
            split_list(evaluators),
            judge=judge,
            params=parse_params(params),
            mapping=list(mapping) or None,
            limit=limit,
            compare_to=compare_to,
            cluster_by=cluster_by,
            confidence=confidence,
            interval=interval,
            seed=seed,
            concurrency=concurrency,
            cache=not no_cache,
            cache_dir=cache_dir,
            progress=sys.stderr.isatty() if progress is None else progress,
            name=name or Path(data).stem,
            stop_on_interrupt=True,
            memory_budget=memory_budget,
            store_dir=store_dir,
            judge_required=True,
            warn=warn_on_stderr,
            registry=registry_with_plugins(plugins_dir, plugins),
        )
    with results:
        if output:
            saved = results.save(output)
            click.echo(f"saved {len(results)} results to {saved}", err=True)
        if fmt == "json":
            results.write_json(sys.stdout)
        else:
            click.echo(results.table("md" if fmt == "md" else "table"))
    if results.run.progress.cancelled:
        click.echo(
            f"cancelled: {results.run.progress.cancelled} evaluations did not run; the figures are partial", err=True
        )
        sys.exit(EXIT_INTERRUPTED)
    from evalsi.runs.failures import infra_failure

    failure = infra_failure(results.run.summaries)
    if failure and not allow_errors:
        click.echo(f"error: {failure}", err=True)
        sys.exit(EXIT_INTERNAL)
