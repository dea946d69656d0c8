"""How a run ends and what it records, the same wherever it runs (embedded or served).

One rule for the final state and its message, one manifest, one place for the bootstrap seed: an embedded and a
served run of the same spec end in the same state and describe themselves the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalsi.evaluators import BoundEvaluator
from evalsi.judges.panel import judge_config_from_spec
from evalsi.records import from_value
from evalsi.runs.manifest import DatasetIdentity, build_manifest
from evalsi.targets.identity import target_identity, unpinned_target
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    Run,
    RunManifest,
    RunProgress,
    RunSpec,
    RunState,
)
from evalsi.v1alpha1.score_pb2 import (
    ERROR_KIND_INFRA,
    OUTCOME_CANCELLED,
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    OUTCOME_SKIPPED,
    EvaluationResult,
    SummaryOptions,
)

# Metadata key marking a record whose generation failed (set by a generate task, read by evaluate tasks and
# by the final state's rule).
TARGET_FAILURE_KEY = "evalsi.target_failure"


@dataclass(frozen=True)
class TargetCalls:
    """What the target did: calls attempted (records it was given something to answer) and calls that failed on
    infrastructure (the provider down after its retries), with the first such failure's reason."""

    attempted: int = 0
    failed: int = 0
    first_failure: str = ""

    def __add__(self, other: TargetCalls) -> TargetCalls:
        return TargetCalls(
            self.attempted + other.attempted, self.failed + other.failed, self.first_failure or other.first_failure
        )


def target_calls_of(failures: Iterable[tuple[str, str]], records: int) -> TargetCalls:
    """``records`` given to the target, with the (kind, reason) of each that got no output. A skipped record
    (nothing to prompt with) was never attempted; a cancelled one neither failed nor succeeded."""
    skipped = failed = 0
    first = ""
    for kind, reason in failures:
        if kind == "skipped":
            skipped += 1
        elif kind == "infra":
            failed += 1
            first = first or reason
    return TargetCalls(records - skipped, failed, first)


def target_calls_of_records(records: Sequence[Record]) -> TargetCalls:
    """The target calls behind generated records, read from the failure marker each failed record carries."""

    failures = []
    for record in records:
        if TARGET_FAILURE_KEY in record.metadata:
            marker = from_value(record.metadata[TARGET_FAILURE_KEY])
            failures.append((str(marker.get("kind", "infra")), str(marker.get("reason", "the target failed"))))
    return target_calls_of(failures, len(records))


def final_state(
    *,
    budget_exceeded: str = "",
    cancelled: bool = False,
    generates: bool = False,
    target_calls: TargetCalls | None = None,
    cancelled_evaluations: int = 0,
    failed_tasks: int = 0,
    sandbox_refusal: str = "",
) -> tuple[RunState, str]:
    """The run's final state and message, by the first rule that applies:

    1. a budget was exceeded (``budget_exceeded`` names it): BUDGET_EXCEEDED;
    2. it was cancelled: CANCELLED;
    3. no sandbox rung met ``spec.sandbox.minIsolation`` for its code (``sandbox_refusal`` says so): FAILED, fail
       closed: that code never ran below the isolation asked for, and the run's code scores measure nothing;
    4. it generates outputs and every target call it attempted failed: FAILED (its scores would measure nothing);
    5. otherwise SUCCEEDED, saying how many tasks failed after retries (their evaluations are infra errors).
    """
    if budget_exceeded:
        return RUN_STATE_BUDGET_EXCEEDED, f"{budget_exceeded}; {cancelled_evaluations} evaluations were cancelled"
    if cancelled:
        return (
            RUN_STATE_CANCELLED,
            f"cancelled; {cancelled_evaluations} evaluations did not run, the figures are partial",
        )
    if sandbox_refusal:
        return RUN_STATE_FAILED, sandbox_refusal
    calls = target_calls or TargetCalls()
    if generates and calls.attempted and calls.failed == calls.attempted:
        return RUN_STATE_FAILED, f"every target call failed ({calls.failed}); the first: {calls.first_failure}"
    if failed_tasks:
        return RUN_STATE_SUCCEEDED, f"{failed_tasks} task(s) failed after retries (their evaluations are infra errors)"
    return RUN_STATE_SUCCEEDED, ""


def bootstrap_seed(options: SummaryOptions) -> int:
    """The seed of every bootstrap of a run: summaries and dataset-scope metrics alike (``spec.summary.seed``;
    ``spec.seed`` is the target's)."""
    return options.seed


def run_manifest(
    spec: RunSpec,
    bound: Sequence[BoundEvaluator],
    dataset: DatasetIdentity,
    judges: Mapping[str, Any],
) -> RunManifest:
    """What a run ran: spec hash, dataset and version, evaluators, judges (a served judge by its connection),
    target, ``seed`` (``spec.seed``, the target's), package versions and what could not be pinned."""

    manifest = build_manifest(dataset, spec, bound, judges)
    manifest.seed = spec.seed
    for name, judge in spec.judges.items():
        if judge.connection:
            # A served judge is the server's connection, not the provider default its bare spec would imply.
            identity = f"connection:{judge.connection}:{judge.model or '(its default model)'}"
            manifest.judges[name] = identity
            unpinned = [note for note in manifest.unpinned if not note.startswith(f"judge {name}:")]
            unpinned.append(f"judge {name}: {identity} is served by an API and cannot be pinned")
            del manifest.unpinned[:]
            manifest.unpinned.extend(unpinned)
    manifest.target = target_identity(spec.target, spec.harness)
    target_note = unpinned_target(spec)
    if target_note:
        manifest.unpinned.append(target_note)
    return manifest


def stored_run_manifest(run: Run, bound: Sequence[BoundEvaluator]) -> RunManifest:
    """The manifest of a stored run (a served or in-process one), its dataset as recorded when it was stored."""
    from types import SimpleNamespace

    dataset = SimpleNamespace(
        source=run.manifest.dataset or run.spec.dataset.path, version=run.manifest.dataset_version
    )
    judges = {name: judge_config_from_spec(name, spec) for name, spec in run.spec.judges.items()}
    manifest = run_manifest(run.spec, bound, dataset, judges)
    manifest.created_by = run.created_by  # the principal that started it, recorded at CreateRun
    return manifest


def fill_outcome_counts(progress: RunProgress, counts: Mapping[int, int]) -> None:
    """A run's evaluation counts by outcome (``counts``: outcome -> evaluations)."""
    progress.scored = counts.get(OUTCOME_SCORED, 0)
    progress.skipped = counts.get(OUTCOME_SKIPPED, 0)
    progress.errors = counts.get(OUTCOME_ERROR, 0)
    progress.cancelled = counts.get(OUTCOME_CANCELLED, 0)


def infra_error_results(
    records: Sequence[Record], bound: Sequence[BoundEvaluator], reason: str
) -> list[EvaluationResult]:
    """Each evaluation of ``records`` as an infrastructure error (a task no worker could finish): never a score."""
    return [
        EvaluationResult(
            record_id=record.id,
            evaluator=b.alias,
            evaluator_ref=b.evaluator.ref,
            trial=record.provenance.trial,
            outcome=OUTCOME_ERROR,
            error_kind=ERROR_KIND_INFRA,
            reason=reason,
        )
        for record in records
        for b in bound
    ]
