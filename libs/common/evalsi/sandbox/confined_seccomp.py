"""The confined rung's syscall filters: the namespaced rung's deny list (``seccomp.compile_filter``: mounts, new
namespaces, ptrace, bpf, keyrings, io_uring, exotic socket families, ...) and, on top, the sockets Landlock does not
govern: ``socket(AF_UNIX)`` (a Unix socket named by path reaches host daemons; ``socketpair`` stays allowed), and UDP
and raw IPv4/IPv6 sockets (Landlock's network rules are TCP only). Each refused call fails with EPERM.
"""

from __future__ import annotations

import errno
import socket
import tempfile
from typing import Any

from evalsi.sandbox.seccomp import SeccompUnavailable, compile_filter

__all__ = ["BOUND", "confined_filters"]

BOUND = ("seccomp-bpf: the namespaced rung's deny list; no socket(AF_UNIX) (socketpair allowed), no udp or raw "
         "IPv4/IPv6 sockets")


def confined_filters() -> list[bytes]:
    """Both programs as raw BPF, loaded one after the other (seccomp filters stack). ``SeccompUnavailable`` without
    libseccomp."""
    return [compile_filter(), _sockets_filter()]


def _sockets_filter() -> bytes:
    try:
        import pyseccomp as seccomp  # optional: a heavy ctypes binding, loaded only by the rung that uses it
    except (ImportError, OSError) as exc:
        raise SeccompUnavailable(f"pyseccomp (libseccomp) is not available: {exc}") from None
    flt: Any = seccomp.SyscallFilter(seccomp.ALLOW)
    eperm = seccomp.ERRNO(errno.EPERM)
    flt.add_rule(eperm, "socket", seccomp.Arg(0, seccomp.EQ, socket.AF_UNIX))
    for family in (socket.AF_INET, socket.AF_INET6):
        for kind in (socket.SOCK_DGRAM, socket.SOCK_RAW):
            # The type carries SOCK_NONBLOCK/SOCK_CLOEXEC in its high bits: only the low four name the kind.
            flt.add_rule(eperm, "socket", seccomp.Arg(0, seccomp.EQ, family),
                         seccomp.Arg(1, seccomp.MASKED_EQ, 0xF, int(kind)))
    with tempfile.TemporaryFile() as sink:
        flt.export_bpf(sink)
        sink.seek(0)
        return sink.read()
