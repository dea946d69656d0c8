"""CaseService behind the gate of a real api: a viewer reads cases and reports but cannot upload one, a runner
uploads, a role conditioned on the tenant reads only that tenant's, and each upload lands in the audit log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from case_corpus import run_report, write_corpus

from evalsi.api import (
    ApiServer,
    CaseHandlers,
    CatalogHandlers,
    EvaluationHandlers,
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
from evalsi.cases.store import import_corpus, read_corpus
from evalsi.client import Client
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.stored_access import LiveAuthorizer
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.stores.audit import AuditQuery

KEYS = {"vera": ["viewer"], "rui": ["runner"], "bea": ["store-b-reader"]}
RBAC = {"roles": [{"name": "store-b-reader", "permissions": ["cases.read"],
                   "condition": 'resource.tenant == "store-b"'}]}


@dataclass
class Served:
    url: str
    secrets: dict[str, str]
    audit: AuditLog
    store: SqlMetadataStore

    def client(self, key: str) -> Client:
        return Client(self.url, project="p", api_key=self.secrets[key])


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    store = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(store, SqlMetadataStore)
    await import_corpus(store, "p", read_corpus(write_corpus(tmp_path / "data")), keep_existing=False)
    secrets = {name: new_api_key() for name in KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": {"p": roles}} for name, roles in KEYS.items()]}})
    authorizer = LiveAuthorizer(Authorizer.from_config(RBAC, None), store, refresh_s=3600)
    await authorizer.start()
    audit = AuditLog(store.append_audit)
    audit.start()

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used here")

    registry = Registry.from_entry_points()
    runs = RunHandlers(store=store, objects=None, control=refuse, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=refuse)
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry), cases=CaseHandlers(store))
    gate = Gate(Authenticator(auth), authorizer, on_decision=decision_recorder(audit))
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
    await server.start()
    try:
        yield Served(f"http://127.0.0.1:{server.http_port}", secrets, audit, store)
    finally:
        await server.stop()
        await authorizer.close()
        await audit.close()
        await store.close()


async def test_viewers_read_runners_upload_and_tenant_conditions_hold(served: Served, tmp_path: Path) -> None:
    code, output, path = await asyncio.to_thread(run_report, tmp_path / "run")
    assert code == 3, output
    report = json.loads(path.read_text(encoding="utf-8"))

    def calls() -> str:
        with served.client("vera") as viewer:
            assert [c.id for c in viewer.cases.list()] == ["cart", "greet", "coupon", "track-order"]
            with pytest.raises(BadInputError, match=r"cases\.write"):
                viewer.cases.upload_report(report)
        with served.client("rui") as runner:
            uploaded = runner.cases.upload_report(report, name="ci")
            assert uploaded.created and uploaded.uploaded_by == "apikey/rui"
        with served.client("vera") as viewer:
            assert [r.id for r in viewer.cases.reports()] == [uploaded.id]
        with served.client("bea") as tenant_b:
            assert [c.id for c in tenant_b.cases.list(tenant="store-b")] == ["secret"]
            with pytest.raises(BadInputError, match=r"cases\.read"):
                list(tenant_b.cases.list())  # platform's: the condition does not hold
            with pytest.raises(BadInputError, match=r"cases\.read"):
                tenant_b.cases.report(uploaded.id)
        return uploaded.id

    report_id = await asyncio.to_thread(calls)
    await served.audit.flush()
    entries, _ = await served.store.list_audit(AuditQuery(project="p", action="cases.write"))
    uploads = [(e.principal, e.decision) for e in entries]
    assert sorted(uploads) == [("apikey/rui", "allow"), ("apikey/vera", "deny")], report_id
