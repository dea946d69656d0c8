"""The ``confined`` rung: Landlock (§13). Same world as the host (no separate mount or PID view), but the kernel
confines what the program may read, write and execute, and (ABI >= 4) which TCP ports it may bind or connect to,
and (ABI >= 6) keeps its signals and abstract Unix sockets inside the sandbox.

Each execution is confined between fork and exec (the ruleset built here, ``launch.enter`` in the child: rlimits,
then as root the host user ``sandbox.host_uid``/``host_gid`` (65533 by default, host_user.py) with no
supplementary groups or capabilities, then the ruleset and the seccomp filters), or with ``mode:
launcher`` by ``launch.py`` under ``python -I -S`` doing the same before it execs.

What a session may touch: the host's ``/usr`` (and the few ``/etc`` files a dynamic program reads) read-only, a few
device nodes, and its own workspace and temporary directory read-write.
Nothing else: not the rest of ``/etc``, ``/home``, ``/proc`` (so not the parent's environment), ``/tmp`` or
another session's workspace. An image root cannot be shown as ``/`` without a mount namespace, so this rung refuses
the runtime image (the default root), image and tarball roots (fail closed) rather than run the program on the
host's ``/usr`` instead: it serves only ``sandbox.root: host`` (trusted code), and its probe says so otherwise.

Enforcement is ``full`` on ABI >= 6, ``partial`` below, with what is missing in ``not_enforced``. Landlock governs
TCP only, so a seccomp filter (``confined_seccomp``) refuses what it leaves open: Unix sockets (a path reaches host
daemons), UDP and raw sockets, on top of the namespaced rung's deny list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox import launch
from evalsi.sandbox.cgroups import CgroupLayout, ExecutionCgroups, discover_layout
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.confined_seccomp import BOUND as SECCOMP_BOUND
from evalsi.sandbox.confined_seccomp import confined_filters
from evalsi.sandbox.egress_attach import EgressAttachment, attach_loopback
from evalsi.sandbox.host_files import read_beneath, write_beneath
from evalsi.sandbox.model import (
    EgressEvent,
    ExecResult,
    IsolationReport,
    Level,
    Outcome,
    OutputSink,
    ProbeVerdict,
    RootFilesystem,
    SandboxSpec,
    SandboxUnavailable,
)
from evalsi.sandbox.probing import true_fails
from evalsi.sandbox.process import COMMON_DENIALS, Command, Dialect, Finished, classify, run_command
from evalsi.sandbox.seccomp import SeccompUnavailable
from evalsi.sandbox.spawned import DEFAULT_MAX_LINE, InputChannel, SandboxProcess, start_process

__all__ = ["LandlockDriver", "LandlockSession", "LaunchStatus", "classify_confined", "parse_status"]

NAME = "landlock"
# Host paths a dynamically linked program needs to start, read-only; missing ones are left out.
_READ_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_READ_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf",
               "/dev/urandom", "/dev/random", "/dev/zero")
_WRITE_FILES = ("/dev/null",)
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_KILL_GRACE_S = 1.0
# Landlock's refusals reach the program as EACCES; the rlimits and cgroups in the words process.py knows.
DENIALS = ((re.compile(r"Permission denied|PermissionError|\[Errno 13\]"), "landlock: permission denied"),
           *COMMON_DENIALS)


@dataclass(frozen=True)
class LaunchStatus:
    """What the launcher wrote on its status descriptor: nothing once the command was exec'd."""

    kind: str = ""
    message: str = ""


def parse_status(raw: bytes) -> LaunchStatus:
    if not raw:
        return LaunchStatus()
    try:
        value = json.loads(raw)
    except ValueError:
        return LaunchStatus("runner_failure", f"unreadable launcher status {raw[:200]!r}")
    if not isinstance(value, dict):
        return LaunchStatus("runner_failure", "bad launcher status")
    return LaunchStatus(str(value.get("kind", "runner_failure")), str(value.get("message", ""))[:500])


