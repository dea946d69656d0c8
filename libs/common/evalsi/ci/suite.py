"""The suite a CI job runs: a run spec (embedded or on a server) or records with evaluators (embedded), labelled
with the commit's git facts, ending as one result document with its gates evaluated."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalsi.errors import BadInputError
from evalsi.runs.cluster_keys import Warn
from evalsi.runs.embedded import execute_run
from evalsi.runs.gates import compile_gate, evaluate_gates
from evalsi.runs.results import EvaluationResults
from evalsi.runs.spec import load_document, parse_eval_run
from evalsi.sdk import evaluate

if TYPE_CHECKING:
    from evalsi.client import Client
    from evalsi.v1alpha1.run_pb2 import EvalRun


@dataclass(frozen=True)
class Suite:
    """What to run: ``spec`` (an EvalRun file), or ``data`` graded by ``evaluators`` (an ``evalsi eval``).
    ``gates`` are added to the spec's own; with ``data`` they are the only ones. ``params`` by evaluator alias,
    ``mapping`` as ``--map`` takes it."""

    spec: str = ""
    data: str = ""
    evaluators: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    mapping: tuple[str, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        if bool(self.spec) == bool(self.data):
            raise BadInputError("give either --spec FILE (a run spec) or --data FILE with --evaluators (an eval)")
        if self.data and not self.evaluators:
            raise BadInputError("--data needs --evaluators A,B,... (the evaluators that grade the records)")
        if self.spec and (self.evaluators or self.params or self.mapping):
            raise BadInputError("--evaluators, --param and --map go with --data; a run spec names its own")
        for number, expression in enumerate(self.gates, 1):
            try:
                compile_gate(expression)
            except BadInputError as exc:
                raise BadInputError(f"--gate #{number} {expression!r}: {exc}") from None


def load_spec(suite: Suite, labels: Mapping[str, str]) -> EvalRun:
    """The spec file parsed (every problem of its structure at once), with the CI's labels and extra gates."""
    document, lines = load_document(suite.spec)
    run = parse_eval_run(document, source=suite.spec, lines=lines)
    run.metadata.labels.update(labels)
    run.spec.gates.extend(suite.gates)
    if suite.name:
        run.metadata.name = suite.name
    return run


def spec_project(suite: Suite) -> str:
    """The project a spec names (its ``metadata.project``, else its ``evals.si/project`` label, else ``default``):
    on a server its run, and the runs its baseline is looked for among, are there."""
    return load_spec(suite, {}).metadata.project


def run_embedded(suite: Suite, labels: Mapping[str, str], *, warn: Warn) -> EvaluationResults:
    """The suite run here, in this process, as ``evalsi run -f`` or ``evalsi eval`` runs it."""
    if suite.spec:
        run = load_spec(suite, labels)
        outcome = asyncio.run(execute_run(run, base_dir=Path(suite.spec).resolve().parent, source=suite.spec,
                                          warn=warn, collect_records=False))
        return outcome.results
    results = evaluate(suite.data, list(suite.evaluators), params=suite.params, mapping=list(suite.mapping) or None,
                       name=suite.name or Path(suite.data).stem, judge_required=True, warn=warn)
    results.run.labels.update(labels)
    results.run.gates.extend(evaluate_gates(suite.gates, results.run.summaries))
    return results


def run_on_server(client: Client, suite: Suite, labels: Mapping[str, str]) -> EvaluationResults:
    """The suite's spec submitted to a server and followed to its end; the document holds every result."""
    if not suite.spec:
        raise BadInputError("--data runs embedded only; to run on a server (--server), give a run spec with --spec")
    run = load_spec(suite, labels)
    dataset = run.spec.dataset
    if dataset.path and not Path(dataset.path).is_absolute():
        local = (Path(suite.spec).resolve().parent / dataset.path).resolve()
        if local.exists():  # relative to the spec, as embedded; uploaded by runs.create
            dataset.path = str(local)
    handle = client.runs.create(run)
    finished = handle.wait()
    finished.results.extend(client.runs.results(finished.id, project=finished.project))
    return EvaluationResults(finished)

