"""Helpers of the report tests: the ``evalsi`` CLI run in-process as a user's shell would (exit code, stdout,
stderr), a Markdown table read back, and a big synthetic run."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner

from evalsi.cli.main import cli
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    VALUE_KIND_BOOLEAN,
    VALUE_KIND_NUMBER,
    EvaluationResult,
    MetricSummary,
    Score,
)


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


def evalsi(*args: str) -> Done:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return Done(result.exit_code, result.stdout, result.stderr)


def table_rows(markdown: str, first_header: str) -> dict[str, list[str]]:
    """The rows of the table whose first header is ``first_header``: first cell to every cell."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def huge_run(records: int, prefix: str, passing: bool) -> Run:
    run = Run(id=prefix, name=prefix)
    run.summaries.append(MetricSummary(metric="check", evaluator="check", kind=VALUE_KIND_BOOLEAN, n=records,
                                       mean=1.0 if passing else 0.0, higher_is_better=True))
    run.summaries.append(MetricSummary(metric="broken", evaluator="broken", kind=VALUE_KIND_NUMBER, errors=records,
                                       higher_is_better=True))
    reason = "x" * 300
    for i in range(records):
        run.results.append(EvaluationResult(
            record_id=f"record-{i:06d}-{'y' * 40}", evaluator="check", outcome=OUTCOME_SCORED,
            scores=[Score(name="passed", passed=passing, explanation=reason)],
        ))
        run.results.append(EvaluationResult(record_id=f"record-{i:06d}-{'y' * 40}", evaluator="broken",
                                            outcome=OUTCOME_ERROR, reason=reason))
    return run
