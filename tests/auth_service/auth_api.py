"""A real api with authentication on: the metadata store (SQLite or Postgres), the gate (A1's authenticator with
configured and stored API keys, the live authorizer), AuthService, the audit log, on loopback gRPC and HTTP ports.

Keys are made here: ``root`` is the install's owner (``rbac.owners: [key:root]``), ``admin`` holds admin in
project ``support`` and ``viewer`` viewer there, all from evalsi.yaml's ``auth.api_keys``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from evalsi.api import ApiServer, CatalogHandlers, EvaluationHandlers, RunHandlers, ServerConfig, build_table
from evalsi.api.auth_handlers import AuthHandlers
from evalsi.audit import AuditLog
from evalsi.audit.decisions import decision_recorder
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.authz.authorizer import Authorizer
from evalsi.evaluators import Registry
from evalsi.gate.access import Gate
from evalsi.gate.stored_access import LiveAuthorizer
from evalsi.stores import SqlMetadataStore
from evalsi.stores.identity_keys import StoredKeyLookup
from evalsi.v1alpha1 import auth_service_pb2 as pb
from evalsi.v1alpha1 import auth_service_pb2_grpc

CONFIG_KEYS = {"root": {}, "admin": {"support": ["admin"]}, "viewer": {"support": ["viewer"]}}
RBAC = {"owners": ["key:root"], "projects": {"support": {"viewer": ["group:corp/everyone"]}}}


@dataclass
class AuthApi:
    server: ApiServer
    store: SqlMetadataStore
    audit: AuditLog
    authorizer: LiveAuthorizer
    keys: StoredKeyLookup
    secrets: Mapping[str, str]

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.server.grpc_port}"

    @property
    def http_base(self) -> str:
        return f"http://127.0.0.1:{self.server.http_port}"

    async def grpc(self, method: str, request: Message, *, key: str | None = None, secret: str | None = None,
                   project: str = "support") -> Any:
        """One AuthService call over gRPC, as ``key`` (a configured key's name) or with ``secret`` itself."""
        metadata = [("x-evalsi-project", project)] if project else []
        token = secret if secret is not None else (self.secrets[key] if key else None)
        if token:
            metadata.append(("authorization", f"Bearer {token}"))
        async with grpc.aio.insecure_channel(self.grpc_target) as channel:
            stub = auth_service_pb2_grpc.AuthServiceStub(channel)
            return await getattr(stub, method)(request, metadata=metadata, timeout=10)

    async def http(self, verb: str, path: str, body: Mapping[str, Any] | None = None, *, key: str | None = None,
                   secret: str | None = None, project: str = "support") -> tuple[int, dict[str, Any]]:
        headers = {"x-evalsi-project": project} if project else {}
        token = secret if secret is not None else (self.secrets[key] if key else None)
        if token:
            headers["authorization"] = f"Bearer {token}"
        async with aiohttp.ClientSession() as session, session.request(
            verb, self.http_base + path, json=body, headers=headers
        ) as response:
            return response.status, json.loads(await response.text() or "{}")

    async def close(self) -> None:
        await self.server.stop()
        await self.authorizer.close()
        await self.keys.flush()
        await self.audit.close()
        await self.store.close()


def parse(message_type: type[Message], body: Mapping[str, Any]) -> Any:
    return json_format.ParseDict(dict(body), message_type(), ignore_unknown_fields=True)


async def start_auth_api(store: SqlMetadataStore, registry: Registry, datasets_dir: Any) -> AuthApi:
    secrets = {name: new_api_key() for name in CONFIG_KEYS}
    auth = load_auth_config({"api_keys": {"mode": "strict", "keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": roles} for name, roles in CONFIG_KEYS.items()
    ]}})
    keys = StoredKeyLookup(store)
    authenticator = Authenticator(auth, key_lookup=keys)
    authorizer = LiveAuthorizer(Authorizer.from_config(RBAC, None), store, refresh_s=3600)
    await authorizer.start()
    audit = AuditLog(store.append_audit)
    audit.start()
    gate = Gate(authenticator, authorizer, on_decision=decision_recorder(audit))
    handlers = AuthHandlers(store, authorizer=authorizer, audit=audit,
                            config_keys=auth.api_keys.keys if auth.api_keys else ())

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used by AuthService tests")

    def no_records(run: Any) -> Any:
        raise AssertionError("not used by AuthService tests")

    runs = RunHandlers(store=store, objects=None, control=refuse, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=no_records)
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry), auth=handlers)
    server = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
    await server.start()
    return AuthApi(server, store, audit, authorizer, keys, secrets)


__all__ = ["RBAC", "AuthApi", "parse", "pb", "start_auth_api"]
