"""Projects, API keys, custom roles, bindings and the audit log in the metadata store, on SQLite and Postgres."""

from __future__ import annotations

import pytest

from evalsi.audit import AuditEntry
from evalsi.errors import BadInputError
from evalsi.stores import SqlMetadataStore
from evalsi.stores.audit import AuditQuery
from evalsi.stores.identity import (
    INSTALL_WIDE,
    AlreadyExistsError,
    StoredApiKey,
    StoredBinding,
    StoredProject,
    StoredRole,
)

HASH_A = "sha256:" + "a" * 64
HASH_B = "sha256:" + "b" * 64


async def test_projects_are_created_once(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.create_project(StoredProject("support", "the support agent", {"team": "cx"}, 10.0, "corp/al"))
    with pytest.raises(AlreadyExistsError, match="project 'support' already exists"):
        await metadata_store.create_project(StoredProject("support", created_at=11.0))
    (stored,) = await metadata_store.list_projects()
    assert stored == StoredProject("support", "the support agent", {"team": "cx"}, 10.0, "corp/al")


async def test_api_keys_by_hash_revoke_and_last_use(metadata_store: SqlMetadataStore) -> None:
    key = StoredApiKey(project="support", name="collector", key_hash=HASH_A, prefix="evk_abcdefgh",
                       roles=("ingest",), labels={"source": "agentgateway"}, expires_at=None, created_at=5.0,
                       created_by="corp/al")
    await metadata_store.create_api_key(key)
    # The name is taken per project; another project may use it, with another key.
    with pytest.raises(AlreadyExistsError, match="'collector' already exists in project 'support'"):
        await metadata_store.create_api_key(StoredApiKey("support", "collector", HASH_B, "evk_x", created_at=6.0))
    await metadata_store.create_api_key(StoredApiKey("checkout", "collector", HASH_B, "evk_y", created_at=6.0))
    assert await metadata_store.find_api_key(HASH_A) == key
    assert [k.name for k in await metadata_store.list_api_keys("support")] == ["collector"]

    await metadata_store.record_key_use({HASH_A: 100.0})
    await metadata_store.record_key_use({HASH_A: 90.0})  # an older use never moves it back
    found = await metadata_store.find_api_key(HASH_A)
    assert found is not None and found.last_used_at == 100.0

    revoked = await metadata_store.revoke_api_key("support", "collector", 200.0)
    assert revoked is not None and revoked.revoked_at == 200.0
    again = await metadata_store.revoke_api_key("support", "collector", 300.0)
    assert again is not None and again.revoked_at == 200.0  # the first revocation time stays
    assert await metadata_store.find_api_key(HASH_A) is None
    assert await metadata_store.list_api_keys("support") == []
    assert [k.name for k in await metadata_store.list_api_keys("support", include_revoked=True)] == ["collector"]
    assert await metadata_store.revoke_api_key("support", "nope", 1.0) is None


async def test_roles_update_returns_old_and_new(metadata_store: SqlMetadataStore) -> None:
    role = StoredRole("support", "reviewer", ("runs.read",), ("viewer",), "", "reads runs", 1.0, 1.0, "corp/al")
    await metadata_store.create_role(role)
    await metadata_store.create_role(StoredRole(INSTALL_WIDE, "auditor", ("audit.read",), created_at=1.0,
                                                updated_at=1.0))
    await metadata_store.create_role(StoredRole("checkout", "reviewer", ("runs.read",), created_at=1.0,
                                                updated_at=1.0))
    with pytest.raises(AlreadyExistsError, match="role 'reviewer' already exists in project 'support'"):
        await metadata_store.create_role(role)
    assert [(r.project, r.name) for r in await metadata_store.list_roles("support")] == [
        ("", "auditor"), ("support", "reviewer")]
    changed = StoredRole("support", "reviewer", ("runs.read", "runs.create"), condition="true", updated_at=2.0)
    result = await metadata_store.update_role(changed)
    assert result is not None
    old, new = result
    assert old.permissions == ("runs.read",) and new.permissions == ("runs.read", "runs.create")
    assert new.created_by == "corp/al" and new.created_at == 1.0  # kept from the first definition
    assert await metadata_store.get_role("support", "reviewer") == new
    assert await metadata_store.update_role(StoredRole("support", "ghost", ())) is None
    deleted = await metadata_store.delete_role("support", "reviewer")
    assert deleted == new
    assert await metadata_store.get_role("support", "reviewer") is None


async def test_bindings_are_unique_per_subject_and_role(metadata_store: SqlMetadataStore) -> None:
    first = StoredBinding("b_1", "support", "editor", "group:corp/eng", 1.0, "corp/al")
    await metadata_store.create_binding(first)
    await metadata_store.create_binding(StoredBinding("b_2", "*", "viewer", "group:corp/all", 1.0))
    await metadata_store.create_binding(StoredBinding("b_3", "checkout", "viewer", "user:corp/bo", 1.0))
    with pytest.raises(AlreadyExistsError, match="group:corp/eng already holds role 'editor'"):
        await metadata_store.create_binding(StoredBinding("b_4", "support", "editor", "group:corp/eng", 2.0))
    assert [b.id for b in await metadata_store.list_bindings("support")] == ["b_2", "b_1"]
    assert [b.id for b in await metadata_store.list_bindings(None, role="viewer")] == ["b_2", "b_3"]
    assert await metadata_store.delete_binding("checkout", "b_1") is None  # another project's binding
    assert await metadata_store.delete_binding("support", "b_1") == first
    assert [b.id for b in await metadata_store.list_bindings("support")] == ["b_2"]


def _audit(n: int, **fields: object) -> AuditEntry:
    values: dict[str, object] = {"principal": "corp/al", "principal_kind": "user", "action": "runs.create",
                                 "project": "support", "decision": "allow", "time": 1000.0 + n,
                                 "request_id": f"r{n}"}
    values.update(fields)
    return AuditEntry(**values)  # type: ignore[arg-type]


async def test_audit_log_filters_pages_and_purges(metadata_store: SqlMetadataStore) -> None:
    entries = [_audit(n) for n in range(5)]
    entries.append(_audit(5, decision="deny", deciding="default deny", principal="corp/bo", project="checkout",
                          action="roles.update", old_value={"permissions": ["runs.read"]},
                          new_value={"permissions": ["*"]}))
    await metadata_store.append_audit(entries)
    page, token = await metadata_store.list_audit(AuditQuery(project="support"), page_size=3)
    assert [e.request_id for e in page] == ["r4", "r3", "r2"]  # newest first
    rest, last = await metadata_store.list_audit(AuditQuery(project="support"), page_size=3, page_token=token)
    assert [e.request_id for e in rest] == ["r1", "r0"] and last == ""
    with pytest.raises(BadInputError, match="different query"):
        await metadata_store.list_audit(AuditQuery(project="checkout"), page_size=3, page_token=token)
    with pytest.raises(BadInputError, match="page_size 5000 is out of range; accepted: 1 to 1000"):
        await metadata_store.list_audit(AuditQuery(), page_size=5000)

    (denied,) = (await metadata_store.list_audit(AuditQuery(decision="deny")))[0]
    assert (denied.principal, denied.action, denied.deciding) == ("corp/bo", "roles.update", "default deny")
    assert denied.old_value == {"permissions": ["runs.read"]} and denied.new_value == {"permissions": ["*"]}
    assert denied.id > 0
    window, _ = await metadata_store.list_audit(AuditQuery(start=1001.0, end=1003.0))
    assert [e.request_id for e in window] == ["r2", "r1"]

    assert await metadata_store.purge_audit(1003.0) == 3
    left, _ = await metadata_store.list_audit(AuditQuery())
    assert [e.request_id for e in left] == ["r5", "r4", "r3"]
