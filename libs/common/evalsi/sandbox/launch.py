"""The confined rung's launcher: apply rlimits, drop to an unprivileged user, apply a Landlock ruleset, exec.

A Landlock ruleset applies to the calling thread and is inherited across execve, so the driver starts this small
program (``python -I -S launch.py POLICY_JSON -- CMD ARGS...``) in place of the command: it bounds itself, confines
itself, then becomes the command. It imports only the standard library so it runs with ``-I -S`` (no site, no
environment), which keeps the rung's start in milliseconds, and so that nothing the sandboxed program's environment
names (PYTHONPATH, a planted site-packages) is ever loaded into it.

Failures of the launcher itself (a bad policy, Landlock missing, an rlimit refused) are infrastructure, never the
program's behavior. They are written to the status descriptor the driver passed (``status_fd`` in the policy,
close-on-exec), never to stderr: once the command has been exec'd that descriptor is closed, so the command cannot
forge a runner failure. An exec refused by the ruleset (EACCES) is the program's denial and is reported as such.

The policy (JSON): ``read``/``write`` (paths: directories get directory rights, files file rights), ``connect`` and
``bind`` (TCP ports allowed on ABI >= 4; everything else is denied), ``scope`` (on ABI >= 6: no signals to and no
abstract Unix sockets of processes outside the sandbox), ``rlimits`` (name -> value), ``uid``/``gid`` (taken when
started as root), ``cwd``, ``min_abi`` (below it the launcher refuses to run anything), ``seccomp_fd`` (seccomp
programs to load after the ruleset).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import stat
import sys
from typing import Any

__all__ = ["ABI_NET", "ABI_SCOPE", "LaunchError", "Plan", "SeccompProgram", "build_ruleset", "enter", "fs_rights",
           "landlock_abi", "load_libc", "pack_programs", "plan_rules"]

# Kernel constants (include/uapi/linux/landlock.h). The syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1
ABI_NET = 4  # TCP bind/connect rules (Linux 6.7)
ABI_SCOPE = 6  # signal and abstract Unix socket scoping (Linux 6.12)

# Rights a rule on a non-directory may carry (the kernel refuses directory rights on a file: EINVAL).
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# Exit status of a launcher failure (like env(1) and timeout(1)); the status descriptor says it was ours.
RUNNER_EXIT = 125
_RLIMITS = {"AS": resource.RLIMIT_AS, "NPROC": resource.RLIMIT_NPROC, "CPU": resource.RLIMIT_CPU,
            "FSIZE": resource.RLIMIT_FSIZE, "CORE": resource.RLIMIT_CORE, "NOFILE": resource.RLIMIT_NOFILE}


def fs_rights(abi: int) -> int:
    """Every filesystem right this ABI knows: all of them are handled (denied unless a rule allows them)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class Plan:
    """What one policy becomes on one ABI: the handled rights, the rules, and what this ABI cannot enforce."""

    def __init__(self, abi: int) -> None:
        self.abi = abi
        self.handled_fs = fs_rights(abi)
        self.handled_net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= ABI_NET else 0
        self.scoped = 0
        self.paths: list[tuple[str, int, int]] = []  # (path, rights for a directory, rights for a file)
        self.ports: list[tuple[int, int]] = []  # (port, rights)
        self.not_enforced: list[str] = []


def plan_rules(policy: dict[str, Any], abi: int) -> Plan:
    """The ruleset ``policy`` asks for, as far as ``abi`` can express it (pure: the driver reports from it too)."""
    plan = Plan(abi)
    read_dir = READ_FILE | READ_DIR | EXECUTE
    for path in policy.get("read", ()):
        plan.paths.append((str(path), read_dir, read_dir & _FILE_ONLY))
    for path in policy.get("write", ()):
        plan.paths.append((str(path), plan.handled_fs, plan.handled_fs & _FILE_ONLY))
    if plan.handled_net:
        plan.ports.extend((int(port), NET_CONNECT_TCP) for port in policy.get("connect", ()))
        plan.ports.extend((int(port), NET_BIND_TCP) for port in policy.get("bind", ()))
    else:
        plan.not_enforced.append(f"tcp bind/connect (Landlock ABI {abi} < {ABI_NET})")
    if policy.get("scope", True):
        if abi >= ABI_SCOPE:
            plan.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL
        else:
            plan.not_enforced.append(f"signal and abstract-unix scoping (Landlock ABI {abi} < {ABI_SCOPE})")
    return plan


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class LaunchError(Exception):
    """A launcher failure: infrastructure, reported on the status descriptor."""


