"""OTLP exports behind the gate ask the external authorizer too: every project a batch writes to is one question
(``traces.write`` in that project), answered by a real Envoy ext_authz server on loopback."""

from __future__ import annotations

from typing import Any

import pytest
from external_servers import envoy_authz
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.auth.principal import Credentials, PermissionDenied
from evalsi.authz.actions import OTLP_GRPC_TRACES
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.config import load_authorization_config
from evalsi.authz.external import ExternalAuthorizer
from evalsi.gate.access import Gate
from evalsi.gate.otlp import admit_export


def batch(*projects: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for project in projects:
        attribute = request.resource_spans.add().resource.attributes.add()
        attribute.key, attribute.value.string_value = "evalsi.project", project
    return request


def only_support(request: Any) -> bool:
    return request.attributes.request.http.headers["x-evalsi-project"] == "support"


async def test_each_project_of_a_batch_is_asked_and_one_refusal_refuses_the_batch() -> None:
    secret = new_api_key()
    auth = load_auth_config({"api_keys": {"keys": [
        {"name": "collector", "key": hash_api_key(secret), "roles": {"*": ["ingest"]}}]}})
    async with envoy_authz(only_support) as server:
        config = load_authorization_config({"ext_authz": {"grpc": {"address": server.address}, "timeout": "5s"}})
        assert config.external is not None
        external = ExternalAuthorizer.from_config(config.external)
        gate = Gate(Authenticator(auth), Authorizer(authorization=config), external=external)
        credentials = Credentials(transport="grpc", headers={"authorization": f"Bearer {secret}"}, peer="127.0.0.1")
        try:
            fallback = await admit_export(gate, OTLP_GRPC_TRACES, credentials, batch("support"), header_project="",
                                          default_project="default")
            assert fallback == "default"
            assert [r.attributes.request.http.headers["x-evalsi-action"] for r in server.requests] == ["traces.write"]
            with pytest.raises(PermissionDenied):
                await admit_export(gate, OTLP_GRPC_TRACES, credentials, batch("support", "billing"),
                                   header_project="", default_project="default")
            asked = sorted(r.attributes.request.http.headers["x-evalsi-project"] for r in server.requests)
            assert asked == ["billing", "support"]  # support's answer came from the cache the second time
            assert all(secret not in str(r) for r in server.requests)
        finally:
            await external.aclose()
