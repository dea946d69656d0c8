"""External authorization through a real api: GetRun over gRPC with an AuthZEN PDP in mode decide. The gate asks
the PDP (its decision is partial: the run is not loaded yet), then GetRun's handler asks again about the stored
run; an external allow grants a key with no role, an external deny refuses a local role, a failing PDP refuses
everything, and every refusal is in the audit log naming the PDP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from external_servers import AuthzenPdp, authzen_pdp

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.audit import AuditLog
from evalsi.audit.decisions import decision_recorder
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.config import load_authorization_config
from evalsi.authz.external import ExternalAuthorizer
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.stores.audit import AuditQuery
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, Run
from evalsi.v1alpha1.run_service_pb2 import GetRunRequest
from evalsi.v1alpha1.run_service_pb2_grpc import RunServiceStub

KEYS: dict[str, dict[str, list[str]]] = {"alice": {"p": ["runner"]}, "outsider": {}}


def policy(body: dict[str, Any]) -> bool:
    """The outsider may read alice's runs; nobody else may read anything. The gate's question is partial (no
    run attributes yet): the PDP lets it through to the handler's question about the stored run."""
    if body["subject"]["id"] != "apikey/outsider" or body["action"]["name"] != "runs.read":
        return False
    run = body["resource"]["properties"].get("run", {})
    return bool(body["context"]["partial"]) or run.get("created_by") == "apikey/alice"


class Served:
    def __init__(self, server: ApiServer, store: SqlMetadataStore, audit: AuditLog, pdp: AuthzenPdp,
                 secrets: dict[str, str]) -> None:
        self.server, self.store, self.audit, self.pdp, self.secrets = server, store, audit, pdp, secrets

    async def get_run(self, run_id: str, key: str) -> Run:
        metadata = [("x-evalsi-project", "p"), ("authorization", f"Bearer {self.secrets[key]}")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.server.grpc_port}") as channel:
            return await RunServiceStub(channel).GetRun(GetRunRequest(id=run_id), metadata=metadata, timeout=10)

    async def refused(self, run_id: str, key: str) -> grpc.StatusCode:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await self.get_run(run_id, key)
        return caught.value.code()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(store, SqlMetadataStore)
    secrets = {name: new_api_key() for name in KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": roles} for name, roles in KEYS.items()]}})
    audit = AuditLog(store.append_audit)
    audit.start()

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used here")

    registry = Registry.from_entry_points()
    runs = RunHandlers(store=store, objects=None, control=refuse, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=refuse)
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry))
    async with authzen_pdp(policy) as pdp:
        # A generous deadline: under load a loopback answer can take longer than the 200ms default.
        config = load_authorization_config({"ext_authz": {"authzen": {"url": pdp.url}, "mode": "decide",
                                                          "timeout": "5s"}})
        assert config.external is not None
        external = ExternalAuthorizer.from_config(config.external)
        gate = Gate(Authenticator(auth), Authorizer(authorization=config), on_decision=decision_recorder(audit),
                    external=external)
        server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
        await server.start()
        for run_id, owner in (("run-alice", "apikey/alice"), ("run-bob", "apikey/bob")):
            await store.create_run(Run(id=run_id, project="p", name=run_id, state=RUN_STATE_RUNNING,
                                       created_by=owner))
        try:
            yield Served(server, store, audit, pdp, secrets)
        finally:
            await server.stop()
            await external.aclose()
            await audit.close()
            await store.close()


async def test_the_pdp_decides_getrun_at_the_gate_and_on_the_stored_run(served: Served) -> None:
    run = await served.get_run("run-alice", "outsider")  # no role at all: the PDP grants it
    assert run.id == "run-alice"
    gate_question, stored_question = served.pdp.requests
    assert gate_question["context"]["partial"] is True
    assert stored_question["context"]["partial"] is False
    assert stored_question["resource"]["properties"]["run"]["created_by"] == "apikey/alice"
    assert all(served.secrets["outsider"] not in str(body) for body in served.pdp.requests)

    assert await served.refused("run-bob", "outsider") == grpc.StatusCode.PERMISSION_DENIED  # the stored run
    assert await served.refused("run-alice", "alice") == grpc.StatusCode.PERMISSION_DENIED  # a role, PDP says no

    await served.audit.flush()
    entries, _ = await served.store.list_audit(AuditQuery(project="p", action="runs.read"))
    denied = {e.principal: e for e in entries if e.decision == "deny"}
    assert set(denied) == {"apikey/outsider", "apikey/alice"}
    assert denied["apikey/outsider"].deciding == (f"AuthZEN PDP {served.pdp.url} denied: not on the list "
                                                  "(ext_authz mode decide)")


async def test_a_failing_pdp_refuses_through_the_api_and_the_refusal_is_audited(served: Served) -> None:
    served.pdp.fail_status = 503
    assert await served.refused("run-alice", "outsider") == grpc.StatusCode.PERMISSION_DENIED
    await served.audit.flush()
    entries, _ = await served.store.list_audit(AuditQuery(project="p", action="runs.read"))
    assert [e.deciding for e in entries] == [f"AuthZEN PDP {served.pdp.url} failed (ExternalAuthorizerError: the "
                                             "PDP answered HTTP 503): denied (fail closed)"]
