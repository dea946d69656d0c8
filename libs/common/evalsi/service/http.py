"""The small HTTP surface every background service has: /healthz, /readyz and /metrics on its own port."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest


async def start_service_http(
    host: str, port: int, ready: Callable[[], tuple[bool, str]], registry: CollectorRegistry = REGISTRY
) -> web.AppRunner:
    """Serve health and metrics; ``ready()`` returns (ready, reason). Port 0 disables the endpoint."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(_: web.Request) -> web.Response:
        ok, reason = ready()
        return web.json_response({"ready": ok, "reason": reason}, status=200 if ok else 503)

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    if port:
        await web.TCPSite(runner, host, port).start()
    return runner
