"""The code pack served: `evalsi serve`'s stack (bundled NATS, api, scheduler, a cpu and a sandbox worker, and
evalsi-sandboxd on bubblewrap) runs examples/code/run.yaml with the executing evaluators on the sandbox pool, whose
worker opens its sandboxes on sandboxd; the summaries equal the embedded run's, and every executing result and the
manifest carry the isolation report."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import yaml
from click.testing import CliRunner
from google.protobuf import json_format
from sandboxd_process import require_bwrap

from evalsi.cli.main import cli
from evalsi.client import Client
from evalsi.datasets.run_records import StoredRunRecords
from evalsi.records import from_value
from evalsi.runs.record_isolation import evaluated_records
from evalsi.sandbox.client import SANDBOXD_ENV
from evalsi.service.config import WorkerConfig
from evalsi.stores.objects import LocalObjectStore
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.record_pb2 import ISOLATION_LEVEL_NAMESPACED, Record
from evalsi.v1alpha1.run_pb2 import RUN_STATE_FAILED, RUN_STATE_SUCCEEDED
from evalsi.v1alpha1.score_pb2 import ERROR_KIND_INFRA, OUTCOME_ERROR

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "code" / "run.yaml"


EXPECTED_IDS = ("correct", "wrong", "infinite-loop", "escape", "forged-pass", "syntax-error")


async def _all(chunks: AsyncIterator[list[Record]]) -> list[list[Record]]:
    return [chunk async for chunk in chunks]


def _summaries(summaries: list[dict]) -> dict[str, tuple[int, float]]:
    return {s["metric"]: (int(s.get("n", 0)), round(s.get("mean", 0.0), 9)) for s in summaries}


def test_a_served_code_run_on_the_sandbox_pool_matches_the_embedded_one(tmp_path: Path) -> None:
    require_bwrap()
    embedded_out = tmp_path / "embedded.json"
    embedded = CliRunner().invoke(cli, ["run", "-f", str(SPEC), "--output", str(embedded_out)])
    assert embedded.exit_code == 0, embedded.output
    expected = _summaries(json.loads(embedded_out.read_text())["summaries"])

    stack = Stack(tmp_path / "stack", datasets_dir=ROOT / "examples",
                  workers=[WorkerConfig("cpu", 1, 8), WorkerConfig("sandbox", 1, 4)],
                  sandbox={"ladder": ["bwrap", "landlock"]}).start()  # no vm rung: QEMU is not reached on demand
    try:
        children = {child.name: child for child in stack.supervisor.children}
        assert "sandboxd" in children
        assert children["worker-sandbox-0"].env[SANDBOXD_ENV].startswith("unix:")
        with Client(stack.grpc, project="quickstart") as client:
            handle = client.runs.create(SPEC)
            run = handle.wait()
            assert run.state == RUN_STATE_SUCCEEDED, (run.message, stack.logs())
            served = json_format.MessageToDict(run)
            assert _summaries(served["summaries"]) == expected
            assert all(gate.passed for gate in run.gates)
            assert [(i.driver, i.enforcement) for i in run.manifest.isolation] == [("bwrap", "full")]
            results = list(client.runs.results(run.id))
        # Every record the sandboxed evaluators scored is stored again with the rung in its provenance.isolation
        # (runs.record_isolation), named by the run's label; the dataset's shards stay as they were.
        stored = StoredRunRecords(LocalObjectStore(stack.config.objects_url))
        evaluated = [r for chunk in asyncio.run(_all(evaluated_records(stored, run))) for r in chunk]
        assert sorted(r.id for r in evaluated) == sorted(EXPECTED_IDS)
        for record in evaluated:
            isolation = record.provenance.isolation
            assert (isolation.driver, isolation.enforcement, isolation.achieved) == (
                "bwrap", "full", ISOLATION_LEVEL_NAMESPACED)
            assert isolation.detail.endswith("code-exec-tests, unit-tests"), isolation.detail
        executing = [r for r in results if r.evaluator in ("unit-tests", "code-exec-tests")]
        assert len(executing) == 12
        for result in executing:
            [passed] = [s for s in result.scores if s.name == "passed"]
            isolation = from_value(passed.metadata["isolation"])
            assert (isolation["driver"], isolation["level"], isolation["enforcement"]) == ("bwrap", "namespaced",
                                                                                       "full")
            assert passed.passed is (result.record_id == "correct")
        # The sandbox worker's programs ran in sandboxd's sandboxes, not in the worker.
        log = children["sandboxd"].log_path.read_text(errors="replace")
        created = [json.loads(line) for line in log.splitlines() if '"sandbox created"' in line]
        assert len(created) == 12  # one sandbox per executing result, in the run's project
        assert {(entry["project"], entry["driver"]) for entry in created} == {("quickstart", "bwrap")}

        # A minimum sandboxd cannot meet: SANDBOX_UNAVAILABLE, every executing evaluation an infra error, no sandbox.
        document = yaml.safe_load(SPEC.read_text())
        document["spec"]["dataset"]["path"] = str(SPEC.parent / "add.jsonl")
        document["spec"]["sandbox"]["minIsolation"] = "vm"
        unmet = tmp_path / "vm.yaml"
        unmet.write_text(yaml.safe_dump(document))
        with Client(stack.grpc, project="quickstart") as client:
            refused = client.runs.create(unmet).wait()
            failed = [r for r in client.runs.results(refused.id) if r.evaluator != "python-syntax"]
        assert len(failed) == 12
        for result in failed:
            assert (result.outcome, result.error_kind) == (OUTCOME_ERROR, ERROR_KIND_INFRA)
            assert "SANDBOX_UNAVAILABLE" in result.reason, result.reason
        assert not refused.manifest.isolation
        assert refused.state == RUN_STATE_FAILED, refused.message  # fail closed
        assert refused.message.startswith("12 code evaluation(s) did not run: ") and "SANDBOX_UNAVAILABLE" in (
            refused.message)
        log = children["sandboxd"].log_path.read_text(errors="replace")
        assert log.count('"sandbox created"') == 12  # none more
    finally:
        stack.stop()
