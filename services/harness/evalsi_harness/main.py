"""``evalsi-harness``: run the built-in reference agent on tasks, or replay its cassettes (docs/harness.md)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalsi.cli._common import EXIT_INTERNAL, EXIT_OK, handle_errors
from evalsi.errors import BadInputError
from evalsi.harness import (
    Harness,
    HarnessConfig,
    Task,
    TrialResult,
    cassette_name,
    load_config,
    load_tasks,
    read_cassette,
    replay,
)
from evalsi.harness.environment import Environment, environment_from_mapping
from evalsi.harness.environment_run import trial_in_environment
from evalsi.harness.environment_snapshots import SharedSetups
from evalsi.harness.record import record_row
from evalsi.sandbox.access import LadderOpener
from evalsi.yaml_files import read_yaml_file

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

EPILOG = """\b
Exit codes: 0 every trial ran (whatever it scored; budget exhaustion included), 1 a trial hit an
infrastructure error (the provider failed after retries, a tool server went away) or a bug,
2 bad input (config, tasks, flags, or a cassette the replay does not match).
"""


@click.group(epilog=EPILOG)
def cli() -> None:
    """The built-in reference agent: a tool-calling loop over an OpenAI-compatible or Anthropic model,
    with Python and MCP tools, budgets, mocks and seeded faults. Every trial is recorded to a cassette
    that `replay` re-runs with no model or tool call; every step is an OpenTelemetry span.

    Records (one JSON line per trial, the row format `evalsi eval` reads) go to --output or stdout; a
    line per trial (stop reason, calls, tokens) goes to stderr.
    """


@cli.command("run", epilog=EPILOG)
@click.option("--config", "-c", "config_path", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The harness config YAML (model, tools, budget, mocks, faults; docs/harness.md).")
@click.option("--task", "task_text", metavar="TEXT", help="One task: the user's message.")
@click.option("--tasks", "tasks_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="A JSONL file of tasks: {id, input, reference, metadata} per line.")
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1), help="Trials per task.")
@click.option("--run-id", metavar="ID", help="Tags every span and record (default: a fresh harness-<hex>).")
@click.option("--seed", type=click.IntRange(min=0), help="Overrides the config's seed (which calls get faults).")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(min=1),
              help="Trials run at once.")
@click.option("--cassettes", "cassettes_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Record each trial to DIR/<task>.trial-<n>.jsonl.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the records here (JSONL) instead of stdout.")
@click.option("--otlp-endpoint", metavar="URL",
              help="Export the spans over OTLP/HTTP to URL (e.g. http://127.0.0.1:4318, evalsi-ingest).")
@click.option("--environment", "environment_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="A harness environment (YAML: files, setup, check, sandbox; docs/environments.md) every task "
                   "runs in, in its own sandbox, with the shell and file tools; a task's metadata.environment "
                   "replaces it.")
@handle_errors
def run_command(config_path: str, task_text: str | None, tasks_path: str | None, trials: int, run_id: str | None,
                seed: int | None, concurrency: int, cassettes_dir: str | None, output: str | None,
                otlp_endpoint: str | None, environment_path: str | None) -> None:
    """Run the agent on --task or on every task of --tasks, --trials times each."""
    if bool(task_text) == bool(tasks_path):
        raise BadInputError("give exactly one of --task TEXT and --tasks FILE")
    config = load_config(config_path)
    if seed is not None:
        config = dataclasses.replace(config, seed=seed)
    tasks = load_tasks(tasks_path) if tasks_path else [Task(id="task", input=task_text)]
    environments = _environments(tasks, environment_path)
    run = run_id or f"harness-{uuid.uuid4().hex[:12]}"
    with _tracer(otlp_endpoint) as tracer:
        results = asyncio.run(_run(config, tasks, trials, run, concurrency, cassettes_dir, tracer, environments))
    sys.exit(_report(results, output))


@cli.command("replay", epilog=EPILOG)
@click.option("--config", "-c", "config_path", required=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="The harness config the cassettes were recorded with.")
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--run-id", metavar="ID", help="Tags spans and records (default: the recorded run id).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the records here (JSONL) instead of stdout.")
@click.option("--otlp-endpoint", metavar="URL", help="Export the replayed spans over OTLP/HTTP to URL.")
@handle_errors
def replay_command(config_path: str, cassettes: Sequence[str], run_id: str | None, output: str | None,
                   otlp_endpoint: str | None) -> None:
    """Rebuild the records of recorded trials from their CASSETTES (files, or directories of *.jsonl) with no
    model or tool call, to re-score them with other evaluators. A request the recording lacks is exit 2."""
    config = load_config(config_path)
    paths = _cassette_paths(cassettes)
    with _tracer(otlp_endpoint) as tracer:
        results = asyncio.run(_replay(config, paths, run_id, tracer))
    sys.exit(_report(results, output))


def _environments(tasks: Sequence[Task], path: str | None) -> dict[str, Environment]:
    """Each task's environment (its metadata.environment, else --environment's), validated before anything runs."""
    default = environment_from_mapping(read_yaml_file(path), path) if path else None
    out = {}
    for task in tasks:
        own = task.metadata.get("environment")
        environment = environment_from_mapping(own, f"task {task.id!r}: metadata.environment") if own is not None \
            else default
        if environment is not None:
            out[task.id] = environment
    return out


async def _run(config: HarnessConfig, tasks: Sequence[Task], trials: int, run_id: str, concurrency: int,
               cassettes_dir: str | None, tracer: Tracer | None,
               environments: Mapping[str, Environment]) -> list[TrialResult]:
    limit = asyncio.Semaphore(concurrency)
    # ./evalsi.yaml's sandbox section, as `evalsi sandbox`; a task's trials share one setup (a snapshot restored).
    opener = SharedSetups(LadderOpener()) if environments else None
    async with Harness.open(config, tracer=tracer, sandbox_tools=bool(environments)) as harness:

        async def one(task: Task, trial: int) -> TrialResult:
            async with limit:
                environment = environments.get(task.id)
                if environment is not None and opener is not None:
                    result = await trial_in_environment(harness, task, environment, opener, "default", trial=trial,
                                                        run_id=run_id)
                else:
                    result = await harness.run(task, trial=trial, run_id=run_id)
            if cassettes_dir and result.cassette is not None:
                result.cassette.write(Path(cassettes_dir) / cassette_name(task.id, trial))
            _progress(result)
            return result

        return list(await asyncio.gather(*(one(task, k) for task in tasks for k in range(1, trials + 1))))


async def _replay(config: HarnessConfig, paths: Sequence[Path], run_id: str | None,
                  tracer: Tracer | None) -> list[TrialResult]:
    results = []
    for path in paths:
        result = await replay(read_cassette(path), config, tracer=tracer, run_id=run_id)
        _progress(result)
        results.append(result)
    return results


def _cassette_paths(items: Sequence[str]) -> list[Path]:
    paths: list[Path] = []
    for item in items:
        path = Path(item)
        found = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        if not found:
            raise BadInputError(f"{item}: no cassettes (*.jsonl) in this directory")
        paths += found
    return paths


def _progress(result: TrialResult) -> None:
    meta = result.record.metadata
    usage = result.record.usage
    line = (f"{result.record.id} trial {result.record.provenance.trial}: {result.stop_reason}, "
            f"{int(meta['harness.model_calls'].number_value)} model call(s), "
            f"{int(meta['harness.tool_calls'].number_value)} tool call(s), {usage.total_tokens} tokens")
    if usage.cost_usd:
        line += f", ${usage.cost_usd:.4f}"
    if result.error:
        line += f"; infrastructure error: {result.error}"
    click.echo(line, err=True)


def _report(results: Sequence[TrialResult], output: str | None) -> int:
    lines = [json.dumps(record_row(r.record), ensure_ascii=False) for r in results]
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        click.echo(f"records: {output}", err=True)
    else:
        sys.stdout.write("".join(line + "\n" for line in lines))
    return EXIT_INTERNAL if any(r.infra_error for r in results) else EXIT_OK


@contextmanager
def _tracer(endpoint: str | None) -> Iterator[Tracer | None]:
    """An OTLP/HTTP-exporting tracer for --otlp-endpoint, flushed on exit; None without one."""
    if not endpoint:
        yield None
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise BadInputError("--otlp-endpoint needs the OpenTelemetry SDK: pip install opentelemetry-sdk "
                            "opentelemetry-exporter-otlp-proto-http") from None
    provider = TracerProvider(resource=Resource.create({"service.name": "evalsi-harness"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    try:
        yield provider.get_tracer("evalsi.harness")
    finally:
        provider.shutdown()


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="evalsi-harness")


if __name__ == "__main__":
    main()
