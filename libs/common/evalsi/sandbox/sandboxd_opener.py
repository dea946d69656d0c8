"""Sessions on ``evalsi-sandboxd`` for the ``sandbox`` worker pool (``evalsi.sandbox.access.SandboxOpener``).

One client (one gRPC channel) per project, made on first use: sandboxes live in their project on sandboxd.
"""

from __future__ import annotations

from evalsi.errors import InfraError
from evalsi.sandbox.client import SandboxClient
from evalsi.sandbox.manager import SandboxBusy
from evalsi.sandbox.model import SandboxSession, SandboxSpec

__all__ = ["SANDBOXD_AUTHORIZATION_ENV", "SandboxdOpener"]

# The authorization header value a gated sandboxd expects from the sandbox pool's worker ("Bearer evk_...": a key
# of the built-in `sandbox` role); unset when sandboxd is on a Unix socket that only the worker can reach.
SANDBOXD_AUTHORIZATION_ENV = "EVALSI_SANDBOXD_AUTHORIZATION"


class SandboxdOpener:
    def __init__(self, address: str, *, authorization: str = "") -> None:
        self.address = address
        self._authorization = authorization
        self._clients: dict[str, SandboxClient] = {}
        # Every field is sent, so a run's unset fields take these defaults rather than sandboxd's evalsi.yaml.
        self.base = SandboxSpec()

    def client(self, project: str) -> SandboxClient:
        if project not in self._clients:
            self._clients[project] = SandboxClient(self.address, project=project,
                                                   authorization=self._authorization)
        return self._clients[project]

    async def open(self, spec: SandboxSpec, project: str) -> SandboxSession:
        try:
            return await self.client(project).create(spec)
        except SandboxBusy as exc:  # every slot taken: infrastructure, retried with the task
            raise InfraError(f"sandboxd: {exc}") from exc

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()
