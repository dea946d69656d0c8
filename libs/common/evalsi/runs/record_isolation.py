"""The isolation a record's scoring ran under, in the record's own ``provenance.isolation``.

Code evaluators (the ``sandbox`` pool: ``unit-tests``, ``code-exec-tests``) run a record's output in a sandbox and
put the rung's report in their ``passed`` score's metadata (``runs.isolation``). Records generated in a sandbox
(harness environments, CLI agents) already carry theirs in ``provenance.isolation``. ``Provenance.isolation`` is
one report, so a record that several sandboxed executions touched keeps the **weakest** of them: the lowest
achieved level, then ``partial`` before ``full``, then the one that left more unenforced. A gate or reader that
trusts a record's provenance then never sees a stronger rung than some code behind the record really had. Its
``detail`` says how many reports there were and which evaluators ran, so a reader knows it is the minimum.

At the end of a run with sandboxed evaluators the driver writes the records as evaluated, each stamped, to the
run's records store (the object store served, memory embedded) and names them in the run label
:data:`EVALUATED_LABEL`: the key of an index whose entries name each stored chunk (``evaluated_records`` reads
them back). The dataset's own shards are never rewritten: they are content-addressed and shared by runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalsi.bus.v1alpha1.bus_pb2 import STAGE_GENERATE
from evalsi.records import from_value
from evalsi.runs.isolation import ISOLATION_KEY, SandboxUseFold, report_of
from evalsi.runs.outcome import TARGET_FAILURE_KEY
from evalsi.runs.ports import RunRecords
from evalsi.targets.identity import generation_kind
from evalsi.v1alpha1.record_pb2 import IsolationReport, Record
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import EvaluationResult

__all__ = ["EVALUATED_LABEL", "Found", "SandboxFold", "add_isolation", "evaluated_records", "fold_each",
           "isolation_by_record", "stamp", "store_evaluated", "weakest"]

EVALUATED_LABEL = "evals.si/evaluated-records"
"""The run label holding the key of the index of its records as evaluated (set by the driver, reserved)."""
_CHUNK = 1000  # records stamped and stored at a time (one chunk held, never the run's records)
Key = tuple[str, int]


class _Results(Protocol):
    def iter_results(self, project: str, run_id: str) -> AsyncIterator[list[EvaluationResult]]: ...

    async def list_tasks(self, run_id: str, *, states: Sequence[str] | None = None,
                         stage: int | None = None) -> Sequence[Any]: ...


def _strength(report: IsolationReport) -> tuple[int, int, int]:
    return report.achieved, report.enforcement == "full", -len(report.not_enforced)


def weakest(reports: Iterable[IsolationReport]) -> IsolationReport | None:
    """The weakest report (``None`` for none): the lowest level, then partial, then the most left unenforced."""
    return min(reports, key=_strength, default=None)


Found = dict[Key, tuple[IsolationReport, list[str]]]


def add_isolation(found: Found, batch: Iterable[EvaluationResult]) -> None:
    """Fold ``batch`` into ``found``: per (record id, trial), the weakest isolation its results report and the
    evaluators that ran sandboxed."""
    for result in batch:
        for score in result.scores:
            entry = from_value(score.metadata[ISOLATION_KEY]) if ISOLATION_KEY in score.metadata else None
            if not isinstance(entry, dict):
                continue
            key = (result.record_id, result.trial)
            report = report_of(entry)
            held, names = found.get(key, (report, []))
            found[key] = (weakest((held, report)) or report, [*names, result.evaluator])


@dataclass
class SandboxFold:
    """What the driver reads from a finished run's results when sandboxed evaluators scored it, a batch at a time:
    the run's distinct rungs and refusals (``runs.isolation``) and each record's weakest rung (:func:`stamp`)."""

    use: SandboxUseFold = field(default_factory=SandboxUseFold)
    found: Found = field(default_factory=dict)

    def add(self, batch: list[EvaluationResult]) -> None:
        self.use.add(batch)
        add_isolation(self.found, batch)


async def fold_each(batches: AsyncIterator[list[EvaluationResult]],
                    folds: Sequence[Callable[[list[EvaluationResult]], None]]) -> None:
    """Give every batch to each fold: one read of a run's results for several ends (none at all without folds)."""
    if folds:
        async for batch in batches:
            for fold in folds:
                fold(batch)


async def isolation_by_record(batches: AsyncIterator[list[EvaluationResult]]) -> Found:
    """Per (record id, trial): the weakest isolation its results report and the evaluators that ran sandboxed."""
    found: Found = {}
    async for batch in batches:
        add_isolation(found, batch)
    return found


def stamp(records: Iterable[Record], found: Found) -> list[Record]:
    """``records`` with each scored one's ``provenance.isolation`` the weakest of what it was generated under and
    what its sandboxed evaluators ran under (copies; a record no sandboxed evaluator scored is left as it is)."""
    out: list[Record] = []
    for record in records:
        entry = found.get((record.id, record.provenance.trial))
        if entry is None:
            out.append(record)
            continue
        report, evaluators = entry
        generated = record.provenance.isolation if record.provenance.HasField("isolation") else None
        chosen = weakest([report] if generated is None else [report, generated]) or report
        stamped = Record()
        stamped.CopyFrom(record)
        stamped.provenance.isolation.CopyFrom(chosen)
        count = len(evaluators) + (generated is not None)
        sources = ([] if generated is None else ["generation"]) + sorted(set(evaluators))
        stamped.provenance.isolation.detail = (f"the weakest of {count} sandboxed execution report(s): "
                                               f"{', '.join(sources)}")
        out.append(stamped)
    return out


async def _chunks(store: _Results, records: RunRecords, run: Run) -> AsyncIterator[list[Record]]:
    """The run's records as evaluated, a chunk at a time: generated outputs in (trial, shard) order (without the
    marker of a target's failure), else the dataset's."""
    if generation_kind(run.spec.target, run.spec.harness) == "outputs":
        count = await records.record_count(run)
        for start in range(0, count, _CHUNK):
            yield await records.shard_records(run, start, min(start + _CHUNK, count))
        return
    rows = await store.list_tasks(run.id, states=("done",), stage=STAGE_GENERATE)
    for row in sorted(rows, key=lambda r: (r.trial, r.shard)):
        chunk = await records.outputs(row.output_ref)
        for record in chunk:
            if TARGET_FAILURE_KEY in record.metadata:
                del record.metadata[TARGET_FAILURE_KEY]
        yield chunk


async def store_evaluated(store: _Results, records: RunRecords, run: Run, found: Found | None = None) -> str:
    """Store the run's records as evaluated, stamped from its stored results (``found``: their
    :func:`add_isolation` fold, when the caller read them already), and return the key of their index (an entry
    per stored chunk: its key as the id); the value of the run's :data:`EVALUATED_LABEL`."""
    if found is None:
        found = await isolation_by_record(store.iter_results(run.project, run.id))
    index: list[Record] = []
    async for chunk in _chunks(store, records, run):
        index.append(Record(id=await records.put_outputs(run, stamp(chunk, found))))
    return await records.put_outputs(run, index)


async def evaluated_records(records: RunRecords, run: Run) -> AsyncIterator[list[Record]]:
    """A finished run's records as evaluated (its :data:`EVALUATED_LABEL`), a stored chunk at a time; nothing when
    the run has no such label (no sandboxed evaluator scored it)."""
    key = run.labels.get(EVALUATED_LABEL, "")
    if not key:
        return
    for entry in await records.outputs(key):
        yield await records.outputs(entry.id)
