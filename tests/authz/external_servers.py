"""Real external authorizers for the tests, on loopback: an AuthZEN PDP (aiohttp, ``POST /access/v1/evaluation``)
and an Envoy ext_authz server (grpc.aio serving ``envoy.service.auth.v3.Authorization/Check``).

Each decides with a Python policy over what it received, records every request, and can be told to answer
slowly (``delay_s``) or with an error (``fail_status``), so the client's caching and fail-closed paths are
exercised over a real socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from aiohttp import web

from evalsi.envoy.service.auth.v3 import external_auth_pb2, external_auth_pb2_grpc

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
async def authzen_pdp(policy: AuthzenPolicy) -> AsyncIterator[AuthzenPdp]:
    pdp = AuthzenPdp(policy)
    app = web.Application()
    app.router.add_post("/access/v1/evaluation", pdp.evaluation)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    pdp.url = f"http://127.0.0.1:{port}/access/v1/evaluation"
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
async def envoy_authz(policy: EnvoyPolicy) -> AsyncIterator[EnvoyAuthz]:
    servicer = EnvoyAuthz(policy)
    server = grpc.aio.server()
    external_auth_pb2_grpc.add_AuthorizationServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    servicer.address = f"127.0.0.1:{port}"
    try:
        yield servicer
    finally:
        await server.stop(None)
