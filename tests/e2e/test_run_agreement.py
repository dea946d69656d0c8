"""One run, two engines: a spec run embedded and on a real stack (NATS, scheduler, workers) gives the same result
document field by field (ids, timestamps and durations aside), and `--dry-run` says the same thing on both."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import evalsi
from evalsi.runs.embedded import run_embedded
from evalsi.runs.spec import parse_eval_run
from evalsi.testing.stack import Stack
from evalsi.testing.threaded import ThreadedProvider
from evalsi.v1alpha1.run_pb2 import (
    RUN_STATE_BUDGET_EXCEEDED,
    RUN_STATE_CANCELLED,
    RUN_STATE_FAILED,
    RUN_STATE_SUCCEEDED,
    Run,
)
from evalsi.v1alpha1.score_pb2 import OUTCOME_ERROR

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "runs" / "qa-outputs.yaml"

# Spec changes over examples/runs/qa-outputs.yaml; the dataset path is relative to the server's datasets directory,
# which is the embedded run's base directory too.
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


def answer(body: dict[str, Any]) -> str | tuple[str, int]:
    """The fake target: the question's last word, so every trial of a record answers the same; a question that
    starts with "Refuse" is refused (HTTP 400, not retried), so the same records fail on every engine."""
    question = str(body["messages"][-1]["content"])
    if question.startswith("Refuse"):
        return ("status", 400)
    return question.rsplit(" ", 1)[-1]


@pytest.fixture(scope="module")
def provider() -> Any:
    with ThreadedProvider(answer) as server:
        yield server


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, provider: Any) -> Any:
    base = tmp_path_factory.mktemp("agreement")
    (base / "datasets" / "quickstart").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "quickstart" / "qa.jsonl", base / "datasets" / "quickstart" / "qa.jsonl")
    running = Stack(
        base, datasets_dir=base / "datasets", harness_workers=0,
        judges={"fake": {"connector": "openai-compatible", "base_url": provider.base_url, "model": "fake"}},
    ).start(timeout_s=180)
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_a_served_run_equals_the_embedded_run_field_by_field(stack: Stack, name: str) -> None:
    document = spec_with(MATRIX[name])
    embedded = asyncio.run(run_embedded(document, base_dir=Path(stack.config.datasets_dir))).run
    with evalsi.Client(stack.grpc) as client:
        served = client.runs.create(document).wait()
        served.results.extend(client.runs.results(served.id, project=served.project))
    assert served.state == embedded.state, served.message
    assert comparable(served) == comparable(embedded)
    assert len(served.results) == len(embedded.results) > 0


# Generating runs (a model target, 30 questions, 3 trials): which questions the target refuses.
GENERATED: dict[str, Callable[[int], bool]] = {
    "every call answered": lambda i: False,
    "a quarter of the records refused": lambda i: i % 4 == 0,
    "every call refused": lambda i: True,
}


def generated_specs(stack: Stack, provider: Any, data: Path, refused: Callable[[int], bool]) -> tuple[Any, Any]:
    """The same generating run for the server (a connection) and embedded (the URL), over ``data``."""
    rows = [{"id": f"q{i:02d}", "input": f"{'Refuse' if refused(i) else 'Say'} {'yes' if i % 3 else 'no'}",
             "reference": "yes"} for i in range(30)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    changes = {"trials": 3, "evaluators": [{"ref": "builtin/exact-match"}, {"ref": "builtin/contains"}],
               "gates": ["metric('exact-match').passAtK(3) >= 0.5"]}
    served_spec = spec_with({**changes, "target": {"model": {"connection": "fake"}}})
    served_spec.spec.dataset.path = data.name
    embedded_spec = spec_with({**changes, "target": {"model": {
        "connector": "openai-compatible", "model": "fake", "baseUrl": provider.base_url}}})
    embedded_spec.spec.dataset.path = str(data)
    return served_spec, embedded_spec


def without_target_name(run: Run) -> dict[str, Any]:
    # The target is named differently on each side (a server's connection, a URL embedded), in the manifest and in
    # the reason a failed call gives: those aside, everything agrees.
    fields = comparable(run)
    del fields["manifest"]
    def unnamed(text: str) -> str:
        return re.sub(r"target .*?: openai ", "target: openai ", text)

    fields["results"] = [(*result[:5], unnamed(result[5]), *result[6:]) for result in fields["results"]]
    fields["message"] = unnamed(fields["message"])
    fields["summaries"] = [unnamed(summary) for summary in fields["summaries"]]  # error_kinds' first reasons
    return fields


@pytest.mark.parametrize("name", list(GENERATED))
def test_a_served_generating_run_with_trials_equals_the_embedded_run(stack: Stack, provider: Any, name: str) -> None:
    data = Path(stack.config.datasets_dir) / "agreement-generated.jsonl"
    try:
        served_spec, embedded_spec = generated_specs(stack, provider, data, GENERATED[name])
        embedded = asyncio.run(run_embedded(embedded_spec, base_dir=data.parent)).run
        with evalsi.Client(stack.grpc) as client:
            served = client.runs.create(served_spec).wait()
            served.results.extend(client.runs.results(served.id, project=served.project))
    finally:
        data.unlink()
    assert without_target_name(served) == without_target_name(embedded)
    assert {r.trial for r in served.results} == {0, 1, 2} and len(served.results) == 30 * 3 * 2
    refused = sum(GENERATED[name](i) for i in range(30))
    failed = [r for r in served.results if r.outcome == OUTCOME_ERROR]
    assert len(failed) == refused * 3 * 2
    # A run whose every target call failed is FAILED, whichever engine drove it; otherwise it did its work.
    assert served.state == (RUN_STATE_FAILED if refused == 30 else RUN_STATE_SUCCEEDED), served.message


def test_a_run_over_its_token_budget_ends_budget_exceeded_on_both_engines(stack: Stack, provider: Any) -> None:
    data = Path(stack.config.datasets_dir) / "agreement-budget.jsonl"
    try:
        served_spec, embedded_spec = generated_specs(stack, provider, data, GENERATED["every call answered"])
        for spec in (served_spec, embedded_spec):
            spec.spec.budget.tokens = 40  # a few calls' worth (a fake call uses about ten tokens)
        embedded = asyncio.run(run_embedded(embedded_spec, base_dir=data.parent)).run
        with evalsi.Client(stack.grpc) as client:
            served = client.runs.create(served_spec).wait()
    finally:
        data.unlink()
    # A process meters each call as it answers and stops at the one over the budget; a server sees usage when a task
    # reports it: how much ran differs (docs/runs.md), the verdict and its reason do not.
    assert served.state == embedded.state == RUN_STATE_BUDGET_EXCEEDED, (served.message, embedded.message)
    def reason(run: Run) -> str:
        return re.sub(r"\d+", "N", run.message.split(";")[0])

    assert reason(served) == reason(embedded) == "token budget exceeded: N tokens used of N (over by N)"
    assert embedded.progress.usage.total_tokens > 40 and served.progress.usage.total_tokens > 40


def test_a_served_run_cancelled_and_resumed_equals_an_embedded_run_never_interrupted(
    stack: Stack, provider: Any
) -> None:
    data = Path(stack.config.datasets_dir) / "agreement-resumed.jsonl"
    try:
        refused = GENERATED["a quarter of the records refused"]
        served_spec, embedded_spec = generated_specs(stack, provider, data, refused)
        embedded = asyncio.run(run_embedded(embedded_spec, base_dir=data.parent)).run
        # Every call takes half a second (the 90 calls of the run), so the cancel comes while calls are in flight.
        asked_before = len(provider.requests)
        provider.enqueue(*[("delay", 0.5)] * 90)
        with evalsi.Client(stack.grpc) as client:
            handle, project = client.runs.create(served_spec), served_spec.metadata.project
            deadline = time.monotonic() + 60

            def now() -> Run:
                return client.runs.get(handle.id, project=project)

            while len(provider.requests) - asked_before < 10 and time.monotonic() < deadline:
                time.sleep(0.02)
            client.runs.cancel(handle.id, project=project)
            cancelled = handle.wait()
            assert cancelled.state == RUN_STATE_CANCELLED, cancelled.message
            assert cancelled.progress.completed < cancelled.progress.total_tasks
            client.runs.resume(handle.id, project=project)
            while now().state == RUN_STATE_CANCELLED and time.monotonic() < deadline:
                time.sleep(0.02)
            served = handle.wait()
            served.results.extend(client.runs.results(served.id, project=served.project))
    finally:
        data.unlink()
    assert served.state == RUN_STATE_SUCCEEDED, served.message
    assert without_target_name(served) == without_target_name(embedded)


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
    # And as JSON: the same document both ways, counts as integers.
    embedded_json, served_json = (json.loads("\n".join(dry_run("--format", "json", *extra)))
                                  for extra in ((), ("--server", stack.http)))
    assert served_json == embedded_json and isinstance(served_json["tasks"], int) and served_json["tasks"] > 0