def classify_confined(finished: Finished, status: LaunchStatus, *, oom_killed: bool = False,
                      pids_exhausted: bool = False) -> Outcome:
    """The confined rung's dialects: the launcher's status report is ours (a runner failure, or an exec the ruleset
    refused); the cgroups' verdicts, signals and denial texts are the program's behavior under the policy. Nothing
    the program prints makes a runner failure: only the status descriptor, closed at exec, does."""

    def runner_failure(done: Finished) -> str:
        if done.spawn_error:
            return f"landlock: cannot start the command: {done.spawn_error}"
        return f"landlock launch: {status.message}" if status.kind == "runner_failure" else ""

    if status.kind == "denied" and not finished.timed_out:
        return Outcome("denied", effect=f"landlock: {status.message}", code=finished.returncode)
    return classify(finished, Dialect(runner_failure, DENIALS), oom_killed=oom_killed, pids_exhausted=pids_exhausted)


async def _bounded(running: Awaitable[tuple[Finished, LaunchStatus]], limit: float,
                   groups: ExecutionCgroups) -> tuple[Finished, LaunchStatus]:
    """The execution, ended past its timeout even when a descendant left the process group (setsid) with the
    output pipes open: Python 3.11's Process.wait() waits for them, so the cgroup's kill is what closes them."""
    task = asyncio.ensure_future(running)
    try:
        done, _ = await asyncio.wait({task}, timeout=limit + _KILL_GRACE_S)
    except BaseException:  # cancelled (a spawned process killed): the execution with it, its group killed
        task.cancel()
        raise
    if done:
        return task.result()
    await groups.close()
    try:
        return await asyncio.wait_for(asyncio.shield(task), _KILL_GRACE_S * 5)
    except TimeoutError:
        # No cgroup held the stragglers: the output is abandoned, the outcome is the timeout it is.
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        return Finished(-9, timed_out=True, duration_s=limit), LaunchStatus()


