"""A local OpenID Connect issuer for tests, examples and end-to-end CLI runs: a real HTTP server, no identity
provider needed.

It speaks the wire protocols a real issuer does, so the server's JWT providers and ``evalsi login`` run
unchanged against it:

- ``GET /.well-known/openid-configuration`` (OIDC discovery) and ``GET /jwks`` (the public key);
- ``POST /token``: ``client_credentials`` (scripts, with the client's secret), the device code grant (RFC 8628:
  ``authorization_pending``, ``slow_down``, ``expired_token``, ``access_denied``), ``authorization_code`` with
  PKCE S256 (RFC 7636) and ``refresh_token`` (rotated: a refresh token works once);
- ``POST /device_authorization``; ``POST /device/approve`` (form ``user_code``, ``subject``, ``deny=1`` to
  refuse): the user's approval, done by a test or a script where a person would use the verification page;
- ``GET /authorize``: signs in the user a test chose (``sign_in``, or ``login_hint``) and redirects to the
  client's loopback ``redirect_uri`` with the code and the state, as a browser would after a login page;
- ``GET /github/token?audience=...``: GitHub Actions' ``ACTIONS_ID_TOKEN_REQUEST_URL``, answering a job's OIDC
  token (``repository``, ``ref`` ... claims) to the job's request token; ``github_job`` gives a job's environment.

Tokens are signed with a key generated at start (ES256 by default, or RS256/EdDSA); ``mint`` signs any claims
directly (expired, wrong audience, extra groups) for tests of the verifier::

    async with LocalIssuer(users={"alice": {"email": "alice@example.com", "groups": ["eng"]}}) as issuer:
        token = issuer.mint("alice")
        ...

Run one from a shell: ``python -m evalsi.testing.issuer --port 9400`` (prints its URL, serves until stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import secrets
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn, Self

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

DEVICE_CODE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
CLI_CLIENT = "evalsi-cli"
DEFAULT_AUDIENCE = "evals.si"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")
SLOW_DOWN_STEP_S = 5.0  # RFC 8628 §3.5: each slow_down adds 5 seconds to the interval


@dataclass(frozen=True)
class IssuerClient:
    """A registered OAuth client: public (no secret, the CLI) or confidential (a script with a secret)."""

    secret: str = ""
    # Claims every token issued to this client by client_credentials carries (groups, repository ...).
    claims: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class _DeviceGrant:
    client_id: str
    scope: str
    user_code: str
    expires_at: float
    interval: float
    last_poll: float = 0.0
    subject: str = ""
    denied: bool = False


@dataclass(frozen=True)
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    subject: str
    scope: str
    expires_at: float


@dataclass(frozen=True)
class _Refresh:
    client_id: str
    subject: str
    scope: str


def _signing_key(algorithm: str) -> Any:
    if algorithm == "ES256":
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == "RS256":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == "EdDSA":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"algorithm {algorithm!r}: use ES256, RS256 or EdDSA")


class LocalIssuer:
    """An OIDC issuer on ``127.0.0.1:<port>`` (a free port when 0); ``url`` is its issuer identifier."""

    def __init__(
        self,
        *,
        port: int = 0,
        audience: str = DEFAULT_AUDIENCE,
        algorithm: str = "ES256",
        clients: Mapping[str, IssuerClient] | None = None,
        users: Mapping[str, Mapping[str, Any]] | None = None,
        token_lifetime_s: float = 300.0,
        device_interval_s: float = 5.0,
        device_lifetime_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.audience = audience
        self.algorithm = algorithm
        self.kid = secrets.token_hex(8)
        self._key = _signing_key(algorithm)
        self.clients: Mapping[str, IssuerClient] = MappingProxyType(dict(clients or {CLI_CLIENT: IssuerClient()}))
        self.users: Mapping[str, Mapping[str, Any]] = MappingProxyType(dict(users or {}))
        self.token_lifetime_s = token_lifetime_s
        self.device_interval_s = device_interval_s
        self.device_lifetime_s = device_lifetime_s
        # Device and code expiry and poll spacing read this clock; a test may share a fake one with the client.
        self._clock = clock
        self._port = port
        self._runner: web.AppRunner | None = None
        self._url = ""
        self._devices: dict[str, _DeviceGrant] = {}
        self._codes: dict[str, _Code] = {}
        self._refresh_tokens: dict[str, _Refresh] = {}
        self._browser_user = ""
        # Every grant the token endpoint answered, in order (``client_credentials``, ``refresh_token`` ...).
        self.grants: list[str] = []
        self._jobs: dict[str, dict[str, Any]] = {}  # request token -> the job's claims
        # Every audience a GitHub job token was asked for, in order.
        self.github_requests: list[str] = []

    @property
    def url(self) -> str:
        if not self._url:
            raise RuntimeError("LocalIssuer is not started; use 'async with' or await start()")
        return self._url

    # --- what a test does instead of a person -------------------------------------------------------------

    def mint(self, subject: str, *, audience: str | None = None, expires_in: float | None = None,
             client_id: str = CLI_CLIENT, **claims: Any) -> str:
        """A token for ``subject`` with the user's claims, then ``claims`` (``exp``, ``iss``, ``aud`` may be
        overridden too, for tokens a verifier must refuse)."""
        now = int(time.time())
        lifetime = self.token_lifetime_s if expires_in is None else expires_in
        body = {"iss": self.url, "sub": subject, "aud": self.audience if audience is None else audience,
                "iat": now, "nbf": now, "exp": now + int(lifetime), "jti": secrets.token_hex(12),
                "azp": client_id, **self.users.get(subject, {}), **claims}
        return jwt.encode(body, self._key, algorithm=self.algorithm, headers={"kid": self.kid})

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.get_algorithm_by_name(self.algorithm).to_jwk(self._key.public_key()))
        return {"keys": [{**public, "kid": self.kid, "alg": self.algorithm, "use": "sig"}]}

    def github_job(self, *, repository: str = "acme/agent", ref: str = "refs/heads/main", audience: str = "",
                   lifetime_s: float = 300.0) -> dict[str, str]:
        """The environment GitHub gives a job with ``permissions: id-token: write`` (and ``EVALSI_OIDC_AUDIENCE``
        when ``audience`` is given): its token names the repository and ref, as GitHub's do."""
        request_token = secrets.token_urlsafe(16)
        self._jobs[request_token] = {"sub": f"repo:{repository}:ref:{ref}", "repository": repository, "ref": ref,
                                     "repository_owner": repository.split("/")[0], "lifetime_s": lifetime_s}
        env = {"ACTIONS_ID_TOKEN_REQUEST_URL": f"{self.url}/github/token?api-version=2.0",
               "ACTIONS_ID_TOKEN_REQUEST_TOKEN": request_token}
        return {**env, "EVALSI_OIDC_AUDIENCE": audience} if audience else env

    def sign_in(self, subject: str) -> None:
        """The user the next ``/authorize`` signs in, as if they had typed their password in the browser."""
        self._browser_user = subject

    def approve(self, user_code: str, subject: str, *, deny: bool = False) -> None:
        """The user enters ``user_code`` on the verification page and approves (or refuses) the device."""
        for grant in self._devices.values():
            if grant.user_code == user_code.upper():
                grant.subject, grant.denied = subject, deny
                return
        raise KeyError(f"no pending device login with user code {user_code!r}")

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/.well-known/openid-configuration", self._discovery)
        app.router.add_get("/jwks", self._jwks)
        app.router.add_post("/token", self._token)
        app.router.add_post("/device_authorization", self._device_authorization)
        app.router.add_get("/device", self._verification_page)
        app.router.add_post("/device/approve", self._device_approve)
        app.router.add_get("/authorize", self._authorize)
        app.router.add_get("/github/token", self._github_token)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        await web.SockSite(self._runner, sock).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- endpoints ---------------------------------------------------------------------------------------------

    async def _discovery(self, _request: web.Request) -> web.Response:
        return web.json_response({
            "issuer": self.url, "jwks_uri": f"{self.url}/jwks", "token_endpoint": f"{self.url}/token",
            "authorization_endpoint": f"{self.url}/authorize",
            "device_authorization_endpoint": f"{self.url}/device_authorization",
            "grant_types_supported": ["client_credentials", "authorization_code", "refresh_token", DEVICE_CODE_GRANT],
            "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
            "id_token_signing_alg_values_supported": [self.algorithm], "subject_types_supported": ["public"],
        })

    async def _jwks(self, _request: web.Request) -> web.Response:
        return web.json_response(self.jwks())

    async def _device_authorization(self, request: web.Request) -> web.Response:
        form = await request.post()
        client_id = str(form.get("client_id", ""))
        if client_id not in self.clients:
            return _oauth_error("invalid_client", f"unknown client {client_id!r}", 401)
        device_code = secrets.token_urlsafe(24)
        user_code = "-".join(secrets.token_hex(2).upper() for _ in range(2))
        self._devices[device_code] = _DeviceGrant(
            client_id, str(form.get("scope", "")), user_code, self._clock() + self.device_lifetime_s,
            self.device_interval_s)
        verification = f"{self.url}/device"
        return web.json_response({
            "device_code": device_code, "user_code": user_code, "verification_uri": verification,
            "verification_uri_complete": f"{verification}?user_code={user_code}",
            "expires_in": self.device_lifetime_s, "interval": self.device_interval_s,
        })

    async def _verification_page(self, request: web.Request) -> web.Response:
        code = request.query.get("user_code", "")
        return web.Response(text=f"Local issuer: approve device code {code or '(enter it)'} with "
                                 f"POST {self.url}/device/approve user_code=...&subject=...\n")

    async def _device_approve(self, request: web.Request) -> web.Response:
        form = await request.post()
        try:
            self.approve(str(form.get("user_code", "")), str(form.get("subject", "")), deny=bool(form.get("deny")))
        except KeyError as exc:
            return web.json_response({"error": str(exc)}, status=404)
        return web.json_response({"approved": not form.get("deny")})

    async def _github_token(self, request: web.Request) -> web.Response:
        job = self._jobs.get(request.headers.get("authorization", "").removeprefix("bearer ").removeprefix("Bearer "))
        if job is None:
            return web.json_response({"message": "Bad credentials"}, status=401)
        audience = request.query.get("audience", "")
        self.github_requests.append(audience)
        claims = {k: v for k, v in job.items() if k not in ("sub", "lifetime_s")}
        token = self.mint(job["sub"], audience=audience or self.audience, expires_in=job["lifetime_s"], **claims)
        return web.json_response({"value": token})

    async def _authorize(self, request: web.Request) -> web.Response:
        query = request.query
        client_id, redirect_uri = query.get("client_id", ""), query.get("redirect_uri", "")
        if client_id not in self.clients:
            return web.Response(status=400, text=f"unknown client {client_id!r}\n")
        if urllib.parse.urlsplit(redirect_uri).hostname not in LOOPBACK:
            return web.Response(status=400, text="redirect_uri must be a loopback address (RFC 8252)\n")
        state = query.get("state", "")
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256" or not query.get(
                "code_challenge"):
            _redirect(redirect_uri, error="invalid_request", state=state,
                      error_description="response_type=code with an S256 code_challenge is required")
        subject = query.get("login_hint") or self._browser_user
        if not subject:
            return web.Response(status=401, text="no user is signed in to the local issuer (sign_in(subject))\n")
        code = secrets.token_urlsafe(24)
        self._codes[code] = _Code(client_id, redirect_uri, query["code_challenge"], subject, query.get("scope", ""),
                                  self._clock() + 60)
        _redirect(redirect_uri, code=code, state=state)

    async def _token(self, request: web.Request) -> web.Response:
        form = {key: str(value) for key, value in (await request.post()).items()}
        grant = form.get("grant_type", "")
        handlers = {"client_credentials": self._client_credentials, DEVICE_CODE_GRANT: self._device_code,
                    "authorization_code": self._authorization_code, "refresh_token": self._refresh}
        if grant not in handlers:
            return _oauth_error("unsupported_grant_type", f"grant_type {grant!r}")
        client_id = form.get("client_id", "")
        if basic := request.headers.get("authorization", ""):  # client_secret_basic (RFC 6749 §2.3.1)
            client_id, _, secret = base64.b64decode(basic.removeprefix("Basic ")).decode().partition(":")
            form["client_secret"] = secret
        client = self.clients.get(client_id)
        if client is None or (client.secret and not hmac.compare_digest(client.secret,
                                                                         form.get("client_secret", ""))):
            return _oauth_error("invalid_client", "unknown client or wrong secret", 401)
        answer = handlers[grant](client_id, client, form)
        if isinstance(answer, web.Response):
            return answer
        self.grants.append(grant)
        return web.json_response(answer, headers={"cache-control": "no-store"})

    def _client_credentials(self, client_id: str, client: IssuerClient, form: Mapping[str, str]) -> Any:
        if not client.secret:
            return _oauth_error("unauthorized_client", "a public client cannot use client_credentials")
        return self._tokens(client_id, client_id, form.get("scope", ""), refresh=False, claims=client.claims)

    def _device_code(self, client_id: str, _client: IssuerClient, form: Mapping[str, str]) -> Any:
        grant = self._devices.get(form.get("device_code", ""))
        if grant is None or grant.client_id != client_id:
            return _oauth_error("invalid_grant", "unknown device_code")
        now = self._clock()
        if now >= grant.expires_at:
            del self._devices[form["device_code"]]
            return _oauth_error("expired_token", "the device code expired")
        if grant.denied:
            del self._devices[form["device_code"]]
            return _oauth_error("access_denied", "the user refused")
        if grant.subject:
            del self._devices[form["device_code"]]
            return self._tokens(client_id, grant.subject, grant.scope)
        too_soon = grant.last_poll and now - grant.last_poll < grant.interval
        grant.last_poll = now
        if too_soon:
            grant.interval += SLOW_DOWN_STEP_S
            return _oauth_error("slow_down", f"poll at most every {grant.interval:g} s")
        return _oauth_error("authorization_pending", "the user has not approved yet")

    def _authorization_code(self, client_id: str, _client: IssuerClient, form: Mapping[str, str]) -> Any:
        code = self._codes.pop(form.get("code", ""), None)
        if code is None or code.client_id != client_id or code.redirect_uri != form.get("redirect_uri"):
            return _oauth_error("invalid_grant", "unknown code, or another client or redirect_uri")
        if self._clock() >= code.expires_at:
            return _oauth_error("invalid_grant", "the code expired")
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != code.challenge:
            return _oauth_error("invalid_grant", "code_verifier does not match the code_challenge")
        return self._tokens(client_id, code.subject, code.scope)

    def _refresh(self, client_id: str, _client: IssuerClient, form: Mapping[str, str]) -> Any:
        held = self._refresh_tokens.pop(form.get("refresh_token", ""), None)
        if held is None or held.client_id != client_id:
            return _oauth_error("invalid_grant", "unknown, used or revoked refresh token")
        return self._tokens(client_id, held.subject, held.scope)

    def _tokens(self, client_id: str, subject: str, scope: str, *, refresh: bool = True,
                claims: Mapping[str, Any] | None = None) -> dict[str, Any]:
        extra: dict[str, Any] = {**({"scope": scope} if scope else {}), **dict(claims or {})}
        answer: dict[str, Any] = {
            "access_token": self.mint(subject, client_id=client_id, **extra),
            "token_type": "Bearer", "expires_in": int(self.token_lifetime_s),
        }
        if refresh and "offline_access" in scope.split():
            token = secrets.token_urlsafe(32)
            self._refresh_tokens[token] = _Refresh(client_id, subject, scope)
            answer["refresh_token"] = token
        return answer


