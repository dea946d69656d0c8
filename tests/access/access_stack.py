"""A real api (gRPC and HTTP/JSON, SQLite metadata, a directory of objects, the trace store) and real OTLP
receivers (gRPC and HTTP into the same trace store), all behind one gate built from an evalsi.yaml document as
evalsi-api and evalsi-ingest build it, on loopback ports. Tokens are signed by an identity provider served in
the test; an ingest key is bound to project ``a``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from auth_helpers import AUDIENCE, IdentityProvider, claims
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.api import (
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    RunHandlers,
    ServerConfig,
    TraceHandlers,
    build_table,
)
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.evaluators import Registry
from evalsi.gate.exposure import AccessSettings
from evalsi.gate.tls import ServerTls
from evalsi.ingest import ExportHandler, OtlpHttpReceiver, start_grpc_receiver, start_http_receiver
from evalsi.stores import open_metadata_store, open_object_store
from evalsi.stores.traces import open_trace_store

# Who holds what: an owner, a viewer and a runner of project a (JWT subjects of provider corp), and an ingest key
# bound to project a.
RBAC = {
    "owners": ["user:corp/root"],
    # Evaluations only where no evaluator may run code (an evaluator the server cannot vouch for counts as code).
    "roles": [{"name": "no-code", "permissions": ["evaluations.run"], "condition": "!resource.runs_code"},
              # Seed section 17's custom role: runs only on the models it names.
              {"name": "prompt-engineer", "inherits": ["viewer"], "permissions": ["runs.create"],
               "condition": 'resource.target.model in ["qwen3", "claude-opus-5-5"]'}],
    "projects": {"a": {"viewer": ["user:corp/viewer-1"], "runner": ["user:corp/runner-1"],
                       "no-code": ["user:corp/ci-1"], "prompt-engineer": ["user:corp/pe-1"]}},
}
CLI_LOGIN = {"issuer": "https://sso.example.test/realms/eng", "client_id": "evalsi-cli"}


def access_document(idp: IdentityProvider, ingest_key: str) -> dict[str, Any]:
    return {
        "auth": {
            "jwt": {"providers": [{"name": "corp", "issuer": idp.issuer, "audiences": [AUDIENCE],
                                   "jwks": {"url": idp.jwks_url}, "allow_insecure_jwks": True}]},
            "api_keys": {"keys": [{"name": "collector-a", "key": hash_api_key(ingest_key),
                                   "roles": {"a": ["ingest"]}}]},
            "cli_login": CLI_LOGIN,
        },
        "rbac": RBAC,
    }


@dataclass
class Stack:
    idp: IdentityProvider
    api: ApiServer
    metadata: Any
    traces: Any
    ingest_key: str
    otlp_http: str
    otlp_grpc: str
    _closers: list[Any] = field(default_factory=list)

    def token(self, subject: str) -> str:
        return self.idp.keys[0].sign(claims(iss=self.idp.issuer, sub=subject))

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.api.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.api.grpc_port}"

    async def close(self) -> None:
        for close in reversed(self._closers):
            await close()


async def _refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the bus is not reached in these tests")


async def start_stack(tmp_path: Path, idp: IdentityProvider, registry: Registry, *,
                      tls: ServerTls | None = None) -> Stack:
    ingest_key = new_api_key()
    settings = AccessSettings.from_document(access_document(idp, ingest_key))
    gate = settings.gate()
    assert gate is not None
    metadata = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    objects = await open_object_store(str(tmp_path / "objects"))
    traces = await open_trace_store(f"sqlite:///{tmp_path / 'traces.db'}")
    runs = RunHandlers(store=metadata, objects=objects, control=_refuse, watch=_refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=_refuse)  # type: ignore[arg-type]
    table = build_table(evaluation=EvaluationHandlers(_refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry), traces=TraceHandlers(traces))
    api = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate, tls=tls,
                    login=settings.login())
    await api.start()
    handler = ExportHandler(traces)
    http_runner, http_port = await start_http_receiver(OtlpHttpReceiver(handler, gate=gate), "127.0.0.1", 0)
    grpc_server, grpc_port = await start_grpc_receiver(handler, "127.0.0.1", 0, gate=gate)
    stack = Stack(idp, api, metadata, traces, ingest_key, f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}")
    stack._closers = [metadata.close, objects.close, traces.close, api.stop, http_runner.cleanup,
                      lambda: grpc_server.stop(0), gate.authenticator.aclose]  # type: ignore[attr-defined]
    return stack


def span_batch(*, project: str | None = None, trace_id: bytes = b"\x01" * 16, service: str = "shop") -> bytes:
    """One root span of one trace, its resource naming ``project`` with ``evalsi.project`` when given."""
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", service
    if project is not None:
        named = resource_spans.resource.attributes.add()
        named.key, named.value.string_value = "evalsi.project", project
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = trace_id, b"\x02" * 8, "checkout"
    span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    return request.SerializeToString()


def grpc_unary(channel: grpc.aio.Channel, method: str) -> Any:
    """A raw-bytes unary callable, so any service can be called without its stubs."""
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)
