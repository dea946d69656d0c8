"""AuthService over real gRPC and HTTP against a real api with authentication on (SQLite; one path on Postgres).

The api runs A1's authenticator (configured keys plus stored ones), A2's authorizer with the stored roles and
bindings, A3's gate and this service's handlers and audit log, as ``evalsi-api`` assembles them.
"""

from __future__ import annotations

import time
from typing import Any

import grpc
import pytest
from auth_api import AuthApi, pb

from evalsi.audit import purge_expired
from evalsi.audit.entry import AuditEntry
from evalsi.auth.api_keys import hash_api_key
from evalsi.stores.audit import AuditQuery
from evalsi.stores.identity import StoredApiKey


async def _audit(api: AuthApi, **filters: Any) -> list[AuditEntry]:
    await api.audit.flush()
    entries, _ = await api.store.list_audit(AuditQuery(**filters), page_size=1000)
    return entries


async def _refused(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def _key_lifecycle(api: AuthApi) -> None:
    created = await api.grpc("CreateApiKey", pb.CreateApiKeyRequest(
        name="collector", roles=["runner"], labels={"source": "agentgateway"}), key="admin")
    secret = created.secret
    assert secret.startswith("evk_") and len(secret) > 40
    assert created.key.prefix == secret[:12] and created.key.created_by == "apikey/admin"

    # Shown once: no later answer holds the key or its hash, only the short prefix.
    listed = await api.grpc("ListApiKeys", pb.ListApiKeysRequest(), key="admin")
    (stored,) = [k for k in listed.keys if k.source == "api"]
    assert (stored.name, list(stored.roles), dict(stored.labels)) == ("collector", ["runner"],
                                                                       {"source": "agentgateway"})
    every_answer = listed.SerializeToString() + (await api.grpc("ListApiKeys", pb.ListApiKeysRequest(
        include_revoked=True), key="admin")).SerializeToString()
    assert secret.encode() not in every_answer
    assert secret[12:].encode() not in every_answer
    assert hash_api_key(secret).removeprefix("sha256:").encode() not in every_answer

    # The key authenticates as its own principal, with its project role; its use is recorded.
    me = await api.grpc("WhoAmI", pb.WhoAmIRequest(), secret=secret)
    assert (me.id, me.kind, me.key_name) == ("apikey/support/collector", "apikey", "support/collector")
    assert list(me.roles["support"].roles) == ["runner"]
    await api.keys.flush()
    used = await api.store.get_api_key("support", "collector")
    assert used is not None and used.last_used_at is not None and used.last_used_at <= time.time()

    revoked = await api.grpc("RevokeApiKey", pb.RevokeApiKeyRequest(name="collector"), key="admin")
    assert revoked.HasField("revoke_time")
    error = await _refused(api.grpc("WhoAmI", pb.WhoAmIRequest(), secret=secret))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert secret not in (error.details() or "")
    changes = [e for e in await _audit(api, project="support") if e.resource == "key collector"]
    assert [(e.principal, e.decision) for e in changes] == [("apikey/admin", "allow")] * 2
    revoke, create = changes  # newest first
    assert create.old_value is None and create.new_value is not None and create.new_value["roles"] == ["runner"]
    assert revoke.old_value is not None and revoke.old_value["revoked_at"] is None
    assert revoke.new_value is not None and revoke.new_value["revoked_at"] is not None
    assert "key_hash" not in create.new_value and secret not in str(create.new_value)


async def test_api_keys_over_grpc_shown_once_used_and_revoked(auth_api: AuthApi) -> None:
    await _key_lifecycle(auth_api)


async def test_api_keys_on_postgres(auth_api_postgres: AuthApi) -> None:
    await _key_lifecycle(auth_api_postgres)


async def test_an_expired_key_stops_authenticating(auth_api: AuthApi) -> None:
    secret = "evk_" + "x" * 43
    await auth_api.store.create_api_key(StoredApiKey(
        project="support", name="old", key_hash=hash_api_key(secret), prefix=secret[:12], roles=("viewer",),
        expires_at=time.time() - 1, created_at=time.time() - 100))
    error = await _refused(auth_api.grpc("WhoAmI", pb.WhoAmIRequest(), secret=secret))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired" in (error.details() or "")
    status, body = await auth_api.http("POST", "/v1alpha1/auth/keys", {"name": "soon", "roles": ["viewer"],
                                                                       "expireTime": "2001-01-01T00:00:00Z"},
                                       key="admin")
    assert status == 400 and body["message"] == "expire_time: must be in the future"


async def test_every_rpc_over_http_as_the_owner(auth_api: AuthApi) -> None:
    http = auth_api.http
    status, created = await http("POST", "/v1alpha1/auth/projects", {"name": "checkout", "labels": {"team": "pay"}},
                                 key="root")
    assert status == 200 and created["source"] == "api" and created["createdBy"] == "apikey/root"
    status, again = await http("POST", "/v1alpha1/auth/projects", {"name": "checkout"}, key="root")
    assert status == 409 and "already exists" in again["message"]
    status, projects = await http("GET", "/v1alpha1/auth/projects", key="root")
    assert [(p["name"], p["source"]) for p in projects["projects"]] == [
        ("checkout", "api"), ("default", "builtin"), ("support", "config")]
    status, permissions = await http("GET", "/v1alpha1/auth/permissions", key="root")
    names = {p["name"]: p for p in permissions["permissions"]}
    assert names["projects.manage"]["installWide"] is True and names["runs.create"]["lowestRole"] == "runner"

    role = {"name": "reviewer", "permissions": ["runs.read"], "inherits": ["viewer"], "description": "reads"}
    status, made = await http("POST", "/v1alpha1/auth/roles", role, key="root")
    assert status == 200 and made["project"] == "support" and made["source"] == "api"
    status, updated = await http("PUT", "/v1alpha1/auth/roles/reviewer",
                                 {**role, "permissions": ["runs.read", "runs.create"]}, key="root")
    assert status == 200 and updated["permissions"] == ["runs.read", "runs.create"]
    status, roles = await http("GET", "/v1alpha1/auth/roles", key="root")
    by_name = {r["name"]: r["source"] for r in roles["roles"]}
    assert by_name["viewer"] == "builtin" and by_name["reviewer"] == "api"

    status, binding = await http("POST", "/v1alpha1/auth/bindings",
                                 {"role": "reviewer", "subject": "group:corp/reviewers"}, key="root")
    assert status == 200 and binding["id"].startswith("b_") and binding["project"] == "support"
    status, bindings = await http("GET", "/v1alpha1/auth/bindings", key="root")
    assert {(b["role"], b["subject"], b["source"]) for b in bindings["bindings"]} == {
        ("owner", "key:root", "config"), ("viewer", "group:corp/everyone", "config"),
        ("reviewer", "group:corp/reviewers", "api")}
    status, refused = await http("DELETE", "/v1alpha1/auth/roles/reviewer", key="root")
    assert status == 400 and "still bound" in refused["message"]
    status, _ = await http("DELETE", f"/v1alpha1/auth/bindings/{binding['id']}", key="root")
    assert status == 200
    status, deleted = await http("DELETE", "/v1alpha1/auth/roles/reviewer", key="root")
    assert status == 200 and deleted["name"] == "reviewer"

    status, events = await http("GET", "/v1alpha1/auth/audit?pageSize=3", key="root")
    assert status == 200 and len(events["events"]) == 3 and events["nextPageToken"]
    status, changes = await http("GET", "/v1alpha1/auth/audit?action=access.manage&pageSize=100", key="root")
    role_changes = [e for e in changes["events"] if e["resource"] == "role reviewer"]
    # Newest first: delete (old only), update (old and new), create (new only).
    assert [("oldValue" in e, "newValue" in e) for e in role_changes] == [(True, False), (True, True), (False, True)]
    assert role_changes[1]["oldValue"]["permissions"] == ["runs.read"]
    assert role_changes[1]["newValue"]["permissions"] == ["runs.read", "runs.create"]
    assert all(e["principal"] == "apikey/root" and e["source"] == "127.0.0.1" and e["requestId"]
               for e in role_changes)


async def test_a_stored_binding_takes_effect_on_the_next_request(auth_api: AuthApi) -> None:
    created = await auth_api.grpc("CreateApiKey", pb.CreateApiKeyRequest(name="bot", roles=["viewer"]), key="admin")
    error = await _refused(auth_api.grpc("ListAuditEvents", pb.ListAuditEventsRequest(), secret=created.secret))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    await auth_api.grpc("CreateBinding", pb.CreateBindingRequest(binding=pb.Binding(
        role="admin", subject="key:support/bot")), key="root")
    events = await auth_api.grpc("ListAuditEvents", pb.ListAuditEventsRequest(decision="deny"),
                                 secret=created.secret)
    (denied,) = [e for e in events.events if e.principal == "apikey/support/bot"]
    assert denied.action == "audit.read" and denied.deciding.startswith("default deny")


async def test_denied_calls_are_audited_with_the_deciding_rule(auth_api: AuthApi) -> None:
    error = await _refused(auth_api.grpc("CreateApiKey", pb.CreateApiKeyRequest(name="x", roles=["viewer"]),
                                         key="viewer"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "access.manage" in (error.details() or "") and "support" in (error.details() or "")
    (entry,) = await _audit(auth_api, decision="deny")
    assert (entry.principal, entry.principal_kind, entry.action, entry.project) == (
        "apikey/viewer", "apikey", "access.manage", "support")
    assert entry.deciding == "default deny: no role or allow rule grants access.manage in project support"
    assert entry.method == "evalsi.v1alpha1.AuthService/CreateApiKey"
    assert entry.source == "127.0.0.1" and entry.request_id
    assert await auth_api.store.list_api_keys("support") == []


async def test_escalation_is_refused_through_create_role_and_create_binding(auth_api: AuthApi) -> None:
    # admin holds everything but traces.write (ingest) and the install-wide permissions in support.
    error = await _refused(auth_api.grpc("CreateRole", pb.CreateRoleRequest(role=pb.Role(
        name="sneaky", permissions=["runs.read", "traces.write"])), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "traces.write: you do not hold it in project support" in (error.details() or "")
    error = await _refused(auth_api.grpc("CreateBinding", pb.CreateBindingRequest(binding=pb.Binding(
        role="ingest", subject="user:corp/mallory")), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    error = await _refused(auth_api.grpc("CreateRole", pb.CreateRoleRequest(role=pb.Role(
        name="everywhere", permissions=["runs.read"]), install_wide=True), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "only an owner" in (error.details() or "")
    error = await _refused(auth_api.grpc("CreateApiKey", pb.CreateApiKeyRequest(
        name="collector", roles=["ingest"]), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED

    assert await auth_api.store.list_roles(None) == [] and await auth_api.store.list_bindings(None) == []
    denied = await _audit(auth_api, decision="deny")
    assert len(denied) == 4 and all(e.deciding.startswith("escalation check") for e in denied)
    # What admin does hold, it may pass on.
    made = await auth_api.grpc("CreateRole", pb.CreateRoleRequest(role=pb.Role(
        name="runs-only", permissions=["runs.*"])), key="admin")
    assert made.name == "runs-only"


async def test_inputs_are_bounded_with_the_limit_named(auth_api: AuthApi) -> None:
    http = auth_api.http
    status, body = await http("POST", "/v1alpha1/auth/keys", {"name": "k" * 64, "roles": ["viewer"]}, key="admin")
    assert status == 400 and "is not an API key name" in body["message"] and "at most 63" in body["message"]
    labels = {f"l{i}": "v" for i in range(65)}
    status, body = await http("POST", "/v1alpha1/auth/keys", {"name": "k", "roles": ["viewer"], "labels": labels},
                              key="admin")
    assert status == 400 and body["message"] == "labels: 65 labels exceed the limit of 64"
    status, body = await http("GET", "/v1alpha1/auth/audit?pageSize=5000", key="admin")
    assert status == 400 and body["message"] == "page_size: 5000 is outside 1..1000"
    status, body = await http("POST", "/v1alpha1/auth/roles", {"name": "r", "permissions": ["runs.reed"]},
                              key="admin")
    assert status == 400 and "unknown permission 'runs.reed'" in body["message"] and "runs.read" in body["message"]
    status, body = await http("POST", "/v1alpha1/auth/projects", {"name": "no.dots"}, key="root")
    assert status == 400 and body["message"].startswith("name: 'no.dots' is not a valid project name")


async def test_whoami_and_lists_are_filtered_to_the_caller(auth_api: AuthApi) -> None:
    await auth_api.grpc("CreateProject", pb.CreateProjectRequest(name="checkout"), key="root")
    viewer = await auth_api.grpc("WhoAmI", pb.WhoAmIRequest(), key="viewer")
    assert (viewer.id, viewer.auth_enabled, list(viewer.projects)) == ("apikey/viewer", True, ["support"])
    assert list(viewer.roles["support"].roles) == ["viewer"]
    root = await auth_api.grpc("WhoAmI", pb.WhoAmIRequest(), key="root")
    assert list(root.roles["*"].roles) == ["owner"]
    assert list(root.projects) == ["checkout", "default", "support"]
    projects = await auth_api.grpc("ListProjects", pb.ListProjectsRequest(), key="viewer")
    assert [p.name for p in projects.projects] == ["support"]
    error = await _refused(auth_api.grpc("CreateProject", pb.CreateProjectRequest(name="mine"), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    error = await _refused(auth_api.grpc("ListAuditEvents", pb.ListAuditEventsRequest(all_projects=True),
                                         key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == "only an owner may read every project's audit log"


async def test_retention_purges_old_entries_only(auth_api: AuthApi) -> None:
    now = time.time()
    for age_days in (120, 91, 10):
        auth_api.audit.record(AuditEntry(principal="corp/al", principal_kind="user", action="runs.create",
                                         project="support", decision="allow", time=now - age_days * 86400))
    await auth_api.audit.flush()
    assert await purge_expired(auth_api.store.purge_audit, 2160 * 3600.0, now=now) == 2
    left = await _audit(auth_api, principal="corp/al")
    assert [round((now - e.time) / 86400) for e in left] == [10]


async def test_bindings_in_every_project_are_the_owners_and_inner_projects_must_agree(auth_api: AuthApi) -> None:
    everywhere = await auth_api.grpc("CreateBinding", pb.CreateBindingRequest(binding=pb.Binding(
        project="*", role="viewer", subject="group:corp/auditors")), key="root")
    assert everywhere.project == "*"
    admin_sees = await auth_api.grpc("ListBindings", pb.ListBindingsRequest(), key="admin")
    assert everywhere.id in {b.id for b in admin_sees.bindings}
    error = await _refused(auth_api.grpc("DeleteBinding", pb.DeleteBindingRequest(id=everywhere.id), key="admin"))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error.details() == "only an owner may delete a binding in every project (*)"
    deleted = await auth_api.grpc("DeleteBinding", pb.DeleteBindingRequest(id=everywhere.id), key="root")
    assert deleted.id == everywhere.id and await auth_api.store.list_bindings(None) == []
    error = await _refused(auth_api.grpc("DeleteBinding", pb.DeleteBindingRequest(id="b_nothing"), key="root"))
    assert error.code() == grpc.StatusCode.NOT_FOUND

    # The header says support: a role or binding naming another project is refused, not moved.
    error = await _refused(auth_api.grpc("CreateRole", pb.CreateRoleRequest(role=pb.Role(
        name="r", project="checkout", permissions=["runs.read"])), key="root"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == ("role.project: 'checkout' differs from the call's project 'support'; give one of "
                               "them, or the same in both")
    error = await _refused(auth_api.grpc("CreateBinding", pb.CreateBindingRequest(binding=pb.Binding(
        project="checkout", role="viewer", subject="user:corp/bo")), key="root"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_every_rpc_answers_on_both_transports(auth_api: AuthApi) -> None:
    from evalsi.api.table import AUTH_SERVICE

    # (RPC, gRPC request, HTTP verb and path, HTTP body): run in this order as the owner, once per transport,
    # with names that differ per transport.
    def calls(n: str) -> list[tuple[str, Any, str, str, dict[str, Any] | None]]:
        return [
            ("WhoAmI", pb.WhoAmIRequest(), "GET", "/v1alpha1/auth/whoami", None),
            ("ListProjects", pb.ListProjectsRequest(), "GET", "/v1alpha1/auth/projects", None),
            ("CreateProject", pb.CreateProjectRequest(name=f"p{n}"), "POST", "/v1alpha1/auth/projects",
             {"name": f"p{n}"}),
            ("ListPermissions", pb.ListPermissionsRequest(), "GET", "/v1alpha1/auth/permissions", None),
            ("ListRoles", pb.ListRolesRequest(), "GET", "/v1alpha1/auth/roles", None),
            ("CreateRole", pb.CreateRoleRequest(role=pb.Role(name=f"r{n}", permissions=["runs.read"])), "POST",
             "/v1alpha1/auth/roles", {"name": f"r{n}", "permissions": ["runs.read"]}),
            ("UpdateRole", pb.UpdateRoleRequest(role=pb.Role(name=f"r{n}", permissions=["runs.*"])), "PUT",
             f"/v1alpha1/auth/roles/r{n}", {"name": f"r{n}", "permissions": ["runs.*"]}),
            ("ListBindings", pb.ListBindingsRequest(), "GET", "/v1alpha1/auth/bindings", None),
            ("CreateBinding", pb.CreateBindingRequest(binding=pb.Binding(role=f"r{n}", subject="user:corp/x")),
             "POST", "/v1alpha1/auth/bindings", {"role": f"r{n}", "subject": "user:corp/x"}),
            ("DeleteBinding", None, "DELETE", "/v1alpha1/auth/bindings/{id}", None),
            ("DeleteRole", pb.DeleteRoleRequest(name=f"r{n}"), "DELETE", f"/v1alpha1/auth/roles/r{n}", None),
            ("CreateApiKey", pb.CreateApiKeyRequest(name=f"k{n}", roles=["viewer"]), "POST", "/v1alpha1/auth/keys",
             {"name": f"k{n}", "roles": ["viewer"]}),
            ("ListApiKeys", pb.ListApiKeysRequest(), "GET", "/v1alpha1/auth/keys", None),
            ("RevokeApiKey", pb.RevokeApiKeyRequest(name=f"k{n}"), "POST", f"/v1alpha1/auth/keys/k{n}:revoke", {}),
            ("ListAuditEvents", pb.ListAuditEventsRequest(), "GET", "/v1alpha1/auth/audit", None),
        ]

    binding_id = ""
    for rpc, request, *_ in calls("g"):
        if rpc == "DeleteBinding":
            request = pb.DeleteBindingRequest(id=binding_id)
        answer = await auth_api.grpc(rpc, request, key="root")
        binding_id = answer.id if rpc == "CreateBinding" else binding_id
    for rpc, _, verb, path, body in calls("h"):
        status, answer = await auth_api.http(verb, path.replace("{id}", binding_id), body, key="root")
        assert status == 200, (rpc, answer)
        binding_id = answer["id"] if rpc == "CreateBinding" else binding_id
    assert {rpc for rpc, *_ in calls("x")} == {method.name for method in AUTH_SERVICE.methods}
    # Each transport's changes are in the log, once each: in support a role x3, a binding x2 and a key x2; the
    # project's creation under the new project's name.
    changes = [e for e in await _audit(auth_api, project="support") if e.decision == "allow"]
    assert len(changes) == 2 * 7 and len(await _audit(auth_api, principal="apikey/root")) == 2 * 8