def _memfd(data: bytes) -> int:
    fd = os.memfd_create("evalsi-landlock-seccomp", os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _drain(fd: int) -> bytes:
    """The status descriptor's bytes: every writer is gone once the launcher exec'd or exited."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    with contextlib.suppress(BlockingIOError):
        while len(chunks) < 4 and (chunk := os.read(fd, 4096)):
            chunks.append(chunk)
    return b"".join(chunks)


def _existing(paths: tuple[str, ...]) -> list[str]:
    return [path for path in paths if os.path.exists(path)]


def _no_image_root(root: RootFilesystem) -> str:
    what = "the runtime image (the default root)" if root.kind == "runtime" else f"a {root.kind} root"
    return (f"Landlock cannot show {what} as / (it has no mount namespace: the program sees the host's own files, "
            "read rules narrowed); it runs only with the host root (sandbox.root: host, trusted code); untrusted "
            "code needs a namespaced or stronger rung")


class LandlockDriver:
    """``confined``: probed by running the real profile against ``true``; with a root other than the host's (the
    runtime image by default) it is unavailable, failing closed, and its verdict says why."""

    name = NAME
    level = Level.CONFINED

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        options = self.config.driver_options(NAME)
        self.python = str(options.get("python") or sys.executable)
        # "fork" (default): confined between fork and exec; "launcher": through launch.py (a fresh interpreter).
        self.mode = str(options.get("mode") or "fork")
        if self.mode not in ("fork", "launcher"):
            raise BadInputError(f"sandbox.drivers.landlock.mode: {self.mode!r}; accepted: fork, launcher")
        self.libc = launch.load_libc()
        # Compiled once per driver; None (and the report says so) where libseccomp is missing.
        self.seccomp_error = ""
        try:
            self.seccomp_programs: list[bytes] | None = confined_filters()
        except SeccompUnavailable as exc:
            self.seccomp_programs, self.seccomp_error = None, str(exc)
        self.seccomp = launch.SeccompProgram(self.seccomp_programs) if self.seccomp_programs else None
        self.base_dir = Path(str(options.get("dir") or Path(tempfile.gettempdir()) / "evalsi-landlock"))
        self.abi = launch.landlock_abi()
        self.cgroups: CgroupLayout = discover_layout(self.config.cgroup)

    def not_enforced(self, spec: SandboxSpec) -> tuple[str, ...]:
        missing = list(launch.plan_rules({"scope": True}, max(self.abi, 1)).not_enforced)
        if self.seccomp_programs is None:
            missing.append(f"syscall filter ({self.seccomp_error})")
        if not spec.network.denied:
            # Landlock rules are per port: a program ignoring the proxy may connect to the proxy's port number on
            # any host; through the proxy, only the listed host:port pairs.
            missing.append("egress allowlist by host for direct connections (Landlock allows the egress proxy's "
                           "port to any host)")
        return tuple(missing)

    async def probe(self) -> ProbeVerdict:
        if self.abi == 0:
            return ProbeVerdict(NAME, self.level, False, reason="Landlock is missing or disabled in this kernel")
        if self.config.root.kind != "host":  # the configured root (by default the runtime image) cannot be had here
            return ProbeVerdict(NAME, self.level, False, reason=_no_image_root(self.config.root))
        spec = SandboxSpec(min_isolation=Level.CONFINED, root=self.config.root,
                           resources=replace(self.config.resources, timeout_s=10.0))
        try:
            session = await self.create(spec)
        except (OSError, SandboxUnavailable) as exc:
            return ProbeVerdict(NAME, self.level, False, reason=f"cannot create a session: {exc}")
        failure = await true_fails(session)
        if failure:
            return ProbeVerdict(NAME, self.level, False, reason=f"`true` under the profile: {failure}")
        missing = self.not_enforced(spec)
        return ProbeVerdict(NAME, self.level, True, "partial" if missing else "full", not_enforced=missing)

    async def create(self, spec: SandboxSpec) -> LandlockSession:
        if spec.root.kind != "host":
            raise SandboxUnavailable(spec.min_isolation, (ProbeVerdict(
                NAME, self.level, False, reason=_no_image_root(spec.root)),))
        if spec.min_isolation > self.level:
            raise SandboxUnavailable(spec.min_isolation, (ProbeVerdict(NAME, self.level, True),))
        session = await asyncio.to_thread(LandlockSession.start, self, spec)
        if spec.network.allow:
            # The same world as the host: the proxy on the host's loopback, TCP connect allowed to its port only.
            try:
                session.egress = await attach_loopback(spec.network.allow, self.config.egress)
            except BaseException:
                await session.destroy()
                raise
            session.isolation = session._report()
        return session


class LandlockSession:
    """A workspace and a temporary directory on the host (``host_workspace``), each execution confined to them."""

    def __init__(self, driver: LandlockDriver, spec: SandboxSpec, root: Path) -> None:
        self.id = f"landlock-{uuid.uuid4().hex[:12]}"
        self.driver, self.spec, self.root = driver, spec, root
        self.host_workspace = str(root / "workspace")
        self.tmp = str(root / "tmp")
        self.egress: EgressAttachment | None = None
        self.isolation = self._report()
        self._destroyed = False

    @classmethod
    def start(cls, driver: LandlockDriver, spec: SandboxSpec) -> LandlockSession:
        driver.base_dir.mkdir(parents=True, exist_ok=True, mode=0o711)
        root = Path(tempfile.mkdtemp(prefix="s-", dir=driver.base_dir))
        for part in ("workspace", "tmp"):
            (root / part).mkdir(mode=0o700)
        if os.geteuid() == 0:
            for path in (root, root / "workspace", root / "tmp"):
                os.chown(path, driver.config.host_uid, driver.config.host_gid)
        return cls(driver, spec, root)

    def _report(self) -> IsolationReport:
        resources = self.spec.resources
        abi = self.driver.abi
        network = (f"tcp bind and connect denied (Landlock ABI {abi})" if self.egress is None else
                   self.egress.describe(self.spec.network.allow))
        bounds = {
            "filesystem": f"landlock ABI {abi}: read /usr and runtime files, "
                          + ("read the workspace, write only its tmp" if self.spec.file_access == "read-only"
                             else "write the workspace and its tmp only"),
            "network": network + ("" if abi >= launch.ABI_NET else " (not governed on this ABI)")
                       + ("; udp, raw and unix sockets refused (seccomp)" if self.driver.seccomp_programs else ""),
            "memory": f"rlimit AS={resources.memory_bytes}",
            "pids": f"rlimit NPROC={resources.pids} (per uid {self._uid()})",
            **self._cgroup_bounds(),
            "user": f"host uid {self._uid()} gid {self._gid()}, no supplementary groups, no capabilities",
            "timeout": f"wall clock {resources.timeout_s:g}s, process group killed",
            "output": f"{resources.output_bytes} bytes per stream",
        }
        if resources.cpu_seconds:
            bounds["cpu"] = f"rlimit CPU={resources.cpu_seconds}"
        if abi >= launch.ABI_SCOPE:
            bounds["scope"] = "signals and abstract unix sockets scoped to the sandbox"
        if self.driver.seccomp_programs:
            bounds["syscalls"] = SECCOMP_BOUND
        missing = self.driver.not_enforced(self.spec)
        return IsolationReport(NAME, Level.CONFINED, "partial" if missing else "full", bounds, missing,
                               self.spec.min_isolation)

    def _uid(self) -> int:
        """The host uid the launcher runs the program as: the configured host user when we are root."""
        return self.driver.config.host_uid if os.geteuid() == 0 else os.getuid()

    def _gid(self) -> int:
        return self.driver.config.host_gid if os.geteuid() == 0 else os.getgid()

    def _cgroup_bounds(self) -> dict[str, str]:
        """What a cgroup adds where this host has one (the exact files are in each execution's groups)."""
        layout = self.driver.cgroups
        resources = self.spec.resources
        bounds: dict[str, str] = {}
        if layout.v2_limits is not None:
            bounds["memory"] = f"cgroup v2 memory.max={resources.memory_bytes} and rlimit AS"
            bounds["pids"] = f"cgroup v2 pids.max={resources.pids}"
        else:
            if layout.v1_memory is not None:
                bounds["memory"] = f"cgroup v1 memory.limit_in_bytes={resources.memory_bytes} and rlimit AS"
            if layout.v1_pids is not None:
                bounds["pids"] = f"cgroup v1 pids.max={resources.pids}"
        if layout.v2_plain is not None or layout.v2_limits is not None:
            bounds["cleanup"] = "cgroup v2 cgroup.kill"
        return bounds

    def policy(self, status_fd: int) -> dict[str, Any]:
        resources = self.spec.resources
        rlimits: dict[str, int] = {"AS": resources.memory_bytes, "CORE": 0, "FSIZE": resources.disk_bytes,
                                   "NOFILE": 1024}
        if self.driver.cgroups.v1_pids is None and self.driver.cgroups.v2_limits is None:
            # NPROC counts every process of the uid, so it is the pids bound only where no pids cgroup is
            rlimits["NPROC"] = resources.pids
        if resources.cpu_seconds:
            rlimits["CPU"] = resources.cpu_seconds
        read_only = self.spec.file_access == "read-only"
        return {
            "read": [*_existing(_READ_DIRS), *_existing(_READ_FILES), *([self.host_workspace] if read_only else [])],
            "write": [*([] if read_only else [self.host_workspace]), self.tmp, *_existing(_WRITE_FILES)],
            "connect": [self.egress.port] if self.egress is not None else [],
            "bind": [],
            "scope": True,
            "rlimits": rlimits,
            "uid": self.driver.config.host_uid, "gid": self.driver.config.host_gid,
            "cwd": self.host_workspace,
            "status_fd": status_fd,
        }

    def environment(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = {"PATH": _DEFAULT_PATH, "HOME": self.host_workspace, "TMPDIR": self.tmp, "LANG": "C.UTF-8"}
        for source in (self.spec.env, extra or {}):
            for key, value in source.items():
                if not key or "=" in key or "\0" in key or "\0" in value:
                    raise BadInputError(f"env: {key!r} is not a valid variable (no '=', no NUL)")
                env[key] = value
        if self.egress is not None:
            env.update(self.egress.proxy_env())
        return env

    async def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout_s: float | None = None,
                    max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess:
        """``argv`` as a long-lived execution with streams (spawned.py): this ruleset and these bounds, the timeout
        its lifetime."""
        return start_process(self.exec, argv, env=env, timeout_s=timeout_s, max_line=max_line)

    async def exec(self, argv: list[str], *, stdin: bytes | InputChannel = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        if self._destroyed:
            raise BadInputError(f"sandbox {self.id} was destroyed")
        if not argv:
            raise BadInputError("argv: empty; give the command to run")
        resources = self.spec.resources
        environment = self.environment(env)
        groups = await asyncio.to_thread(ExecutionCgroups.create, self.driver.cgroups,
                                         memory_bytes=resources.memory_bytes, pids=resources.pids)
        started = time.monotonic()
        try:
            limit = timeout_s or resources.timeout_s
            run = self._launched if self.driver.mode == "launcher" else self._forked
            finished, status = await _bounded(run(argv, environment, stdin, limit, groups, on_output), limit, groups)
            # The groups' counters are read before close() kills what left the process group and removes them.
            outcome = classify_confined(finished, status, oom_killed=groups.oom_killed(),
                                        pids_exhausted=groups.pids_exhausted())
            cpu_s, peak = groups.cpu_seconds(), groups.peak_memory()
        finally:
            await groups.close()
        return ExecResult(outcome, self.isolation, finished.stdout, finished.stderr, finished.stdout_truncated,
                          finished.stderr_truncated, time.monotonic() - started, cpu_s=cpu_s, max_rss_bytes=peak)

    async def _forked(self, argv: list[str], environment: dict[str, str], stdin: bytes | InputChannel, limit: float,
                      groups: ExecutionCgroups, on_output: OutputSink | None) -> tuple[Finished, LaunchStatus]:
        """The default: the ruleset built here, applied in the child between fork and exec (no interpreter to
        start). ``sh -c 'exec "$@"'`` makes a refused or missing command the program's exit (126, 127), not a
        failed spawn."""
        policy = self.policy(-1)
        libc = self.driver.libc
        try:
            ruleset = launch.build_ruleset(libc, launch.plan_rules(policy, self.driver.abi))
        except launch.LaunchError as exc:
            return Finished(-1, spawn_error=f"ruleset: {exc}"), LaunchStatus()
        try:
            command = Command(["/bin/sh", "-c", 'exec "$@"', "sh", *argv], environment, limit,
                              self.spec.resources.output_bytes, stdin, cgroup_procs=groups.join_paths,
                              preexec=lambda: launch.enter(libc, policy, ruleset, self.driver.seccomp))
            return await run_command(command, on_output), LaunchStatus()
        finally:
            os.close(ruleset)

    async def _launched(self, argv: list[str], environment: dict[str, str], stdin: bytes | InputChannel, limit: float,
                        groups: ExecutionCgroups, on_output: OutputSink | None) -> tuple[Finished, LaunchStatus]:
        """``mode: launcher``: ``python -I -S launch.py POLICY -- CMD``, reporting on a status descriptor."""
        read_fd, write_fd = os.pipe()
        programs = self.driver.seccomp_programs
        filters = _memfd(launch.pack_programs(programs)) if programs else -1
        try:
            policy = {**self.policy(write_fd), **({"seccomp_fd": filters} if programs else {})}
            launcher = [self.driver.python, "-I", "-S", launch.__file__, json.dumps(policy), "--"]
            command = Command([*launcher, *argv], environment, limit, self.spec.resources.output_bytes, stdin,
                              (write_fd, filters) if programs else (write_fd,), cgroup_procs=groups.join_paths)
            try:
                finished = await run_command(command, on_output)
            finally:
                os.close(write_fd)
            return finished, parse_status(_drain(read_fd))
        finally:
            os.close(read_fd)
            if filters >= 0:
                os.close(filters)

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        # Written by the host as root, readable by the sandbox user (a link planted in the workspace is refused).
        for path, data in files.items():
            await asyncio.to_thread(write_beneath, self.host_workspace, path, data, workdir=self.spec.workdir)

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        return {path: await asyncio.to_thread(read_beneath, self.host_workspace, path, max_bytes=max_bytes,
                                              workdir=self.spec.workdir) for path in paths}

    def egress_log(self) -> tuple[EgressEvent, ...]:
        return self.egress.egress_log() if self.egress is not None else ()

    async def destroy(self) -> None:
        self._destroyed = True
        if self.egress is not None:
            await self.egress.close()
        await asyncio.to_thread(shutil.rmtree, self.root, True)
