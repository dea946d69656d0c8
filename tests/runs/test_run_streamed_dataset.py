"""``evalsi run``'s dataset streams in as ``evaluate()``'s rows do (``runs.intake``): held while the run fits its memory
budget, else written as shards into the local store as it is read; the checks made before the run starts (outputs
given, the cluster key) read the held records or the stored shards, and a refused dataset leaves nothing behind."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi.errors import BadInputError
from evalsi.runs.embedded import dry_run, execute_run, prepare_run
from evalsi.runs.results import EvaluationResults
from evalsi.runs.spec import parse_eval_run
from evalsi.v1alpha1.run_pb2 import RUN_STATE_SUCCEEDED

ROWS = [
    {"id": f"r{i:03d}", "input": f"question {i}", "output": "yes" if i % 3 else "no", "reference": "yes",
     "metadata": {"doc": f"d{i % 7}"}}
    for i in range(50)
]
TINY_BUDGET = 0.001  # MiB: every run here is over it


def spec_file(tmp_path: Path, spec: dict[str, Any], rows: list[dict[str, Any]]) -> Any:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    document = {"apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "streamed"},
                "spec": {"dataset": {"path": str(data)}, **spec}}
    return parse_eval_run(yaml.safe_load(yaml.safe_dump(document)), source="run.yaml")


def comparable(results: EvaluationResults) -> dict[str, Any]:
    document = json.loads(results.to_json())
    for key in ("id", "createTime", "startTime", "endTime"):
        document.pop(key, None)
    document["manifest"].pop("created", None)
    return document


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where temporary local stores go, so a test can see what is left there."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


async def test_a_run_over_its_budget_stores_the_records_as_they_are_read_and_agrees_with_memory(
    tmp_path: Path,
) -> None:
    run = spec_file(tmp_path, {"summary": {"clusterBy": "doc"}, "evaluators": [{"ref": "exact-match"}]}, ROWS)
    held = await execute_run(run, base_dir=tmp_path, shard_size=8)
    kept = tmp_path / "kept"
    stored = await execute_run(run, base_dir=tmp_path, shard_size=8, memory_budget=TINY_BUDGET, store_dir=kept,
                               collect_records=False)
    with held.results as in_memory, stored.results as spilled:
        assert in_memory.stored is None and spilled.stored is not None
        assert spilled.run.state == RUN_STATE_SUCCEEDED
        assert comparable(spilled) == comparable(in_memory)
    assert stored.records == [] and len(held.records) == len(ROWS)
    # The records went into the store's objects as shards of the plan's size, written by the intake as they came.
    shards = [path for path in (kept / "objects").rglob("*") if path.is_file()]
    assert len(shards) >= -(-len(ROWS) // 8)
    assert held.plan.samples == stored.plan.samples == len(ROWS) and len(stored.plan.shards) == 7


async def test_checks_of_a_stored_dataset_refuse_it_and_leave_no_store_behind(tmp_path: Path, temp_root: Path) -> None:
    no_outputs = spec_file(tmp_path, {"evaluators": [{"ref": "exact-match"}]},
                           [{key: value for key, value in row.items() if key != "output"} for row in ROWS])
    with pytest.raises(BadInputError, match="no record has an output"):
        await execute_run(no_outputs, base_dir=tmp_path, memory_budget=TINY_BUDGET)
    typo = spec_file(tmp_path, {"summary": {"clusterBy": "dox"}, "evaluators": [{"ref": "exact-match"}]}, ROWS)
    with pytest.raises(BadInputError, match="did you mean 'doc'"):
        await execute_run(typo, base_dir=tmp_path, memory_budget=TINY_BUDGET)
    assert list(temp_root.iterdir()) == []  # each spilled store was removed with the refusal


async def test_a_cluster_key_some_stored_records_lack_is_a_warning_read_from_the_shards(tmp_path: Path) -> None:
    rows = [row if i % 5 else {**row, "metadata": {}} for i, row in enumerate(ROWS)]
    run = spec_file(tmp_path, {"summary": {"clusterBy": "doc"}, "evaluators": [{"ref": "exact-match"}]}, rows)
    heard: list[str] = []
    outcome = await execute_run(run, base_dir=tmp_path, memory_budget=TINY_BUDGET, shard_size=8, warn=heard.append)
    outcome.results.close()
    assert heard == ["spec.summary.clusterBy 'doc': 10 of 50 records lack this metadata key; each of them is a "
                     "cluster of its own"]


def test_prepare_and_dry_run_read_the_dataset_through_once(tmp_path: Path) -> None:
    run = spec_file(tmp_path, {"evaluators": [{"ref": "exact-match"}]}, ROWS)
    prepared = prepare_run(run, base_dir=tmp_path, shard_size=16)
    assert prepared.dataset.count == len(ROWS) and prepared.plan.samples == len(ROWS)
    assert len(prepared.dataset.version) == 64  # known once every record was read
    assert len(prepared.plan.shards) == 4
    _, projection = dry_run(run, base_dir=tmp_path)
    assert projection.to_dict()["evaluations"] == len(ROWS)