def load_libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(libc: ctypes.CDLL, number: int, *args: Any) -> int:
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def landlock_abi(libc: ctypes.CDLL | None = None) -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    try:
        return _syscall(libc or load_libc(), _SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_CREATE_RULESET_VERSION))
    except OSError:
        return 0


def build_ruleset(libc: ctypes.CDLL, plan: Plan) -> int:
    """The ruleset ``plan`` describes, as a descriptor (the caller closes it). Built before the fork or exec that
    applies it: opening the rule paths and adding rules touches nothing of the calling process."""
    attr = _RulesetAttr(plan.handled_fs, plan.handled_net, plan.scoped)
    # The kernel takes the struct's size as the ABI the caller knows: older kernels refuse fields they lack.
    size = 24 if plan.abi >= ABI_SCOPE else 16 if plan.abi >= ABI_NET else 8
    try:
        ruleset = _syscall(libc, _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    except OSError as exc:
        raise LaunchError(f"landlock_create_ruleset: {exc.strerror}") from None
    try:
        for path, dir_rights, file_rights in plan.paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError as exc:
                raise LaunchError(f"rule path {path}: {exc.strerror}") from None
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneathAttr(dir_rights if is_dir else file_rights, fd)
                _syscall(libc, _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                         ctypes.byref(rule), ctypes.c_uint32(0))
            except OSError as exc:
                raise LaunchError(f"landlock_add_rule {path}: {exc.strerror}") from None
            finally:
                os.close(fd)
        for port, rights in plan.ports:
            net = _NetPortAttr(rights, port)
            try:
                _syscall(libc, _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_NET_PORT),
                         ctypes.byref(net), ctypes.c_uint32(0))
            except OSError as exc:
                raise LaunchError(f"landlock_add_rule port {port}: {exc.strerror}") from None
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


