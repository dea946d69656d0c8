"""The unprivileged host user sandboxed processes run as when evalsi runs as root (``sandbox.host_uid`` /
``host_gid``, default 65533:65533: a uid of evalsi's alone, see ``DEFAULT_HOST_ID``).

Run by root, bwrap would map the sandbox's uid 65534 to host uid 0: capabilities dropped, but every file the program
writes owned by host root, RLIMIT_NPROC never binding (the kernel exempts root) and any escape landing as root. So
the namespaced rung starts bwrap as this user (no supplementary groups, no capabilities, inheritable ones too: bwrap
refuses to start with any when it is not setuid) from ``HostUserThread``, a thread of this process that became the
user: on Linux credentials belong to a thread, and the vfork that starts bwrap copies the calling thread's, so no
``setpriv`` is executed in between (1.4 to 1.8 ms less CPU per execution, measured). The host-side steps that need
root stay with root: cgroups from outside while bwrap waits on its block fd; an allowlist's network namespace, joined
by the sandbox's own thread before it drops to the user (``HostUserThread``'s ``first`` step). Inside, uid 65534
then maps to the user. The confined rung's launcher drops to the same user itself.

bwrap, running as that user, resolves its bind sources with that user's permissions: the root filesystem (an image
directory, or one unpacked in the cache) and the workspace must lie under directories it can search.
``unreachable`` names the first one that is not, so a create is refused saying what to change instead of failing
inside bwrap.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import os
import platform
import resource
import stat
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

__all__ = ["DEFAULT_HOST_ID", "MAX_HOST_ID", "HostUser", "HostUserThread", "drops_privileges", "unreachable"]

# Not 65534 ("nobody"): a thread of this process runs as the host user (HostUserThread), and any process of that
# uid may signal it, SIGKILL included, which ends evalsi or sandboxd. Daemons run as nobody, and so does gVisor's
# Sentry. 65533 lies in the range Debian reserves (65000-65533), which no package allocates; operators who use it
# set sandbox.host_uid to a uid nothing else runs as.
DEFAULT_HOST_ID = 65533
MAX_HOST_ID = (1 << 32) - 2  # (uid_t)-1 means "unchanged" to the kernel


@dataclass(frozen=True)
class HostUser:
    uid: int = DEFAULT_HOST_ID
    gid: int = DEFAULT_HOST_ID

    def describe(self) -> str:
        return f"host uid {self.uid} gid {self.gid}, no supplementary groups"


def drops_privileges() -> bool:
    """Whether sandboxed processes are started as the host user: only root can, and only root must."""
    return os.geteuid() == 0


def _searchable(info: os.stat_result, user: HostUser) -> bool:
    if info.st_uid == user.uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid == user.gid:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def unreachable(path: Path, user: HostUser) -> str:
    """"" when ``user`` can search every directory from ``/`` down to ``path`` (itself included); else what stops
    it, naming the directory, its mode and owner. Mode bits only (no ACLs): the user has no supplementary groups."""
    current = Path("/")
    for part in Path(os.path.realpath(path)).parts[1:]:  # links resolved: their targets' directories count
        info = os.stat(current)
        if not _searchable(info, user):
            break
        current = current / part
    else:
        info = os.stat(current)
        if _searchable(info, user):
            return ""
    return (f"{current} (mode {stat.S_IMODE(info.st_mode):04o}, owner {info.st_uid}:{info.st_gid}) is not "
            f"searchable by host uid {user.uid} gid {user.gid}")


# setgroups, setresuid, setresgid, capset: called raw, they change the calling thread's credentials only (glibc's
# wrappers of the first three, and so os.setresuid, change every thread of the process).
_CRED_SYSCALLS = {"x86_64": (116, 117, 119, 126), "aarch64": (159, 147, 149, 91)}
_PR_SET_DUMPABLE = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
T = TypeVar("T")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _become(user: HostUser, first: Callable[[], None] | None = None) -> None:
    """This thread becomes ``user``, after ``first`` (a step that needs root, such as joining a network namespace)."""
    if first is not None:
        first()
    numbers = _CRED_SYSCALLS.get(platform.machine())
    if numbers is None:
        raise OSError(errno.ENOSYS, f"no credential system calls known for {platform.machine()}")
    libc = ctypes.CDLL(None, use_errno=True)
    setgroups, setresuid, setresgid, capset = numbers
    # Leaving uid 0 for ids all non-zero clears the permitted and effective capabilities (and the ambient ones); the
    # inheritable set is kept, so it is cleared too: the processes this thread starts begin with no capability.
    no_capabilities = (ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), ctypes.byref((_CapData * 2)()))
    for number, args in ((setgroups, (0, None)), (setresgid, (user.gid,) * 3), (setresuid, (user.uid,) * 3),
                         (capset, no_capabilities)):
        if libc.syscall(ctypes.c_long(number), *args) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"becoming host uid {user.uid} gid {user.gid}: {os.strerror(code)}")
    # This thread shares root's memory with the rest of the process: any process of the host user (another
    # sandbox's, or a daemon's running as nobody) could otherwise ptrace it. Not dumpable, ptrace needs
    # CAP_SYS_PTRACE. (The kernel already does this on the change of uid unless fs.suid_dumpable is 1.)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"making the process not dumpable: {os.strerror(code)}")


def _lower(pids: tuple[int, ...], limits: tuple[tuple[int, int], ...]) -> None:
    for pid in pids:
        for limit, value in limits:
            _, hard = resource.prlimit(pid, limit)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.prlimit(pid, limit, (value, value))


class HostUserThread:
    """A thread of this process running as the host user: it starts the sandbox's wrapper (``run``: the child of a
    vfork begins with the credentials of the thread that made it) and sets rlimits on the user's processes
    (``apply``).

    Rlimits: root here may lack CAP_SYS_RESOURCE (containers drop it), which prlimit(2) needs on another user's
    process; a thread with the target's own uid and gid needs nothing. The limits must be set from outside, once
    bwrap made its user namespaces (each sandbox's processes are then counted apart: RLIMIT_NPROC counts per user
    namespace, up to the limit its creator had): set before the exec, they would bound all sandboxes of that host uid
    together.

    The thread must outlive what it started: bwrap's ``--die-with-parent`` fires when its parent thread ends, so
    ``close`` (which ends it) kills whatever is still running."""

    def __init__(self, user: HostUser, first: Callable[[], None] | None = None) -> None:
        self.user = user
        # One worker thread: its credentials change once, in the initializer, before it runs anything.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"evalsi-uid-{user.uid}", initializer=_become,
                                            initargs=(user, first))

    async def run(self, work: Callable[[], T]) -> T:
        """``work`` done on the thread, as the host user."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, work)
        except BrokenExecutor:  # the initializer failed (the executor logged why)
            raise OSError(errno.EPERM, f"the thread that acts as the sandbox's host user could not set itself up "
                                       f"(its first step, or becoming host uid {self.user.uid} gid {self.user.gid}; "
                                       "the log says why)") from None

    async def apply(self, pids: tuple[int, ...], limits: tuple[tuple[int, int], ...]) -> None:
        await self.run(functools.partial(_lower, pids, limits))

    def close(self) -> None:
        self._executor.shutdown(wait=False)
