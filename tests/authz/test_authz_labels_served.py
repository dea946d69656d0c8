"""Labels decide what a label-conditioned role reads, through a real api over gRPC: a role whose condition is
``resource.labels.app == "checkout"`` sees only checkout runs and policies, in lists and in gets, and writes only
checkout policies (applying over, or deleting, another app's policy is refused on the stored policy's labels)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from evalsi.api import (
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    MonitorHandlers,
    RunHandlers,
    ServerConfig,
    build_table,
)
from evalsi.audit import AuditLog
from evalsi.audit.decisions import decision_recorder
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.authz.authorizer import Authorizer
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.stored_access import LiveAuthorizer
from evalsi.policy import parse_policy_text
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.stores.audit import AuditQuery
from evalsi.v1alpha1.monitor_service_pb2 import (
    ApplyPolicyRequest,
    DeletePolicyRequest,
    GetPolicyRequest,
    ListPoliciesRequest,
)
from evalsi.v1alpha1.monitor_service_pb2_grpc import MonitorServiceStub
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import RUN_STATE_RUNNING, Run
from evalsi.v1alpha1.run_service_pb2 import GetRunRequest, ListRunsRequest
from evalsi.v1alpha1.run_service_pb2_grpc import RunServiceStub

CHECKOUT = 'resource.labels.app == "checkout"'
KEYS = {"checkout": ["checkout-team"], "lead": ["admin"]}
RBAC = {"roles": [{"name": "checkout-team", "permissions": ["runs.read", "policies.read", "policies.write"],
                   "condition": CHECKOUT}]}
REGISTRY = Registry.from_entry_points()


def policy(name: str, app: str | None) -> OnlineEvalPolicy:
    labels = f", labels: {{app: {app}}}" if app else ""
    return parse_policy_text(f"""
apiVersion: evals.si/v1alpha1
kind: OnlineEvalPolicy
metadata: {{name: {name}, project: p{labels}}}
spec:
  sampling: {{rate: 1.0}}
  cascade:
    - {{ref: builtin/contains, alias: polite, params: {{values: ["thanks"]}}}}
