"""A sandbox's network when its policy is an allowlist: two network namespaces joined by one veth pair.

    sandbox netns  (lo, veth 169.254.77.2/30, no default route)
        |  veth pair
    proxy netns    (veth 169.254.77.1/30; nothing listens but the egress proxy's socket)

The sandbox's only route is the /30 to the proxy's side, so a program that ignores ``HTTP_PROXY`` reaches nothing.
The proxy's end is not in the host's namespace on purpose: there, every host service bound to 0.0.0.0 would answer
on the veth address too. In a namespace of its own, the one listening socket is the proxy's, created there (pyroute2
hands it over from a child that entered the namespace) and served by the proxy in the host's process, whose
outgoing connections are made from the host's namespace. Since each pair lives in namespaces of its own, every
sandbox can use the same two addresses.

The sandbox's processes join the namespace by ``setns`` between fork and exec (``enter_hook``), before bwrap
starts: bwrap can only unshare a new network namespace, not join one, so it runs without ``--unshare-net`` and
inherits this one. Inside bwrap's new user namespace the program holds no capability over a namespace owned by the
host's user namespace, so it cannot add a route or an address.

Building namespaces takes root (CAP_SYS_ADMIN and CAP_NET_ADMIN); without it an allowlist is refused. Names carry
the creating process's pid, so ``sweep_stale`` removes what a crashed process left behind, and nothing else.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from evalsi.errors import EvalsiError

__all__ = ["PROXY_ADDRESS", "SANDBOX_ADDRESS", "EgressNetwork", "NetnsUnavailable", "create_network", "enter_hook",
           "listening_socket", "remove_network", "sweep_stale"]

NETNS_DIR = Path("/run/netns")
PROXY_ADDRESS = "169.254.77.1"
SANDBOX_ADDRESS = "169.254.77.2"
_PREFIX = 30
_CLONE_NEWNET = 0x40000000
_NAME = re.compile(r"^evalsi-(\d+)-[0-9a-f]{8}-[sp]$")
_LIBC = ctypes.CDLL(None, use_errno=True)


class NetnsUnavailable(EvalsiError):
    """The namespaces of an allowlist cannot be built here (not root, no netns support)."""

    code = "SANDBOX_UNAVAILABLE"


@dataclass(frozen=True)
class EgressNetwork:
    sandbox_netns: str
    proxy_netns: str
    proxy_veth: str
    sandbox_veth: str

    @property
    def sandbox_path(self) -> str:
        return str(NETNS_DIR / self.sandbox_netns)


def create_network() -> EgressNetwork:
    """Both namespaces and the veth pair, addressed and up (blocking: call it in a thread)."""
    if os.geteuid() != 0:
        raise NetnsUnavailable("network: an allowlist needs a network namespace of its own, which only root "
                               "(CAP_SYS_ADMIN and CAP_NET_ADMIN) can build; run sandboxd as root or use network: deny")
    from pyroute2 import IPRoute  # heavy: only sandboxes with an allowlist pay its import

    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    network = EgressNetwork(f"evalsi-{tag}-s", f"evalsi-{tag}-p", f"ev{tag[-8:]}p", f"ev{tag[-8:]}s")
    try:
        _new_netns(network.sandbox_netns)
        _new_netns(network.proxy_netns)
        sandbox_fd = os.open(NETNS_DIR / network.sandbox_netns, os.O_RDONLY | os.O_CLOEXEC)
        proxy_fd = os.open(NETNS_DIR / network.proxy_netns, os.O_RDONLY | os.O_CLOEXEC)
        try:
            with IPRoute() as ipr:
                ipr.link("add", ifname=network.proxy_veth, kind="veth",
                         peer={"ifname": network.sandbox_veth, "net_ns_fd": sandbox_fd})
                ipr.link("set", index=ipr.link_lookup(ifname=network.proxy_veth)[0], net_ns_fd=proxy_fd)
        finally:
            os.close(sandbox_fd)
            os.close(proxy_fd)
        for name, veth, address in ((network.proxy_netns, network.proxy_veth, PROXY_ADDRESS),
                                    (network.sandbox_netns, network.sandbox_veth, SANDBOX_ADDRESS)):
            _inside(name, functools.partial(_address, veth, address))
    except Exception as exc:
        remove_network(network)
        if isinstance(exc, OSError):
            raise NetnsUnavailable(f"network: cannot build the allowlist's network namespace: {exc}") from exc
        raise
    return network


def _address(veth: str, address: str) -> None:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=veth)[0]
        ipr.addr("add", index=index, address=address, prefixlen=_PREFIX)
        ipr.link("set", index=index, state="up")
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def listening_socket(network: EgressNetwork) -> socket.socket:
    """A TCP socket listening on the proxy's address inside the proxy's namespace (an ephemeral port): made by a
    thread that entered the namespace, it stays there while the proxy serves it from the host's."""

    def listen() -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind((PROXY_ADDRESS, 0))
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        return listener

    return _inside(network.proxy_netns, listen)


_T = TypeVar("_T")


def _in_thread(work: Callable[[], _T]) -> _T:
    """``work`` on a thread of its own that ends with it, so a namespace it entered is never left on a thread that
    runs anything else. Threads, not a forked child (pyroute2's helpers fork): a fork of an asyncio service shares
    its signal wakeup fd, and a signal to the child would reach the service's loop."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="evalsi-netns")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return cast(_T, box["result"])


def _new_netns(name: str) -> None:
    """A network namespace bound at /run/netns/NAME (as ``ip netns add``), made by unsharing a throwaway thread."""
    from pyroute2 import netns

    def make() -> None:
        if _LIBC.unshare(_CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"unshare(CLONE_NEWNET): {os.strerror(code)}")
        netns.attach(name, "thread-self")

    _in_thread(make)


def _inside(name: str, work: Callable[[], _T]) -> _T:
    def entered() -> _T:
        fd = os.open(NETNS_DIR / name, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if _LIBC.setns(fd, _CLONE_NEWNET) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"setns into {name}: {os.strerror(code)}")
        finally:
            os.close(fd)
        return work()

    return _in_thread(entered)


def remove_network(network: EgressNetwork) -> None:
    """Both namespaces; the veth pair goes with them (blocking)."""
    for name in (network.sandbox_netns, network.proxy_netns):
        _remove(name)
    with contextlib.suppress(Exception):
        from pyroute2 import IPRoute

        # Only if a failed build left the pair in the host's namespace.
        with IPRoute() as ipr:
            for index in ipr.link_lookup(ifname=network.proxy_veth):
                ipr.link("del", index=index)


def _remove(name: str) -> None:
    path = NETNS_DIR / name
    if not path.exists():
        return
    from pyroute2 import netns

    with contextlib.suppress(OSError):
        netns.remove(name)


def sweep_stale() -> list[str]:
    """Remove the namespaces of processes that are gone (a crash skipped their removal); the names removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(NETNS_DIR):
            match = _NAME.match(entry.name)
            if match and not Path(f"/proc/{match.group(1)}").exists():
                _remove(entry.name)
                removed.append(entry.name)
    return removed


def enter_hook(netns_fd: int) -> Callable[[], None]:
    """A pre-exec step (process.Command.preexec) that moves the child into the namespace of ``netns_fd``; the
    libc handle is loaded in the parent, so the child only makes the system call."""
    setns = _LIBC.setns

    def enter() -> None:
        if setns(netns_fd, _CLONE_NEWNET) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"setns into the sandbox's network namespace: {os.strerror(code)}")

    return enter
