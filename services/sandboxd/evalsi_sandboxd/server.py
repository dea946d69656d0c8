"""sandboxd's listener: the api's gRPC transport (``evalsi.api.grpc_server``: the gate, health, reflection, error
statuses, message limits) serving the SandboxService table, on a Unix socket or a TCP address."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from evalsi.api.grpc_server import GrpcServer
from evalsi.api.health import Readiness
from evalsi.api.metrics import ApiMetrics
from evalsi.api.table import HandlerTable
from evalsi.errors import BadInputError
from evalsi.gate.access import Gate
from evalsi.gate.exposure import AccessSettings
from evalsi.gate.tls import ServerTls
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.manager import SandboxManager
from evalsi.sandbox.v1alpha1 import sandbox_pb2

from .handlers import Defaults, SandboxHandlers

SANDBOX_SERVICE = sandbox_pb2.DESCRIPTOR.services_by_name["SandboxService"]


def check_listen(listen: str, access: AccessSettings) -> None:
    """``unix:PATH`` or ``HOST:PORT``; a TCP address beyond loopback needs an auth section (``access.check``)."""
    if listen.startswith("unix:"):
        if not listen[5:] or "\0" in listen:
            raise BadInputError(f"--listen {listen!r}: unix: needs a socket path, such as "
                                "unix:/run/evalsi/sandboxd.sock")
        return
    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadInputError(f"--listen {listen!r}: expected unix:PATH or HOST:PORT (port 0 to 65535)")
    access.check(host.strip("[]"))


def prepare_socket(listen: str) -> str:
    """The gRPC address to bind: a Unix socket's directory made (0700, ours) and a stale socket removed."""
    if not listen.startswith("unix:"):
        return listen
    path = Path(listen[5:]).resolve()
    if len(os.fsencode(path)) > 107:  # sun_path: 108 bytes with the terminating NUL
        raise BadInputError(f"--listen {listen}: {len(os.fsencode(path))} bytes is too long for a Unix socket path; "
                            "at most 107")
    existed = path.parent.is_dir()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.parent.stat()
    if info.st_uid != os.getuid():
        raise BadInputError(f"--listen {listen}: {path.parent} belongs to another user; sandboxd's socket lives in "
                            "a directory of its own")
    if existed and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        # Never chmod'ed: as root, /tmp or /run made 0700 would lock every other user out of them.
        raise BadInputError(f"--listen {listen}: {path.parent} is writable by others (mode "
                            f"{stat.S_IMODE(info.st_mode):04o}); sandboxd's socket lives in a directory of its own, "
                            "such as unix:/run/evalsi/sandboxd.sock")
    if not existed:
        os.chmod(path.parent, 0o700)  # made here: only this user reaches the socket
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise BadInputError(f"--listen {listen}: {path} exists and is not a socket")
        path.unlink()
    return f"unix:{path}"


class SandboxServer:
    """The SandboxService on one address."""

    def __init__(self, manager: SandboxManager, config: SandboxConfig, *, image_roots: tuple[Path, ...] = (),
                 gate: Gate | None = None, tls: ServerTls | None = None, readiness: Readiness | None = None,
                 metrics: ApiMetrics | None = None, max_request_bytes: int | None = None) -> None:
        defaults = Defaults(min_isolation=config.min_isolation, resources=config.resources, image_roots=image_roots,
                            root=config.root)
        self.handlers = SandboxHandlers(manager, defaults)
        self._table = HandlerTable({SANDBOX_SERVICE: self.handlers})
        self._gate = gate
        self._tls = tls
        self._readiness = readiness or Readiness()
        self._metrics = metrics or ApiMetrics(process_metrics=False)
        # A WriteFiles of the manager's transfer limit fits, with room for the message around it.
        self._max_request_bytes = max_request_bytes or manager.limits.max_transfer_bytes + (1 << 20)
        self._grpc: GrpcServer | None = None
        self.address = ""

    async def start(self, address: str) -> str:
        """Serve on ``address`` (``unix:PATH`` or ``HOST:PORT``); the address bound (a TCP port 0 resolved)."""
        if address.startswith("unix:"):
            host, port = address, 0
        else:
            host_part, _, port_text = address.rpartition(":")
            host, port = host_part.strip("[]"), int(port_text)
        self._grpc = GrpcServer(self._table, readiness=self._readiness, metrics=self._metrics, host=host, port=port,
                                max_request_bytes=self._max_request_bytes, gate=self._gate, tls=self._tls)
        bound = await self._grpc.start()
        if address.startswith("unix:"):
            os.chmod(address[5:], 0o600)
            self.address = address
        else:
            self.address = f"[{host}]:{bound}" if ":" in host else f"{host}:{bound}"
        return self.address

    async def stop(self, grace: float | None = None) -> None:
        if self._grpc is not None:
            await self._grpc.stop(grace)
            self._grpc = None