def _oauth_error(error: str, description: str, status: int = 400) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=status,
                             headers={"cache-control": "no-store"})


def _redirect(uri: str, **params: str) -> NoReturn:
    separator = "&" if urllib.parse.urlsplit(uri).query else "?"
    raise web.HTTPFound(uri + separator + urllib.parse.urlencode({k: v for k, v in params.items() if v}))


class ThreadedIssuer:
    """A ``LocalIssuer`` served by an event loop on a background thread, for code under test that blocks (the
    CLI, ``evalsi.Client``): ``with ThreadedIssuer(users=...) as issuer: ...``."""

    def __init__(self, **options: Any) -> None:
        self.issuer = LocalIssuer(**options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> LocalIssuer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.issuer.start(), self._loop).result(timeout=10)
        return self.issuer

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.issuer.close(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


async def _serve(args: argparse.Namespace) -> None:
    clients = {CLI_CLIENT: IssuerClient()}
    for item in args.client:
        name, _, secret = item.partition(":")
        clients[name] = IssuerClient(secret=secret)
    users: dict[str, dict[str, Any]] = {subject: {} for subject in args.user}
    async with LocalIssuer(port=args.port, audience=args.audience, clients=clients, users=users,
                           device_interval_s=args.interval) as issuer:
        print(issuer.url, flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="A local OIDC issuer (for tests and examples; not for production)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--audience", default=DEFAULT_AUDIENCE)
    parser.add_argument("--client", action="append", default=[], metavar="ID:SECRET",
                        help="a confidential client for client_credentials (repeatable)")
    parser.add_argument("--user", action="append", default=[], metavar="SUBJECT")
    parser.add_argument("--interval", type=float, default=5.0, help="device flow poll interval, seconds")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(parser.parse_args()))


if __name__ == "__main__":
    main()
