"""The seccomp-BPF filter of the namespaced rung, compiled once with libseccomp (pyseccomp) and handed to bwrap as
an fd (``--seccomp FD``), which loads it right before it executes the command.

The policy is a deny list on top of the namespaces: calls a sandboxed program never needs and that widen the
kernel's attack surface (module loading, kexec, mounts, new namespaces, ptrace of other processes, keyrings, bpf,
perf, userfaultfd, io_uring, handle-based opens) fail with EPERM, and sockets of any family but Unix, IPv4 and IPv6
fail with EAFNOSUPPORT (no raw netlink or packet sockets). ``clone3`` answers ENOSYS so libc falls back to ``clone``,
whose namespace flags the filter can inspect (clone3 passes them in memory, out of BPF's reach).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from typing import Any

__all__ = ["DENIED_SYSCALLS", "SeccompUnavailable", "compile_filter", "filter_fd"]

DENIED_SYSCALLS: tuple[str, ...] = (
    "acct", "add_key", "bpf", "delete_module", "finit_module", "fanotify_init", "fsconfig", "fsmount", "fsopen",
    "fspick", "init_module", "io_uring_enter", "io_uring_register", "io_uring_setup", "ioperm", "iopl", "kcmp",
    "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie", "mount", "mount_setattr", "move_mount",
    "name_to_handle_at", "nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pivot_root",
    "process_vm_readv", "process_vm_writev", "ptrace", "quotactl", "reboot", "request_key", "setns",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "swapoff", "swapon", "syslog", "umount2",
    "unshare", "uselib", "userfaultfd", "vhangup",
)
_ALLOWED_FAMILIES = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6)
# Every CLONE_NEW* flag: a clone that asks for any of them is refused (bwrap's own namespaces exist already).
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80


class SeccompUnavailable(RuntimeError):
    """libseccomp or its Python binding is missing: the rung reports the syscall filter as not enforced."""


def compile_filter() -> bytes:
    """The filter as raw BPF, for ``bwrap --seccomp``. Raises ``SeccompUnavailable`` without libseccomp."""
    try:
        import pyseccomp as seccomp  # optional: a heavy ctypes binding loaded by the rung that uses it
    except (ImportError, OSError) as exc:
        raise SeccompUnavailable(f"pyseccomp (libseccomp) is not available: {exc}") from None
    flt: Any = seccomp.SyscallFilter(seccomp.ALLOW)
    eperm = seccomp.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        _add(seccomp, flt, eperm, name)
    _add(seccomp, flt, seccomp.ERRNO(errno.ENOSYS), "clone3")
    _deny_clone_namespaces(seccomp, flt, eperm)
    _deny_socket_families(seccomp, flt)
    read_fd, write_fd = os.pipe()
    try:
        with os.fdopen(write_fd, "wb", closefd=False) as sink:
            flt.export_bpf(sink)
        os.close(write_fd)
        write_fd = -1
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def filter_fd(program: bytes) -> int:
    """A file descriptor holding ``program`` from its start, for ``--seccomp FD`` (the caller closes it)."""
    fd = os.memfd_create("evalsi-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _add(seccomp: Any, flt: Any, action: int, name: str) -> None:
    # A syscall this architecture or libseccomp does not know cannot be called either.
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        flt.add_rule(action, name)


def _deny_clone_namespaces(seccomp: Any, flt: Any, eperm: int) -> None:
    # One rule per flag: libseccomp's MASKED_EQ compares (arg & mask) == datum, so "any of these bits" needs one
    # comparison per bit.
    bit = 1
    while bit <= 0xFFFFFFFF:
        if _CLONE_NAMESPACES & bit:
            flt.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, bit, bit))
        bit <<= 1


def _deny_socket_families(seccomp: Any, flt: Any) -> None:
    refused = seccomp.ERRNO(errno.EAFNOSUPPORT)
    # Families are small integers (below 64 on every kernel); each one outside the allowed three is refused.
    for family in range(64):
        if family not in _ALLOWED_FAMILIES:
            flt.add_rule(refused, "socket", seccomp.Arg(0, seccomp.EQ, family))
    flt.add_rule(refused, "socket", seccomp.Arg(0, seccomp.GE, 64))
