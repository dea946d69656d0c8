"""Real external authorizers for the tests, on loopback: an AuthZEN PDP (aiohttp, ``POST /access/v1/evaluation``)
and an Envoy ext_authz server (grpc.aio serving ``envoy.service.auth.v3.Authorization/Check``).

Each decides with a Python policy over what it received, records every request, and can be told to answer
slowly (``delay_s``) or with an error (``fail_status``), so the client's caching and fail-closed paths are
exercised over a real socket.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from evalsi.envoy.service.auth.v3 import external_auth_pb2, external_auth_pb2_grpc


@dataclass(frozen=True)
class Tls:
    """A CA made here, a server certificate for 127.0.0.1 and a client certificate, all PEM."""

    ca: bytes
    server_cert: bytes
    server_key: bytes
    client_cert: bytes
    client_key: bytes

    @classmethod
    def create(cls) -> Tls:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ext_authz test CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
              .not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
              .sign(ca_key, hashes.SHA256()))

        def issue(name: str, *names: x509.GeneralName) -> tuple[bytes, bytes]:
            key = ec.generate_private_key(ec.SECP256R1())
            builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                                                                           name)]))
                       .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=1))
                       .not_valid_after(now + datetime.timedelta(days=1)))
            if names:
                builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
            pem_key = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
            return builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM), pem_key

        server = issue("ext-authz", x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
        client = issue("evalsi-api")
        return cls(ca.public_bytes(serialization.Encoding.PEM), *server, *client)


AuthzenPolicy = Callable[[dict[str, Any]], bool]
EnvoyPolicy = Callable[[Any], bool]


class AuthzenPdp:
    def __init__(self, policy: AuthzenPolicy) -> None:
        self.policy = policy
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.delay_s = 0.0
        self.fail_status = 0
        self.url = ""

    async def evaluation(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append({name.lower(): value for name, value in request.headers.items()})
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_status:
            return web.Response(status=self.fail_status, text="policy engine unavailable")
        allowed = self.policy(body)
        answer: dict[str, Any] = {"decision": allowed}
        if not allowed:
            answer["context"] = {"reason": "not on the list"}
        return web.Response(text=json.dumps(answer), content_type="application/json",
                            headers={"x-request-id": request.headers.get("x-request-id", "")})


@asynccontextmanager
async def authzen_pdp(policy: AuthzenPolicy, tls: Tls | None = None,
                      tmp_dir: Path | None = None) -> AsyncIterator[AuthzenPdp]:
    """The PDP; with ``tls`` (and a ``tmp_dir`` for its key files), over https:// with ``tls``'s server certificate."""
    pdp = AuthzenPdp(policy)
    app = web.Application()
    app.router.add_post("/access/v1/evaluation", pdp.evaluation)
    runner = web.AppRunner(app)
    await runner.setup()
    context = None
    if tls is not None:
        assert tmp_dir is not None
        (tmp_dir / "pdp.crt").write_bytes(tls.server_cert)
        (tmp_dir / "pdp.key").write_bytes(tls.server_key)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tmp_dir / "pdp.crt", tmp_dir / "pdp.key")
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    pdp.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/access/v1/evaluation"
    try:
        yield pdp
    finally:
        await runner.cleanup()


class EnvoyAuthz(external_auth_pb2_grpc.AuthorizationServicer):
    def __init__(self, policy: EnvoyPolicy) -> None:
        self.policy = policy
        self.requests: list[Any] = []
        self.delay_s = 0.0
        self.fail_code: grpc.StatusCode | None = None
        self.address = ""

    async def Check(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.requests.append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_code is not None:
            await context.abort(self.fail_code, "policy engine unavailable")
        response = external_auth_pb2.CheckResponse()
        if self.policy(request):
            response.status.code = 0
            response.ok_response.SetInParent()
        else:
            # What OPA's Envoy plugin answers on a deny: PERMISSION_DENIED with a denied HTTP response.
            response.status.code = grpc.StatusCode.PERMISSION_DENIED.value[0]
            response.denied_response.status.code = 403
            response.denied_response.body = "denied by policy"
        return response


@asynccontextmanager
async def envoy_authz(policy: EnvoyPolicy, tls: Tls | None = None) -> AsyncIterator[EnvoyAuthz]:
    """The server; with ``tls``, over mutual TLS (a client certificate signed by the same CA is required)."""
    servicer = EnvoyAuthz(policy)
    server = grpc.aio.server()
    external_auth_pb2_grpc.add_AuthorizationServicer_to_server(servicer, server)
    if tls is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        credentials = grpc.ssl_server_credentials([(tls.server_key, tls.server_cert)], root_certificates=tls.ca,
                                                  require_client_auth=True)
        port = server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    servicer.address = f"127.0.0.1:{port}"
    try:
        yield servicer
    finally:
        await server.stop(None)
