"""Run.created_by: CreateRun records the caller's provider/subject (never a credential) on the run and in its
manifest; the final manifest keeps it; ``evalsi runs get`` shows it."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from evalsi.api import RunHandlers, load_run_dataset
from evalsi.api.context import CallContext
from evalsi.auth.principal import ANONYMOUS, Principal
from evalsi.cli.runs_cmd import describe_run
from evalsi.evaluators import Registry
from evalsi.runs.outcome import stored_run_manifest
from evalsi.runs.spec import validate_eval_run
from evalsi.stores import LocalObjectStore, open_metadata_store
from evalsi.v1alpha1.run_pb2 import EvalRun
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

ALICE = Principal(kind="user", provider="corp", subject="5f1c-alice", name="Alice", claims={"sub": "5f1c-alice"})


def _document() -> EvalRun:
    return json_format.ParseDict({
        "apiVersion": "evals.si/v1alpha1", "kind": "EvalRun", "metadata": {"name": "nightly"},
        "spec": {"dataset": {"path": "qa.jsonl"}, "evaluators": [{"ref": "exact-match"}]},
    }, EvalRun())


async def test_create_run_records_who_started_it(tmp_path: Path, registry: Registry) -> None:
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    (datasets / "qa.jsonl").write_text(json.dumps({"id": "q1", "output": "Paris", "reference": "Paris"}) + "\n")
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    announced: list[Any] = []

    async def control(message: Any) -> None:
        announced.append(message)

    async def no_watch(run_id: str) -> Any:
        raise AssertionError("not watched")

    runs = RunHandlers(store=store, objects=LocalObjectStore(tmp_path / "objects"), control=control,
                       watch=no_watch,  # type: ignore[arg-type]
                       validate_run=partial(validate_eval_run, registry=registry, datasets_dir=datasets),
                       load_records=partial(load_run_dataset, datasets_dir=datasets))
    ctx = CallContext(method="evalsi.v1alpha1.RunService/CreateRun", request_id="r1", project="support",
                      header_project="support")
    try:
        run = await runs.create_run(CreateRunRequest(run=_document()), replace(ctx, principal=ALICE))
        assert run.created_by == "corp/5f1c-alice" and run.manifest.created_by == "corp/5f1c-alice"
        stored = await store.get_run("support", run.id)
        assert stored is not None and stored.created_by == "corp/5f1c-alice"
        assert "created by corp/5f1c-alice" in describe_run(stored)
        # The scheduler's final manifest is rebuilt from the spec; it keeps who started the run.
        assert stored_run_manifest(stored, []).created_by == "corp/5f1c-alice"
        # Never anything of the credential: the stored run holds the id only.
        assert b"Alice" not in stored.SerializeToString()

        anonymous = await runs.create_run(CreateRunRequest(run=_document()), replace(ctx, principal=ANONYMOUS))
        assert anonymous.created_by == "" and "created by" not in describe_run(anonymous)
        assert len(announced) == 2
    finally:
        await store.close()
