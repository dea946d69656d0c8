"""An embedded run's progress counts cancelled evaluations apart from completed ones, as a served run does."""

from __future__ import annotations

from evalsi.sdk import progress_counts
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, OUTCOME_ERROR, OUTCOME_SCORED, OUTCOME_SKIPPED


def test_cancelled_evaluations_are_not_completed() -> None:
    outcomes = [OUTCOME_SCORED] * 5 + [OUTCOME_SKIPPED] + [OUTCOME_ERROR] * 2 + [OUTCOME_CANCELLED] * 3
    run = Run()
    for i, outcome in enumerate(outcomes):
        run.results.add(record_id=f"r{i}", evaluator="exact-match", outcome=outcome)
    progress = progress_counts(run)
    assert (progress.total_tasks, progress.completed) == (11, 8)
    assert (progress.scored, progress.skipped, progress.errors, progress.cancelled) == (5, 1, 2, 3)