""", source=f"{name}.yaml")


class Served:
    def __init__(self, server: ApiServer, store: SqlMetadataStore, audit: AuditLog, secrets: dict[str, str]) -> None:
        self.server, self.store, self.audit, self.secrets = server, store, audit, secrets

    async def call(self, service: Any, method: str, request: Any, key: str) -> Any:
        metadata = [("x-evalsi-project", "p"), ("authorization", f"Bearer {self.secrets[key]}")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.server.grpc_port}") as channel:
            return await getattr(service(channel), method)(request, metadata=metadata, timeout=10)

    async def refused(self, service: Any, method: str, request: Any, key: str) -> grpc.StatusCode:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await self.call(service, method, request, key)
        return caught.value.code()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(store, SqlMetadataStore)
    secrets = {name: new_api_key() for name in KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": {"p": roles}} for name, roles in KEYS.items()]}})
    authorizer = LiveAuthorizer(Authorizer.from_config(RBAC, {}), store, refresh_s=3600)
    await authorizer.start()
    audit = AuditLog(store.append_audit)
    audit.start()

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used here")

    runs = RunHandlers(store=store, objects=None, control=refuse, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=refuse)  # type: ignore[arg-type]
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=REGISTRY), runs=runs,
                        catalog=CatalogHandlers(REGISTRY), monitor=MonitorHandlers(store, None, registry=REGISTRY))
    gate = Gate(Authenticator(auth), authorizer, on_decision=decision_recorder(audit))
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
    await server.start()
    for run_id, app in (("run-checkout", "checkout"), ("run-search", "search"), ("run-unlabelled", None)):
        await store.create_run(Run(id=run_id, project="p", name=run_id, state=RUN_STATE_RUNNING,
                                   created_by="apikey/lead", labels={"app": app} if app else {}))
    for name, app in (("checkout-polite", "checkout"), ("search-polite", "search"), ("bare", None)):
        await store.put_policy("p", policy(name, app))
    try:
        yield Served(server, store, audit, secrets)
    finally:
        await server.stop()
        await authorizer.close()
        await audit.close()
        await store.close()


async def test_a_label_conditioned_role_lists_and_reads_only_its_runs(served: Served) -> None:
    listed = await served.call(RunServiceStub, "ListRuns", ListRunsRequest(), "checkout")
    assert [run.id for run in listed.runs] == ["run-checkout"]
    everything = await served.call(RunServiceStub, "ListRuns", ListRunsRequest(), "lead")
    assert sorted(run.id for run in everything.runs) == ["run-checkout", "run-search", "run-unlabelled"]
    assert (await served.call(RunServiceStub, "GetRun", GetRunRequest(id="run-checkout"), "checkout")).id
    for other in ("run-search", "run-unlabelled"):
        assert await served.refused(RunServiceStub, "GetRun", GetRunRequest(id=other), "checkout") == \
            grpc.StatusCode.PERMISSION_DENIED


async def test_a_label_conditioned_role_lists_and_reads_only_its_policies(served: Served) -> None:
    listed = await served.call(MonitorServiceStub, "ListPolicies", ListPoliciesRequest(), "checkout")
    assert [p.name for p in listed.policies] == ["checkout-polite"]
    everything = await served.call(MonitorServiceStub, "ListPolicies", ListPoliciesRequest(), "lead")
    assert [p.name for p in everything.policies] == ["bare", "checkout-polite", "search-polite"]
    got = await served.call(MonitorServiceStub, "GetPolicy", GetPolicyRequest(name="checkout-polite"), "checkout")
    assert got.policy.metadata.labels["app"] == "checkout"
    for other in ("search-polite", "bare"):
        assert await served.refused(MonitorServiceStub, "GetPolicy", GetPolicyRequest(name=other), "checkout") == \
            grpc.StatusCode.PERMISSION_DENIED
    # A policy the caller may not see reads as refused, one that does not exist as not found.
    assert await served.refused(MonitorServiceStub, "GetPolicy", GetPolicyRequest(name="nope"), "checkout") == \
        grpc.StatusCode.NOT_FOUND


async def test_policy_writes_are_decided_on_the_stored_and_the_applied_labels(served: Served) -> None:
    # Relabelling another app's policy as checkout would take it over: refused on the stored policy's labels.
    takeover = policy("search-polite", "checkout")
    assert await served.refused(MonitorServiceStub, "ApplyPolicy", ApplyPolicyRequest(policy=takeover),
                                "checkout") == grpc.StatusCode.PERMISSION_DENIED
    # A new policy labelled outside the condition is refused on its own labels.
    assert await served.refused(MonitorServiceStub, "ApplyPolicy", ApplyPolicyRequest(policy=policy("new", "search")),
                                "checkout") == grpc.StatusCode.PERMISSION_DENIED
    assert await served.refused(MonitorServiceStub, "DeletePolicy", DeletePolicyRequest(name="search-polite"),
                                "checkout") == grpc.StatusCode.PERMISSION_DENIED
    stored = await served.store.get_policy("p", "search-polite")
    assert stored is not None and stored.policy.metadata.labels["app"] == "search"

    applied = await served.call(MonitorServiceStub, "ApplyPolicy", ApplyPolicyRequest(policy=policy("new", "checkout")),
                                "checkout")
    assert (applied.name, applied.generation) == ("new", 1)
    changed = policy("new", "checkout")
    changed.spec.sampling.rate = 0.5
    replaced = await served.call(MonitorServiceStub, "ApplyPolicy", ApplyPolicyRequest(policy=changed), "checkout")
    assert (replaced.generation, replaced.changed) == (2, True)
    deleted = await served.call(MonitorServiceStub, "DeletePolicy", DeletePolicyRequest(name="checkout-polite"),
                                "checkout")
    assert deleted.name == "checkout-polite"
    assert await served.store.get_policy("p", "checkout-polite") is None

    await served.audit.flush()
    entries, _ = await served.store.list_audit(AuditQuery(project="p", action="policies.write"))
    decisions = sorted((e.decision, e.principal) for e in entries)
    # The refusals, and the allowed writes audited once each by the handler's final decision (not the gate's).
    assert decisions.count(("deny", "apikey/checkout")) == 3
    assert decisions.count(("allow", "apikey/checkout")) == 3  # a replace too is one entry
