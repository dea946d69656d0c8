"""One run, two engines: a spec run embedded and on a real stack (NATS, scheduler, workers) gives the same result
document field by field (ids, timestamps and durations aside), and `--dry-run` says the same thing on both."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalsi
from evalsi.runs.embedded import run_embedded
from evalsi.runs.spec import parse_eval_run
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import Run

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"

EXAMPLES = ROOT / "examples"
# Spec changes over examples/runs/qa-outputs.yaml; the dataset path is relative to the examples folder, which is the
# server's datasets directory and the embedded run's base directory.
MATRIX: dict[str, dict[str, Any]] = {
    "as written": {},
    "clustered, bootstrap seeded": {
        "summary": {"clusterBy": "topic", "interval": "bootstrap", "seed": 11, "bootstrapResamples": 400},
    },
    "a failing gate, another confidence": {
        "summary": {"confidence": 0.9},
        "gates": ["metric('exact-match').mean >= 0.99"],
    },
}


def comparable(run: Run) -> dict[str, Any]:
    results = sorted(
        (r.evaluator, r.record_id, r.trial, r.outcome, r.error_kind, r.reason,
         tuple((s.name, str(getattr(s, s.WhichOneof("value") or "name"))) for s in r.scores))
        for r in run.results
    )
    manifest = run.manifest
    return {
        "state": run.state,
        "message": run.message,
        "summaries": [str(s) for s in run.summaries],
        "gates": [(g.expression, g.passed, g.message) for g in run.gates],
        "results": results,
        "manifest": (manifest.spec_hash, manifest.dataset_version, manifest.seed, manifest.target,
                     [str(e) for e in manifest.evaluators], dict(manifest.judges), list(manifest.unpinned)),
        "progress": (run.progress.scored, run.progress.skipped, run.progress.errors, run.progress.cancelled),
    }


def spec_with(changes: dict[str, Any]) -> Any:
    raw = yaml.safe_load(SPEC.read_text())
    raw["spec"].update(changes)
    raw["spec"]["dataset"]["path"] = "quickstart/qa.jsonl"
    return parse_eval_run(raw, source=str(SPEC))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    running = Stack(tmp_path_factory.mktemp("agreement"), datasets_dir=ROOT / "examples").start(timeout_s=180)
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_a_served_run_equals_the_embedded_run_field_by_field(stack: Stack, name: str) -> None:
    document = spec_with(MATRIX[name])
    embedded = asyncio.run(run_embedded(document, base_dir=EXAMPLES)).run
    with evalsi.Client(stack.grpc) as client:
        served = client.runs.create(document).wait()
        served.results.extend(client.runs.results(served.id, project=served.project))
    assert served.state == embedded.state, served.message
    assert comparable(served) == comparable(embedded)
    assert len(served.results) == len(embedded.results) > 0


def test_a_served_dry_run_prints_what_an_embedded_one_prints(stack: Stack) -> None:
    evalsi_bin = Path(sys.executable).parent / "evalsi"

    def dry_run(*extra: str) -> list[str]:
        done = subprocess.run([str(evalsi_bin), "run", "-f", str(SPEC), "--dry-run", *extra], capture_output=True,
                              text=True, timeout=180, check=False, env=dict(os.environ))
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()

    embedded, served = dry_run(), dry_run("--server", stack.grpc)
    # The dataset line names the file as each side was given it (the CLI sends a local path made absolute).
    assert [line for line in served if "dataset " not in line] == [line for line in embedded if "dataset " not in line]
    assert served[0].startswith("dry run: qa-outputs (project quickstart); nothing was called or stored")
    assert any(line.startswith("  tasks        ") for line in served)
