"""Where a report's runs come from: saved result documents here, or runs on a server (GetRun, then every page of
ListRunResults), as ``Run`` messages with their results."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from evalsi.errors import BadInputError
from evalsi.runs.results import EvaluationResults
from evalsi.targets.identity import generation_kind
from evalsi.v1alpha1.record_pb2 import Record
from evalsi.v1alpha1.run_pb2 import Run

if TYPE_CHECKING:
    from evalsi.client import Client

T = TypeVar("T")

# Results read from a server for one report: a report holds a run in memory, and this bounds it (about 1 GB).
MAX_SERVER_RESULTS = 2_000_000


def on_server(sources: Sequence[str], server: str | None) -> bool:
    """Run ids on a server when --server is given or a source is not a file here (as ``evalsi compare`` decides)."""
    return bool(server) or not all(Path(source).is_file() for source in sources)


def load_file(path: str) -> Run:
    """A saved result document (``evalsi eval|run --output``) with its results."""
    return EvaluationResults.load(path).run


def load_served(client: Client, run_id: str, project: str = "") -> Run:
    """A server's run with every result of it, refused past ``MAX_SERVER_RESULTS``."""
    run = client.runs.get(run_id, project=project)
    for count, result in enumerate(client.runs.results(run_id, project=project), start=1):
        if count > MAX_SERVER_RESULTS:
            raise BadInputError(f"run {run_id} has over {MAX_SERVER_RESULTS} results, more than one report holds; "
                                "report on a saved result of part of it instead")
        run.results.append(result)
    return run


def _trial_of(run: Run, trial: int) -> int:
    """The trial whose records the server keeps for a result of ``trial``: a run that graded its dataset's outputs
    keeps one set (trial 0), a generating run one per trial."""
    return 0 if generation_kind(run.spec.target, run.spec.harness) == "outputs" else trial


def served_records(client: Client, run: Run, keys: Sequence[tuple[str, int]], project: str = "",
                   ) -> dict[tuple[str, int], Record]:
    """The records behind ``keys`` ((record id, trial)) as the server's run graded them (ListRunRecords): a
    generating target's outputs of that trial, else the dataset's record."""
    by_trial: dict[int, list[str]] = defaultdict(list)
    for record_id, trial in keys:
        by_trial[_trial_of(run, trial)].append(record_id)
    found: dict[tuple[str, int], Record] = {}
    for trial, ids in by_trial.items():
        records = {r.id: r for r in client.runs.records(run.id, record_ids=sorted(set(ids)), trial=trial,
                                                        project=project)}
        for record_id, asked in keys:
            if _trial_of(run, asked) == trial and record_id in records:
                found[(record_id, asked)] = records[record_id]
    return found


def served_by_id(client: Client, run: Run, keep: Callable[[Record], T], project: str = "") -> dict[str, T]:
    """``keep(record)`` for every record of the server's run (its first trial), a page at a time."""
    wanted = {result.record_id for result in run.results}
    kept: dict[str, T] = {}
    for record in client.runs.records(run.id, project=project):
        if record.id in wanted and record.id not in kept:
            kept[record.id] = keep(record)
    return kept
