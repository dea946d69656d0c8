"""A session's egress proxy and where it listens: in a network namespace pair of its own (the namespaced rung) or
on the host's loopback (the confined rung, which shares the host's network and limits TCP connect to the proxy's
port with Landlock). The session hands the program ``proxy_env`` and reads ``egress_log`` for sandboxd's Stats."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from evalsi.sandbox.egress import EgressProxy
from evalsi.sandbox.egress_config import EgressSettings
from evalsi.sandbox.model import EgressEvent, Endpoint
from evalsi.sandbox.netns import (
    PROXY_ADDRESS,
    EgressNetwork,
    create_network,
    listening_socket,
    remove_network,
    sweep_stale,
)

__all__ = ["EgressAttachment", "attach_loopback", "attach_netns", "event_dict", "proxy_env", "session_egress_log"]

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def proxy_env(url: str) -> dict[str, str]:
    """The variables HTTP clients read to find the proxy at ``url`` (the vm rung's guest reaches it elsewhere)."""
    return dict.fromkeys(_PROXY_VARIABLES, url)


class EgressAttachment:
    """One session's proxy (started) and, for the namespaced rung, its namespaces and an fd of the sandbox's."""

    def __init__(self, proxy: EgressProxy, address: str, port: int, network: EgressNetwork | None = None,
                 netns_fd: int | None = None) -> None:
        self.proxy, self.address, self.port = proxy, address, port
        self.network, self.netns_fd = network, netns_fd

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def proxy_env(self) -> dict[str, str]:
        return proxy_env(self.url)

    def describe(self, allow: Iterable[Endpoint]) -> str:
        listed = ",".join(f"{endpoint.host}:{endpoint.port}" for endpoint in allow)
        where = ("own network namespace, only route to the proxy" if self.network is not None
                 else f"tcp connect only to port {self.port}")
        return f"{where}; egress through the logging proxy {self.url} to {listed} only"

    def egress_log(self) -> tuple[EgressEvent, ...]:
        return self.proxy.egress_log()

    async def close(self) -> None:
        await self.proxy.close()
        if self.netns_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.netns_fd)
            self.netns_fd = None
        if self.network is not None:
            await asyncio.to_thread(remove_network, self.network)
            self.network = None


async def attach_netns(allow: Iterable[Endpoint], settings: EgressSettings) -> EgressAttachment:
    """A namespace pair and the proxy listening in the proxy's one (root only: netns.NetnsUnavailable)."""
    await asyncio.to_thread(sweep_stale)
    network = await asyncio.to_thread(create_network)
    listener: socket.socket | None = None
    netns_fd: int | None = None
    try:
        listener = await asyncio.to_thread(listening_socket, network)
        netns_fd = os.open(network.sandbox_path, os.O_RDONLY | os.O_CLOEXEC)
        proxy = EgressProxy(allow, settings)
        port = listener.getsockname()[1]
        await proxy.start(listener)
    except BaseException:
        if listener is not None:
            listener.close()
        if netns_fd is not None:
            os.close(netns_fd)
        await asyncio.to_thread(remove_network, network)
        raise
    return EgressAttachment(proxy, PROXY_ADDRESS, port, network, netns_fd)


async def attach_loopback(allow: Iterable[Endpoint], settings: EgressSettings) -> EgressAttachment:
    """The proxy on the host's 127.0.0.1 (an ephemeral port), for a rung that shares the host's network."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        proxy = EgressProxy(allow, settings)
        await proxy.start(listener)
    except BaseException:
        listener.close()
        raise
    return EgressAttachment(proxy, "127.0.0.1", listener.getsockname()[1])


async def session_egress_log(session: object) -> tuple[EgressEvent, ...]:
    """What a session's program reached or tried through its egress proxy: a local session's log, or sandboxd's
    Stats for a remote one whose isolation says it runs behind the proxy (no extra call for a denied network)."""
    local = getattr(session, "egress_log", None)
    if callable(local):
        return tuple(local())
    stats = getattr(session, "stats", None)
    isolation = getattr(session, "isolation", None)
    network = isolation.bounds.get("network", "") if isolation is not None else ""
    if callable(stats) and "logging proxy" in network:
        return tuple((await stats()).egress)
    return ()


def event_dict(event: EgressEvent) -> dict[str, Any]:
    """One log entry as plain data (score metadata, JSON)."""
    return asdict(event)