class SeccompProgram:
    """Raw seccomp-BPF programs (``struct sock_filter`` arrays) held ready to load between fork and exec: their
    ``struct sock_fprog`` are built here, in the parent, so loading them allocates nothing."""

    def __init__(self, programs: list[bytes]) -> None:
        self._buffers = [ctypes.create_string_buffer(program, len(program)) for program in programs]
        self._fprogs = [_SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
                        for program, buffer in zip(programs, self._buffers, strict=True)]

    def load(self, libc: ctypes.CDLL) -> None:
        for fprog in self._fprogs:
            if libc.prctl(ctypes.c_int(_PR_SET_SECCOMP), ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                          ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
                code = ctypes.get_errno()
                raise LaunchError(f"loading the seccomp filter: {os.strerror(code)}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def enter(libc: ctypes.CDLL, policy: dict[str, Any], ruleset: int, seccomp: SeccompProgram | None = None) -> None:
    """Bound, drop privileges, confine with ``ruleset`` (and ``seccomp``) and change to the working directory:
    everything but the exec. Only system calls and no allocation worth the name, so it also runs between fork and
    exec."""
    _apply_rlimits(dict(policy.get("rlimits", {})))
    _drop_privileges(policy)
    try:
        _no_new_privs(libc)
        _syscall(libc, _SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    except OSError as exc:
        raise LaunchError(f"landlock_restrict_self: {exc.strerror}") from None
    if seccomp is not None:
        seccomp.load(libc)
    if policy.get("cwd"):
        try:
            os.chdir(str(policy["cwd"]))
        except OSError as exc:
            raise LaunchError(f"chdir {policy['cwd']}: {exc.strerror}") from None


def _no_new_privs(libc: ctypes.CDLL) -> None:
    if libc.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                  ctypes.c_ulong(0)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _apply_rlimits(limits: dict[str, Any]) -> None:
    for name, value in limits.items():
        if name not in _RLIMITS:
            raise LaunchError(f"rlimit {name!r}: unknown; accepted: {', '.join(_RLIMITS)}")
        try:
            resource.setrlimit(_RLIMITS[name], (int(value), int(value)))
        except (OSError, ValueError) as exc:
            raise LaunchError(f"setrlimit {name}={value}: {exc}") from None


def _drop_privileges(policy: dict[str, Any]) -> None:
    """As root, become ``uid``/``gid`` with no supplementary groups: the change from uid 0 clears every capability."""
    if os.geteuid() != 0 or policy.get("uid") is None:
        return
    try:
        os.setgroups([])
        os.setresgid(int(policy["gid"]), int(policy["gid"]), int(policy["gid"]))
        os.setresuid(int(policy["uid"]), int(policy["uid"]), int(policy["uid"]))
    except OSError as exc:
        raise LaunchError(f"dropping to uid {policy['uid']}: {exc.strerror}") from None


def confine(policy: dict[str, Any]) -> None:
    """Bound, drop privileges and confine the calling process as ``policy`` says (everything but the exec). The
    seccomp programs, when the driver passes them, come on the descriptor ``seccomp_fd`` (concatenated, each
    preceded by its length as 4 little-endian bytes)."""
    libc = load_libc()
    abi = landlock_abi(libc)
    if abi < int(policy.get("min_abi", 1)):
        raise LaunchError(f"Landlock ABI {abi} is below the required {policy.get('min_abi', 1)}"
                          + (" (Landlock missing or disabled)" if abi == 0 else ""))
    seccomp = _read_programs(int(policy["seccomp_fd"])) if policy.get("seccomp_fd") is not None else None
    ruleset = build_ruleset(libc, plan_rules(policy, abi))
    try:
        enter(libc, policy, ruleset, seccomp)
    finally:
        os.close(ruleset)


def pack_programs(programs: list[bytes]) -> bytes:
    return b"".join(len(program).to_bytes(4, "little") + program for program in programs)


def _read_programs(fd: int) -> SeccompProgram:
    try:
        with os.fdopen(fd, "rb") as source:
            data = source.read(1 << 20)
    except OSError as exc:
        raise LaunchError(f"reading the seccomp programs: {exc.strerror}") from None
    programs, position = [], 0
    while position + 4 <= len(data):
        size = int.from_bytes(data[position:position + 4], "little")
        programs.append(data[position + 4:position + 4 + size])
        position += 4 + size
    if position != len(data) or any(len(program) % 8 for program in programs):
        raise LaunchError("the seccomp programs are malformed")
    return SeccompProgram(programs)


def _report(status_fd: int, kind: str, text: str) -> None:
    if status_fd >= 0:
        with contextlib.suppress(OSError):
            os.write(status_fd, json.dumps({"kind": kind, "message": text}).encode()[:4000])
    sys.stderr.write(f"evalsi launch: {text}\n")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: launch.py POLICY_JSON -- CMD [ARGS...]\n")
        return 2
    status_fd = -1
    try:
        policy = json.loads(argv[0])
        status_fd = int(policy.get("status_fd", -1))
        if status_fd >= 0:
            # pass_fds made it inheritable: closed on exec again, so the command never holds it
            os.set_inheritable(status_fd, False)
        command = argv[2:]
        confine(policy)
    except LaunchError as exc:
        _report(status_fd, "runner_failure", str(exc))
        return RUNNER_EXIT
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        _report(status_fd, "runner_failure", f"bad policy: {exc}")
        return RUNNER_EXIT
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        # The command is the program's: a refused or missing binary is its outcome, not the runner's.
        kind = "denied" if exc.errno in (errno.EACCES, errno.EPERM) else "exec_failed"
        _report(status_fd, kind, f"exec {command[0]}: {exc.strerror}")
        return 126 if kind == "denied" else 127
    return RUNNER_EXIT  # not reached: execvp returns only by raising


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
