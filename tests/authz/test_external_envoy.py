"""External authorization against a real Envoy ext_authz gRPC server on loopback (grpc.aio serving
``envoy.service.auth.v3.Authorization/Check``, as OPA's Envoy plugin does): what the CheckRequest carries (and
never the caller's token), allow on status OK, deny otherwise, require vs decide, caching, and failing closed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
from external_servers import Tls, envoy_authz

from evalsi.auth.principal import Principal
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.config import load_authorization_config
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.authz.external import ExternalAuthorizer

VIEWER = Principal(kind="apikey", provider="apikey", subject="ci", key_name="ci", roles={"p": ("viewer",)},
                   labels={"team": "a"})
NOBODY = Principal(kind="user", provider="corp", subject="zed")
TOKEN = "evk_secret_token_never_forwarded"


def opa_like(request: Any) -> bool:
    """A policy in the shape OPA's Envoy plugin users write: read the x-evalsi-* headers and context_extensions."""
    http = request.attributes.request.http
    extensions = request.attributes.context_extensions
    return (http.headers["x-evalsi-action"] == "runs.read"
            and http.headers["x-evalsi-principal"] in {"apikey/ci", "corp/zed"}
            and extensions.get("resource.run.labels.team") == "a")


def build(address: str, mode: str = "require", tls: dict[str, str] | None = None,
          **extra: Any) -> tuple[Authorizer, ExternalAuthorizer]:
    grpc_section: dict[str, Any] = {"address": address} if tls is None else {"address": address, "tls": tls}
    config = load_authorization_config({
        "rules": [{"deny": '"banned" in principal.groups'}],
        "ext_authz": {"grpc": grpc_section, "mode": mode, "timeout": "5s", **extra}})  # generous under load
    assert config.external is not None
    return Authorizer(authorization=config), ExternalAuthorizer.from_config(config.external)


def read_run(principal: Principal, team: str = "a", run: str = "r1") -> AccessRequest:
    # The gate hands the authorizer the headers without credentials; a caller's spoofed x-evalsi-principal and
    # its bearer token must not reach the PDP either way.
    headers = {"x-evalsi-principal": "corp/admin", "user-agent": "grpc-python"}
    return AccessRequest(principal, "runs.read", "p",
                         {"project": "p", "labels": {}, "run": {"id": run, "labels": {"team": team}}},
                         method="/evalsi.v1alpha1.RunService/GetRun", protocol="grpc", headers=headers,
                         source="127.0.0.1:40000")


async def decide(local: Authorizer, external: ExternalAuthorizer, access: AccessRequest) -> Decision:
    return await external.check(access, local.decide(access))


async def test_the_check_request_carries_the_principal_action_project_and_resource_never_a_token() -> None:
    async with envoy_authz(opa_like) as server:
        local, external = build(server.address)
        try:
            decision = await decide(local, external, read_run(VIEWER))
            assert decision.allowed, decision.deciding
            assert decision.deciding.startswith("role viewer")
            assert f"ext_authz gRPC {server.address} allowed" in decision.deciding
            attributes = server.requests[0].attributes
            assert attributes.source.address.socket_address.address == "127.0.0.1"
            assert attributes.source.address.socket_address.port_value == 40000
            assert attributes.source.principal == "apikey/ci"
            http = attributes.request.http
            assert http.method == "POST" and http.path == "/evalsi.v1alpha1.RunService/GetRun"
            assert dict(http.headers) == {"x-evalsi-principal": "apikey/ci", "x-evalsi-action": "runs.read",
                                          "x-evalsi-project": "p"}
            extensions = dict(attributes.context_extensions)
            assert extensions["resource.type"] == "runs" and extensions["resource.id"] == "r1"
            assert extensions["resource.run.id"] == "r1" and extensions["partial"] == "false"
            structured = attributes.metadata_context.filter_metadata["evalsi"]
            assert structured["subject"]["properties"]["labels"]["team"] == "a"
            assert structured["subject"]["properties"]["key_name"] == "ci"
            assert TOKEN not in str(server.requests[0]) and "authorization" not in str(server.requests[0])
        finally:
            await external.aclose()


async def test_a_non_ok_status_denies_with_its_reason_and_mode_decide_is_final_after_local_deny_rules() -> None:
    async with envoy_authz(opa_like) as server:
        local, external = build(server.address)
        decider_local, decider = build(server.address, "decide")
        try:
            denied = await decide(local, external, read_run(VIEWER, team="b"))
            assert not denied.allowed
            assert denied.deciding == (f"ext_authz gRPC {server.address} denied: denied by policy "
                                       "(ext_authz mode require)")

            granted = await decide(decider_local, decider, read_run(NOBODY))  # no local role
            assert granted.allowed
            assert granted.deciding == f"ext_authz gRPC {server.address} allowed (ext_authz mode decide)"
            asked = len(server.requests)
            banned = Principal(kind="user", provider="corp", subject="zed", groups=("banned",))
            assert not (await decide(decider_local, decider, read_run(banned))).allowed
            assert len(server.requests) == asked
        finally:
            await external.aclose()
            await decider.aclose()


async def test_cached_then_fail_closed_on_deadline_and_on_an_error_status() -> None:
    async with envoy_authz(opa_like) as server:
        local, external = build(server.address, "decide")
        hasty = ExternalAuthorizer(replace(external.config, timeout_s=0.1), external.point, cache=external.cache)
        try:
            await decide(local, external, read_run(VIEWER))
            again = await decide(local, external, read_run(VIEWER))
            assert again.allowed and again.trace[-1].endswith("(cached)")
            assert len(server.requests) == 1

            server.delay_s = 3.0
            slow = await decide(local, hasty, read_run(VIEWER, run="r2"))
            assert not slow.allowed
            assert slow.deciding == (f"ext_authz gRPC {server.address} failed (no answer within 100ms): "
                                     "denied (fail closed)")
            server.delay_s = 0.0
            server.fail_code = grpc.StatusCode.INTERNAL
            broken = await decide(local, external, read_run(VIEWER, run="r3"))
            assert not broken.allowed and "Check failed: INTERNAL: policy engine unavailable" in broken.deciding
            server.fail_code = None
            assert (await decide(local, external, read_run(VIEWER, run="r2"))).allowed  # failures are not cached
        finally:
            await external.aclose()


async def test_mutual_tls_to_the_ext_authz_server(tmp_path: Path) -> None:
    tls = Tls.create()
    files = {"ca_file": tls.ca, "cert_file": tls.client_cert, "key_file": tls.client_key}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
    async with envoy_authz(opa_like, tls) as server:
        local, external = build(server.address, tls={name: str(tmp_path / name) for name in files})
        # Trusting the CA but presenting no client certificate: the handshake fails, and so the check (closed).
        anonymous_local, anonymous = build(server.address, tls={"ca_file": str(tmp_path / "ca_file")},
                                           timeout="2s")
        try:
            decision = await decide(local, external, read_run(VIEWER))
            assert decision.allowed, decision.deciding
            assert len(server.requests) == 1
            refused = await decide(anonymous_local, anonymous, read_run(VIEWER, run="r2"))
            assert not refused.allowed and "denied (fail closed)" in refused.deciding
            assert len(server.requests) == 1
        finally:
            await external.aclose()
            await anonymous.aclose()
