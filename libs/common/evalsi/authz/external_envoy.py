"""Envoy's external authorization over gRPC, as a client: ``envoy.service.auth.v3.Authorization/Check``, the API
OPA's Envoy plugin (and any ext_authz server) serves.

The question becomes a ``CheckRequest`` whose ``AttributeContext`` carries:

- ``source``: the caller's IP address, and the principal's id as ``source.principal``;
- ``request.http``: ``POST`` to the RPC's path, with the headers ``x-evalsi-principal``, ``x-evalsi-action`` and
  ``x-evalsi-project`` (the authenticated principal's id, the action and the project decided). The caller's own
  headers are not forwarded, and never its token or API key: the PDP is told who was authenticated, not handed
  the credential (an OPA policy reads the headers above instead of decoding a JWT);
- ``context_extensions``: the resource as flat strings (``resource.type``, ``resource.id``, ``resource.run.id``,
  ``resource.labels.team`` ...; lists and other values as JSON) and ``partial``;
- ``metadata_context.filter_metadata["evalsi"]``: the whole AuthZEN-shaped question as a Struct (subject with its
  groups, claims and roles, action, resource, context), for policies that want structure.

``CheckResponse.status.code == 0`` (OK) allows; any other code denies, with ``status.message`` (or the denied
response's body) as the reason.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc

from evalsi.authz.external_answer import ExternalAnswer, ExternalAuthorizerError
from evalsi.authz.external_config import EnvoyEndpoint, GrpcTls

PRINCIPAL_HEADER = "x-evalsi-principal"
ACTION_HEADER = "x-evalsi-action"
PROJECT_HEADER = "x-evalsi-project"
CHECK_METHOD = "/envoy.service.auth.v3.Authorization/Check"


class EnvoyDecisionPoint:
    def __init__(self, endpoint: EnvoyEndpoint) -> None:
        self.endpoint = endpoint
        self._channel: grpc.aio.Channel | None = None

    def describe(self) -> str:
        return self.endpoint.describe()

    async def evaluate(self, query: Mapping[str, Any], timeout_s: float) -> ExternalAnswer:
        from evalsi.envoy.service.auth.v3 import external_auth_pb2

        if self._channel is None:
            self._channel = _channel(self.endpoint)
        check = self._channel.unary_unary(
            CHECK_METHOD,
            request_serializer=external_auth_pb2.CheckRequest.SerializeToString,
            response_deserializer=external_auth_pb2.CheckResponse.FromString,
        )
        try:
            response = await check(check_request(query), timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TimeoutError from None
            raise ExternalAuthorizerError(f"Check failed: {exc.code().name}: {exc.details() or ''}".rstrip(": ")) \
                from None
        return answer_of(response)

    async def aclose(self) -> None:
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()


def check_request(query: Mapping[str, Any]) -> Any:
    """The ``CheckRequest`` for an AuthZEN-shaped question (``evalsi.authz.external_query``)."""
    from evalsi.envoy.service.auth.v3 import external_auth_pb2

    subject, context = query["subject"], query["context"]
    resource, action = query["resource"], query["action"]["name"]
    request = external_auth_pb2.CheckRequest()
    attributes = request.attributes
    host, port = _split_peer(str(context.get("source") or ""))
    if host:
        attributes.source.address.socket_address.address = host
        attributes.source.address.socket_address.port_value = port
    attributes.source.principal = str(subject["id"])
    attributes.request.time.FromNanoseconds(time.time_ns())
    http = attributes.request.http
    http.id = uuid.uuid4().hex
    http.method = "POST"
    http.path = str(context.get("method") or "")
    http.protocol = str(context.get("protocol") or "")
    http.size = -1
    http.headers[PRINCIPAL_HEADER] = str(subject["id"])
    http.headers[ACTION_HEADER] = str(action)
    http.headers[PROJECT_HEADER] = str(context.get("project") or "")
    extensions = attributes.context_extensions
    extensions["resource.type"] = str(resource["type"])
    extensions["resource.id"] = str(resource["id"])
    extensions["partial"] = "true" if context.get("partial") else "false"
    for key, value in _flatten(resource.get("properties") or {}, "resource"):
        extensions[key] = value
    attributes.metadata_context.filter_metadata["evalsi"].update(query)
    return request


def answer_of(response: Any) -> ExternalAnswer:
    """OK allows; any other code denies, with the status message or the denied body as the reason."""
    allowed = response.status.code == grpc.StatusCode.OK.value[0]
    reason = response.status.message
    if not reason and response.HasField("denied_response"):
        reason = response.denied_response.body
    return ExternalAnswer(allowed, " ".join(reason.split())[:200])


def _flatten(value: Any, prefix: str) -> list[tuple[str, str]]:
    """``{"run": {"id": "r1"}, "labels": {"team": "a"}}`` -> ``resource.run.id=r1``, ``resource.labels.team=a``;
    a list or any other value as its JSON."""
    if isinstance(value, Mapping) and value:
        pairs: list[tuple[str, str]] = []
        for key, item in value.items():
            pairs.extend(_flatten(item, f"{prefix}.{key}"))
        return pairs
    if isinstance(value, str):
        return [(prefix, value)]
    return [(prefix, json.dumps(value, separators=(",", ":"), default=str))]


def _split_peer(peer: str) -> tuple[str, int]:
    """``1.2.3.4``, ``1.2.3.4:5678``, ``[::1]:5678`` or ``::1`` -> host and port (0 when unknown)."""
    if peer.startswith("["):
        host, _, rest = peer[1:].partition("]")
        return host, int(rest[1:]) if rest[1:].isdigit() else 0
    if peer.count(":") == 1:
        host, _, port = peer.partition(":")
        return host, int(port) if port.isdigit() else 0
    return peer, 0


def _channel(endpoint: EnvoyEndpoint) -> grpc.aio.Channel:
    if endpoint.tls is None:
        return grpc.aio.insecure_channel(endpoint.address)
    options = [("grpc.ssl_target_name_override", endpoint.tls.server_name)] if endpoint.tls.server_name else []
    return grpc.aio.secure_channel(endpoint.address, _credentials(endpoint.tls), options=options)


def _credentials(tls: GrpcTls) -> grpc.ChannelCredentials:
    def read(path: str) -> bytes | None:
        return Path(path).read_bytes() if path else None

    return grpc.ssl_channel_credentials(read(tls.ca_file), read(tls.key_file), read(tls.cert_file))
