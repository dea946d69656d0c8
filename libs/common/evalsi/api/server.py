"""Both transports over one handler table, under one lifecycle: start, serve, drain, stop."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import structlog

from evalsi.api.config import ServerConfig
from evalsi.api.grpc_server import GrpcServer
from evalsi.api.health import Readiness
from evalsi.api.http_server import HttpServer
from evalsi.api.metrics import ApiMetrics
from evalsi.api.table import HandlerTable
from evalsi.gate.access import Gate
from evalsi.gate.exposure import refuse_ungated_listener
from evalsi.gate.tls import ServerTls


class ApiServer:
    """gRPC and HTTP/JSON serving the same handlers; ``start`` and ``stop`` are idempotent, and a
    stopped server stays stopped (create another to serve again).

    ``stop`` marks the server not ready (so health checks and load balancers move away), stops both
    listeners, and gives in-flight calls ``config.grace_period_s`` to finish before cancelling them.

    ``gate`` (authentication on) admits every call on both ports; ``tls`` puts both behind TLS with one
    certificate; ``login`` is what ``/.well-known/evalsi-auth`` publishes (``auth.cli_login``).
    """

    def __init__(
        self,
        table: HandlerTable,
        config: ServerConfig | None = None,
        *,
        readiness: Readiness | None = None,
        metrics: ApiMetrics | None = None,
        logger: Any = None,
        gate: Gate | None = None,
        tls: ServerTls | None = None,
        login: Mapping[str, Any] | None = None,
        open_on_purpose: bool = False,
    ) -> None:
        """``open_on_purpose``: serve beyond loopback without a ``gate`` (``--no-auth``); refused otherwise."""
        self.config = config or ServerConfig()
        self.config.validate()
        refuse_ungated_listener(self.config.host, gate is not None, open_on_purpose=open_on_purpose,
                                what="evalsi-api")
        self.readiness = readiness or Readiness()
        self.metrics = metrics or ApiMetrics()
        self._log = logger or structlog.get_logger("evalsi.api")
        common = {
            "readiness": self.readiness,
            "metrics": self.metrics,
            "host": self.config.host,
            "max_request_bytes": self.config.max_request_bytes,
            "logger": self._log,
            "gate": gate,
            "tls": tls,
        }
        self.tls = tls
        self.table = table
        self._grpc_args = {**common, "port": self.config.grpc_port}
        self._http_args = {**common, "port": self.config.http_port, "grace_period_s": self.config.grace_period_s,
                           "login": login}
        self.grpc: GrpcServer | None = None
        self.http: HttpServer | None = None
        self._stopped = False

    @property
    def grpc_port(self) -> int:
        return self.grpc.port if self.grpc else 0

    @property
    def http_port(self) -> int:
        return self.http.port if self.http else 0

    @property
    def addresses(self) -> dict[str, str]:
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        secure = "s" if self.tls is not None else ""
        return {"http": f"http{secure}://{host}:{self.http_port}", "grpc": f"grpc{secure}://{host}:{self.grpc_port}"}

    async def start(self) -> None:
        if self.grpc is not None:
            return
        if self._stopped:
            raise RuntimeError("this ApiServer was stopped; create a new one to serve again")
        grpc_server = GrpcServer(self.table, **self._grpc_args)
        http_server = HttpServer(self.table, **self._http_args)
        await grpc_server.start()
        try:
            await http_server.start()
        except BaseException:
            await grpc_server.stop(0)
            raise
        self.grpc, self.http = grpc_server, http_server
        self._log.info("api listening", **self.addresses)

    async def stop(self) -> None:
        if self.grpc is None or self.http is None:
            return
        grpc_server, http_server = self.grpc, self.http
        self.grpc = self.http = None
        self._stopped = True
        self.readiness.stopping()
        grace = self.config.grace_period_s
        self._log.info("api stopping", grace_period_s=grace)
        # Both drain at once, so the grace period is spent once, not twice.
        await asyncio.gather(grpc_server.stop(grace), http_server.stop())
        self._log.info("api stopped")

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
