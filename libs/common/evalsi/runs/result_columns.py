"""A task's results as columns (``ResultColumns`` on the bus): made once by the worker that produced them, so the
scheduler stores and folds a million results without reading or re-serializing each one.

The runner writes an evaluation task's results as columns in the first place (``run_evaluators(columns=...)``: a
cheap evaluator's bool verdict becomes a row with no message made); results made as messages (a reduction's,
generation failures) are turned into columns here. The scheduler, one process for every worker, would otherwise
read each result's fields, serialize it again for its row and walk its scores for the summaries (a third of its CPU
in a million-task run, docs/benchmarks.md). An in-process run's results take the same path. From columns the rows
are a ``zip`` and the common fold (one evaluator, one pass/fail or number score per result) is a few array extends;
a result that is anything else is read back from its bytes and folded as before, so the summaries are the same
either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

from evalsi.bus.v1alpha1.bus_pb2 import ResultColumns, TaskResult
from evalsi.evaluators.runner import Columns, append_results
from evalsi.runs.summary import SummaryBuilder
from evalsi.stores.metadata import ResultRow
from evalsi.v1alpha1.score_pb2 import EvaluationResult

__all__ = ["Columns", "columns_of", "fold_columns", "move_results_to_columns", "result_rows", "task_results"]


def columns_of(results: Iterable[EvaluationResult]) -> ResultColumns:
    """``results`` as columns, in their order."""
    columns = ResultColumns()
    append_results(columns, list(results))
    return columns


def move_results_to_columns(result: TaskResult) -> None:
    """Replace ``result.results`` by ``result.columns`` (what a worker publishes; a task evaluated with
    ``run_evaluators(columns=...)`` has its columns already and no results)."""
    if result.results:
        append_results(result.columns, list(result.results))
        result.ClearField("results")


def task_results(result: TaskResult) -> list[EvaluationResult]:
    """A task result's results as messages, whether it carries them as messages or as columns."""
    return list(result.results) + [EvaluationResult.FromString(data) for data in result.columns.data]


def result_rows(columns: Columns) -> list[ResultRow]:
    """The store rows of ``columns``, in order."""
    # Each column read out whole first: zipping the protobuf containers reads them an element at a time, slower.
    return list(zip(list(columns.evaluators), list(columns.record_ids), list(columns.trials), list(columns.outcomes),
                    list(columns.data), strict=True))


def fold_columns(builder: SummaryBuilder, columns: Columns) -> None:
    """Fold the results in ``columns`` into ``builder``: the same summaries as ``builder.add`` of the results."""
    values = list(columns.values)
    if not values:
        return
    evaluators, names = list(columns.evaluators), list(columns.score_names)
    one_column = evaluators.count(evaluators[0]) == len(evaluators) and names.count(names[0]) == len(names)
    if one_column and not any(map(math.isnan, values)) and builder.add_scored(
        evaluators[0], names[0], list(columns.record_ids), list(columns.trials), values
    ):
        return
    _fold_mixed(builder, columns, values)


def _fold_mixed(builder: SummaryBuilder, columns: Columns, values: Sequence[float]) -> None:
    """Results of several evaluators or outcomes: runs of foldable values a column at a time, the rest read."""
    evaluators, names = list(columns.evaluators), list(columns.score_names)
    record_ids, trials = list(columns.record_ids), list(columns.trials)
    for start, stop, foldable in _runs(evaluators, names, values):
        if foldable and builder.add_scored(
            evaluators[start], names[start], record_ids[start:stop], trials[start:stop], values[start:stop]
        ):
            continue
        builder.add(EvaluationResult.FromString(data) for data in columns.data[start:stop])


def _runs(evaluators: Sequence[str], names: Sequence[str], values: Sequence[float]) -> Iterator[tuple[int, int, bool]]:
    """Maximal runs ``[start, stop)`` of results that fold together (same evaluator and score name, a value) or that
    must be read, in order, as (start, stop, foldable)."""
    start = 0
    for index in range(1, len(values) + 1):
        if index < len(values) and _same_run(evaluators, names, values, start, index):
            continue
        yield start, index, not math.isnan(values[start])
        start = index


def _same_run(evaluators: Sequence[str], names: Sequence[str], values: Sequence[float], first: int, index: int) -> bool:
    if math.isnan(values[first]):
        return math.isnan(values[index])
    return not math.isnan(values[index]) and evaluators[index] == evaluators[first] and names[index] == names[first]
