"""The baseline a CI run is compared with: a saved result file (the base branch's artifact), a run id on a server,
or on a server the newest finished run of the same suite labelled with the base branch."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from evalsi.ci.git_facts import BRANCH_LABEL
from evalsi.runs.results import EvaluationResults
from evalsi.v1alpha1.run_pb2 import Run

if TYPE_CHECKING:
    from evalsi.client import Client

# How many of the base branch's runs (newest first) are looked through for one of the same suite.
MAX_CANDIDATES = 200


@dataclass(frozen=True)
class Baseline:
    """The baseline found (``results`` None when there is none) and where it came from, or why there is none."""

    results: EvaluationResults | None
    source: str


def baseline_file(path: str) -> Baseline:
    """A saved result; a file that is not there is no baseline (the base branch's artifact may have expired, or
    the suite is new), said in ``source``; a file that is there but not a result is refused (BadInputError)."""
    if not Path(path).is_file():
        return Baseline(None, f"no baseline: {path} does not exist")
    return Baseline(EvaluationResults.load(path), path)


def _with_results(client: Client, run: Run) -> EvaluationResults:
    run.results.extend(client.runs.results(run.id, project=run.project))
    return EvaluationResults(run)


def baseline_run(client: Client, run_id: str, project: str = "") -> Baseline:
    """A run the caller named (in ``project``, else the client's); a run the server does not have is an error
    (``looking_in`` says where to look)."""
    return Baseline(_with_results(client, client.runs.get(run_id, project=project)), f"run {run_id}")


def newest_run_of_branch(client: Client, *, branch: str, name: str, exclude: str = "") -> Baseline:
    """The newest succeeded run labelled ``git.branch=<branch>`` with the same name (the same suite; any name when
    ``name`` is empty), other than ``exclude``, in the client's project (ListRuns' label filter, newest first)."""
    runs = client.runs.list(state="succeeded", labels=[f"{BRANCH_LABEL}={branch}"])
    for run in itertools.islice(runs, MAX_CANDIDATES):
        if run.id != exclude and (not name or run.name == name):
            return Baseline(_with_results(client, run), f"run {run.id} (newest of branch {branch})")
    suite = f" named {name!r}" if name else ""
    return Baseline(None, f"no baseline: no succeeded run{suite} labelled {BRANCH_LABEL}={branch} in the newest "
                          f"{MAX_CANDIDATES} of that branch")
