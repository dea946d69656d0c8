"""A local dataset file on a real stack that cannot see it: `evalsi.Client` uploads it over HTTP, the run names the
stored version, and the result document equals the embedded run of the same file; the dataset spans several
shards, each published with its stored shard's key."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import evalsi
from evalsi.runs.embedded import run_embedded
from evalsi.runs.spec import load_eval_run
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED, Run

RECORDS = 1234  # three shards of 500


def comparable(run: Run) -> dict[str, Any]:
    return {
        "state": run.state,
        "summaries": [str(s) for s in run.summaries],
        "gates": [(g.expression, g.passed) for g in run.gates],
        "results": sorted(
            (r.evaluator, r.record_id, r.trial, r.outcome, r.reason,
             tuple((s.name, str(getattr(s, s.WhichOneof("value") or "name"))) for s in r.scores))
            for r in run.results
        ),
        "dataset_version": run.manifest.dataset_version,
        "progress": (run.progress.scored, run.progress.skipped, run.progress.errors),
    }


def test_an_uploaded_dataset_runs_on_the_server_as_it_runs_embedded(tmp_path: Path) -> None:
    client_side = tmp_path / "client"
    client_side.mkdir()
    with (client_side / "answers.jsonl").open("w") as f:
        for i in range(RECORDS):
            reference = f"answer {i % 7}"
            output = reference if i % 4 else f"wrong {i}"
            f.write(json.dumps({"id": f"q{i}", "input": f"question {i}", "output": output, "reference": reference,
                                "topic": f"t{i % 5}"}) + "\n")
    spec = client_side / "run.yaml"
    spec.write_text(
        "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nmetadata: {name: uploaded, project: uploads}\n"
        "spec:\n  dataset: {path: answers.jsonl}\n"
        "  evaluators: [{ref: builtin/exact-match}, {ref: builtin/contains, alias: has-answer}]\n"
        "  summary: {clusterBy: topic}\n"
        "  gates: [\"metric('exact-match').mean >= 0.5\"]\n"
    )
    embedded = asyncio.run(run_embedded(load_eval_run(spec), base_dir=client_side)).run
    server_side = tmp_path / "server-datasets"  # the server's datasets directory holds nothing of the client's
    server_side.mkdir()
    stack = Stack(tmp_path / "stack", datasets_dir=server_side).start(timeout_s=180)
    try:
        with evalsi.Client(stack.http) as client:
            handle = client.runs.create(spec)
            served = handle.wait()
            served.results.extend(client.runs.results(served.id, project=served.project))
            versions = client.datasets.versions("answers", project="uploads")
    finally:
        logs = stack.logs()
        stack.stop()
    assert served.state == RUN_STATE_SUCCEEDED, served.message + logs
    assert [v.ref for v in versions] == [served.spec.dataset.ref] and versions[0].records == RECORDS
    assert served.manifest.dataset == served.spec.dataset.ref == f"datasets/answers@{embedded.manifest.dataset_version}"
    assert served.progress.total_tasks == 3 * 2  # three shards x two evaluators
    assert comparable(served) == comparable(embedded)
    assert len(served.results) == RECORDS * 2
