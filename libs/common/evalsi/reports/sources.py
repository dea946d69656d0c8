"""Where a report's runs come from: saved result documents here, or runs on a server (GetRun, then every page of
ListRunResults), as ``Run`` messages with their results."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evalsi.errors import BadInputError
from evalsi.runs.results import EvaluationResults
from evalsi.v1alpha1.run_pb2 import Run

if TYPE_CHECKING:
    from evalsi.client import Client

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
