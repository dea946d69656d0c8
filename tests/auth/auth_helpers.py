"""Signing keys made in the test (RSA, EC P-256, Ed25519), tokens signed with them, a JWKS and OIDC discovery server
on loopback (aiohttp), and client certificates: everything the authentication tests verify against."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import hmac
import ipaddress
import json
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://sso.example.test/realms/eng"
AUDIENCE = "evals.si"

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@dataclass
class SigningKey:
    kid: str
    algorithm: str
    private: PrivateKey

    @classmethod
    def generate(cls, algorithm: str, kid: str) -> SigningKey:
        private: PrivateKey
        if algorithm.startswith(("RS", "PS")):
            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif algorithm == "ES256":
            private = ec.generate_private_key(ec.SECP256R1())
        elif algorithm == "EdDSA":
            private = ed25519.Ed25519PrivateKey.generate()
        else:
            raise ValueError(algorithm)
        return cls(kid, algorithm, private)

    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            document = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif isinstance(public, ec.EllipticCurvePublicKey):
            document = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            document = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**document, "kid": self.kid, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: Mapping[str, Any], *, headers: Mapping[str, Any] | None = None) -> str:
        return jwt.encode(dict(claims), self.private, algorithm=self.algorithm,
                          headers={"kid": self.kid, **(headers or {})})


def claims(**overrides: Any) -> dict[str, Any]:
    """A valid user token's claims for ISSUER and AUDIENCE, good for five minutes; ``None`` drops a claim."""
    now = int(time.time())
    document: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "5f1c-user", "iat": now, "nbf": now,
                                "exp": now + 300, "email": "ada@example.test", "email_verified": True,
                                "name": "Ada", "groups": ["eng", "support"]}
    document.update(overrides)
    return {key: value for key, value in document.items() if value is not None}


def jwks(*keys: SigningKey) -> dict[str, Any]:
    return {"keys": [key.jwk() for key in keys]}


def _segment(document: Mapping[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


def unsigned_token(payload: Mapping[str, Any]) -> str:
    """``alg: none``: a token anyone can write."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(payload)}."


def hmac_token(payload: Mapping[str, Any], secret: bytes, kid: str) -> str:
    """HS256 signed with ``secret``: with a public key's PEM as the secret, the RS256-to-HS256 confusion attack."""
    head = f"{_segment({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_segment(payload)}"
    signature = hmac.new(secret, head.encode(), hashlib.sha256).digest()
    return f"{head}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


@dataclass
class IdentityProvider:
    """A JWKS endpoint and an OIDC discovery document on loopback; what it serves can change mid-test."""

    keys: list[SigningKey] = field(default_factory=list)
    stated_issuer: str | None = None  # what discovery claims to be (None: its own issuer)
    jwks_body: bytes | None = None  # served instead of the keys (oversized or broken answers)
    jwks_status: int = 200  # 503: an outage
    jwks_delay_s: float = 0.0  # a slow answer
    requests: list[str] = field(default_factory=list)
    runner: web.AppRunner | None = None
    base: str = ""

    @property
    def issuer(self) -> str:
        return f"{self.base}/realms/eng"

    @property
    def jwks_url(self) -> str:
        return f"{self.base}/realms/eng/certs"

    def jwks_fetches(self) -> int:
        return sum(path.endswith("/certs") for path in self.requests)

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> IdentityProvider:
        app = web.Application()
        app.router.add_get("/realms/eng/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/realms/eng/certs", self._jwks)
        app.router.add_get("/realms/eng/moved", self._moved)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        port = self.runner.addresses[0][1]
        self.base = f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    async def _discovery(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        return web.json_response({"issuer": self.stated_issuer or self.issuer, "jwks_uri": self.jwks_url,
                                  "token_endpoint": f"{self.issuer}/token"})

    async def _moved(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        raise web.HTTPFound(self.jwks_url)

    async def _jwks(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        await asyncio.sleep(self.jwks_delay_s)
        if self.jwks_status != 200:
            return web.Response(status=self.jwks_status, text="unavailable")
        if self.jwks_body is not None:
            return web.Response(body=self.jwks_body, content_type="application/json")
        return web.json_response(jwks(*self.keys))


def client_certificate(common_name: str, *, uris: tuple[str, ...] = ()) -> bytes:
    """A self-signed client certificate's DER with this CN and these URI SANs (SPIFFE IDs)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(days=1)))
    if uris:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(uri) for uri in uris]), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def tls_contexts(tmp_dir: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context for 127.0.0.1 signed by a CA made here, and a client context trusting only that CA."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    server = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "idp")]))
              .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
              .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    cert_file, key_file = tmp_dir / "idp.crt", tmp_dir / "idp.key"
    cert_file.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert_file, key_file)
    client_context = ssl.create_default_context(cadata=ca.public_bytes(serialization.Encoding.PEM).decode())
    return server_context, client_context
