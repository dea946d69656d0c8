"""Decisions on stored runs through a real api: the gate's partial first decision and the run handlers' final one
on the stored run (§17's own-runs cancel rule, a role conditioned on a run's labels), over gRPC, with the denial in
the audit log naming the rule that decided it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.audit import AuditLog
from evalsi.audit.decisions import decision_recorder
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.authz.authorizer import Authorizer
from evalsi.bus.v1alpha1.bus_pb2 import RunControl
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.stored_access import LiveAuthorizer
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.stores.audit import AuditQuery
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, Run
from evalsi.v1alpha1.run_service_pb2 import CancelRunRequest, CompareRunsRequest, GetRunRequest
from evalsi.v1alpha1.run_service_pb2_grpc import RunServiceStub

KEYS = {"alice": ["runner"], "bob": ["runner"], "lead": ["admin"], "member": ["team-a"]}
RBAC = {"roles": [{"name": "team-a", "permissions": ["runs.read"], "condition": 'resource.run.labels.team == "a"'}]}
RULES = [{"require": 'request.action != "runs.cancel" || principal.id == resource.run.created_by || '
                     '"admin" in principal.roles'}]


class Served:
    def __init__(self, server: ApiServer, store: SqlMetadataStore, audit: AuditLog, secrets: dict[str, str],
                 controls: list[RunControl]) -> None:
        self.server, self.store, self.audit, self.secrets, self.controls = server, store, audit, secrets, controls

    async def call(self, method: str, request: Any, key: str) -> Any:
        metadata = [("x-evalsi-project", "p"), ("authorization", f"Bearer {self.secrets[key]}")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.server.grpc_port}") as channel:
            return await getattr(RunServiceStub(channel), method)(request, metadata=metadata, timeout=10)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(store, SqlMetadataStore)
    secrets = {name: new_api_key() for name in KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": {"p": roles}} for name, roles in KEYS.items()]}})
    authorizer = LiveAuthorizer(Authorizer.from_config(RBAC, {"rules": RULES}), store, refresh_s=3600)
    await authorizer.start()
    audit = AuditLog(store.append_audit)
    audit.start()
    controls: list[RunControl] = []

    async def control(message: RunControl) -> None:
        controls.append(message)

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used here")

    registry = Registry.from_entry_points()
    runs = RunHandlers(store=store, objects=None, control=control, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=refuse)
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry))
    gate = Gate(Authenticator(auth), authorizer, on_decision=decision_recorder(audit))
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
    await server.start()
    for run_id, owner, team in (("run-alice", "apikey/alice", "a"), ("run-bob", "apikey/bob", "b")):
        await store.create_run(Run(id=run_id, project="p", name=run_id, state=RUN_STATE_RUNNING, created_by=owner,
                                   labels={"team": team}))
    try:
        yield Served(server, store, audit, secrets, controls)
    finally:
        await server.stop()
        await authorizer.close()
        await audit.close()
        await store.close()


async def test_runners_cancel_only_their_own_runs(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.call("CancelRun", CancelRunRequest(id="run-alice"), "bob")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert served.controls == []
    await served.call("CancelRun", CancelRunRequest(id="run-alice"), "alice")
    await served.call("CancelRun", CancelRunRequest(id="run-bob"), "lead")
    assert [control.run_id for control in served.controls] == ["run-alice", "run-bob"]

    await served.audit.flush()
    entries, _ = await served.store.list_audit(AuditQuery(project="p", action="runs.cancel"))
    by_principal = {(e.principal, e.decision): e for e in entries}
    denied = by_principal[("apikey/bob", "deny")]
    assert "require rule authorization.rules[0]" in denied.deciding and "does not hold" in denied.deciding
    # One entry per allowed cancel: the handler's final decision, not the gate's partial one.
    allowed = [e for e in entries if e.decision == "allow"]
    assert sorted(e.principal for e in allowed) == ["apikey/alice", "apikey/lead"]
    assert all("pending" not in e.deciding for e in allowed)


async def test_a_role_conditioned_on_run_labels_reads_only_those_runs(served: Served) -> None:
    """The gate cannot see a run's labels (its decision is partial); the handler decides on the stored run."""
    assert (await served.call("GetRun", GetRunRequest(id="run-alice"), "member")).labels["team"] == "a"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.call("GetRun", GetRunRequest(id="run-bob"), "member")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as cancel:
        await served.call("CancelRun", CancelRunRequest(id="run-alice"), "member")
    assert cancel.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert served.controls == []


async def test_compare_decides_on_each_stored_run(served: Served) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.call("CompareRuns", CompareRunsRequest(run_a="run-alice", run_b="run-bob"), "member")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # Both runs are team a's: access passes, and the handler answers about the runs themselves (no summaries yet).
    with pytest.raises(grpc.aio.AioRpcError) as answered:
        await served.call("CompareRuns", CompareRunsRequest(run_a="run-alice", run_b="run-alice"), "member")
    assert answered.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no summaries" in (answered.value.details() or "")
