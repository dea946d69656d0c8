"""The namespaced rung: bubblewrap with the profile of §13 and issue 14.

Each execution is one ``bwrap`` run: every namespace unshared (network too: loopback only; with an egress
allowlist, a network namespace of its own whose only route is the logging egress proxy, netns.py) inside a new user
namespace where the program is uid 65534 with every capability dropped and no way to make further user namespaces
(run by root, bwrap itself starts as the unprivileged host user of host_user.py, to which that uid maps);
``--clearenv`` plus the explicit variables; ``--die-with-parent --new-session``; a seccomp-BPF filter passed as an
fd; the root filesystem the runtime image (the default, runtime_image.py), an image directory or an unpacked tarball
(the host's ``/usr`` read-only only in ``host`` mode, for trusted code), read-only, with a private ``/tmp`` and
``/proc`` and the session's workspace bound at its workdir. Limits: a cgroup per execution where one is delegated,
rlimits always, a wall-clock timeout and output caps; the execution's cgroup is killed at its end.

The profile is handed over on an fd (``--args``), so variables never show on the host's command lines, and bwrap
reports the program's start and exit on a status fd the program cannot reach: a setup failure (no ``child-pid``)
is a runner failure, whatever the program could have printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox import host_files
from evalsi.sandbox.bwrap_status import StatusPipe
from evalsi.sandbox.cgroups import CgroupLayout, CgroupPool, discover_layout
from evalsi.sandbox.config import SandboxConfig, check_timeout
from evalsi.sandbox.egress_attach import EgressAttachment, attach_netns
from evalsi.sandbox.host_user import HostUser, HostUserThread, drops_privileges, unreachable
from evalsi.sandbox.model import (
    EgressEvent,
    ExecResult,
    IsolationReport,
    Level,
    OutputSink,
    ProbeVerdict,
    SandboxSpec,
    SandboxUnavailable,
)
from evalsi.sandbox.netns import NetnsUnavailable, enter_hook
from evalsi.sandbox.probing import true_fails
from evalsi.sandbox.process import COMMON_DENIALS, Command, Dialect, Finished, classify, rlimits_for, run_command
from evalsi.sandbox.rootfs import RootCache
from evalsi.sandbox.runtime_image import root_report
from evalsi.sandbox.seccomp import SeccompUnavailable, compile_filter, filter_fd
from evalsi.sandbox.spawned import DEFAULT_MAX_LINE, InputChannel, SandboxProcess, start_process

__all__ = ["SANDBOX_UID", "BwrapDriver", "BwrapSession", "bwrap_profile"]

SANDBOX_UID = 65534
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Names the profile mounts itself; an image's own entries of these names are not bound over them.
_OWN_MOUNTS = frozenset({"proc", "dev", "tmp"})
_MAX_ENV = 256
_MAX_ENV_BYTES = 128 * 1024
_MAX_ARGV_BYTES = 1 << 20
_NOT_FOUND = 127
# Extra address space allowed over the memory bound when a cgroup enforces memory: RLIMIT_AS counts reservations,
# not use, and would otherwise refuse runtimes (Go, the JVM) that reserve far more than they touch.
_AS_HEADROOM = 1 << 30


def _dialect(started: bool) -> Dialect:
    def runner_failure(finished: Finished) -> str:
        if started or finished.timed_out or finished.output_capped:
            return ""
        message = _last_line(finished.stderr) or f"exited {finished.returncode} before starting the command"
        return message if message.startswith("bwrap") else f"bwrap: {message}"

    return Dialect(runner_failure, COMMON_DENIALS)


def _last_line(output: bytes) -> str:
    lines = [line for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def bwrap_profile(*, root: Path | None, workspace: str, workdir: str, read_only_workspace: bool, env: Mapping[str, str],
                  tmp_bytes: int, seccomp_fd: int | None, status_fd: int, own_netns: bool = False,
                  block_fd: int | None = None, writable_root: bool = False) -> list[str]:
    """The bwrap options of one execution (without the command), in the order bwrap applies them. ``own_netns``:
    the process already joined its allowlist's network namespace (netns.py), so every namespace but the network
    is unshared (``--unshare-all`` less ``--unshare-net``). ``writable_root``: an image build's RUN step
    (image_build.py), the image's staged root bound read-write as ``/`` and no workspace of its own."""
    unshare = (["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"] if own_netns
               else ["--unshare-all"])
    args = [*unshare, "--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID), "--gid",
            str(SANDBOX_UID), "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--clearenv"]
    for name, value in env.items():
        args += ["--setenv", name, value]
    if root is None:
        args += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
    elif writable_root:
        args += ["--bind", str(root), "/"]
    else:
        for entry in sorted(os.scandir(root), key=lambda item: item.name):
            if entry.name in _OWN_MOUNTS:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry.path), f"/{entry.name}"]
            else:
                args += ["--ro-bind", entry.path, f"/{entry.name}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    if not writable_root:
        args += ["--ro-bind" if read_only_workspace else "--bind", workspace, workdir, "--remount-ro", "/"]
    args += ["--chdir", workdir]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--json-status-fd", str(status_fd)]
    if block_fd is not None:  # the sandbox waits there until its caller has put it in its cgroups
        args += ["--block-fd", str(block_fd)]
    return args


class BwrapDriver:
    """The ``bwrap`` rung (namespaced). Options (``sandbox.drivers.bwrap``): ``binary`` (default: ``bwrap`` on
    PATH)."""

    name = "bwrap"
    level = Level.NAMESPACED

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        options = self.config.driver_options(self.name)
        unknown = sorted(set(options) - {"binary"})
        if unknown:
            raise BadInputError(f"sandbox.drivers.bwrap.{unknown[0]}: unknown option; accepted: binary")
        binary = options.get("binary")
        if binary is not None and not isinstance(binary, str):
            raise BadInputError("sandbox.drivers.bwrap.binary: expected a path to the bwrap executable")
        self.binary = binary or shutil.which("bwrap") or "/usr/bin/bwrap"
        # As root, bwrap starts as the unprivileged host user (host_user.py), so that the sandbox's uid maps to it
        # and RLIMIT_NPROC binds (root is exempt from it); otherwise as the caller, who is not root either. Started
        # by a thread of ours that became that user (which sets the rlimits too), so no setpriv is executed.
        self.host_user = HostUser(self.config.host_uid, self.config.host_gid) if drops_privileges() else None
        self.host_thread = HostUserThread(self.host_user) if self.host_user is not None else None
        self.roots = RootCache(self.config.cache_dir, self.config.images)
        self._layout: CgroupLayout | None = None
        self._pool: CgroupPool | None = None
        self._seccomp: bytes | None = None
        self._seccomp_error = ""

    @property
    def layout(self) -> CgroupLayout:
        if self._layout is None:
            self._layout = discover_layout(self.config.cgroup)
        return self._layout

    @property
    def cgroup_pool(self) -> CgroupPool:
        if self._pool is None:
            self._pool = CgroupPool(self.layout)
        return self._pool

    def seccomp_program(self) -> bytes | None:
        if self._seccomp is None and not self._seccomp_error:
            try:
                self._seccomp = compile_filter()
            except SeccompUnavailable as exc:
                self._seccomp_error = str(exc)
        return self._seccomp

    def not_enforced(self) -> tuple[str, ...]:
        self.seccomp_program()
        missing = [f"syscalls: {self._seccomp_error}"] if self._seccomp_error else []
        return tuple(missing)

    async def probe(self) -> ProbeVerdict:
        """The real profile (the configured root, seccomp, cgroups, limits) against ``true``."""
        if not os.access(self.binary, os.X_OK):
            return ProbeVerdict(self.name, self.level, False, reason=f"bwrap binary {self.binary} is not an executable")
        spec = SandboxSpec(root=self.config.root, resources=replace(self.config.resources, timeout_s=10.0))
        try:
            session = await self.create(spec)
        except (BadInputError, InfraError) as exc:  # a missing image, or a runtime image that cannot be built
            return ProbeVerdict(self.name, self.level, False, reason=f"root filesystem: {exc}")
        failure = await true_fails(session)
        if failure:
            return ProbeVerdict(self.name, self.level, False, reason=f"profile against `true`: {failure}")
        not_enforced = self.not_enforced()
        return ProbeVerdict(self.name, self.level, True, "partial" if not_enforced else "full",
                            not_enforced=not_enforced)

    async def create(self, spec: SandboxSpec, *, build_root: Path | None = None) -> BwrapSession:
        """A session under ``spec``; with ``build_root``, one whose executions write that directory as their ``/``
        (an image build's RUN steps, image_build.py: the directory is a private staging copy of the image)."""
        root = build_root if build_root is not None else await asyncio.to_thread(self.roots.resolve, spec.root)
        _check_env(spec.env, "env")
        if not spec.workdir.startswith("/") or (build_root is None and spec.workdir in ("/", "/proc", "/dev", "/tmp")):
            raise BadInputError(f"workdir: {spec.workdir!r}; expected an absolute path other than /, /proc, "
                                "/dev or /tmp")
        egress: EgressAttachment | None = None
        if spec.network.allow:
            try:
                egress = await attach_netns(spec.network.allow, self.config.egress)
            except NetnsUnavailable as exc:
                raise SandboxUnavailable(spec.min_isolation, (ProbeVerdict(
                    self.name, self.level, False, reason=str(exc)),)) from None
        try:
            workspace = tempfile.mkdtemp(prefix="evalsi-ws-")
            if self.host_user is not None:
                _hand_over(workspace, root, self.host_user)
        except BaseException:
            if egress is not None:
                await egress.close()  # its namespaces never outlive a failed create
            raise
        not_enforced = self.not_enforced()
        bounds = self._planned_bounds(spec, root)
        if build_root is not None:
            bounds["root"] = f"image build {build_root} read-write"
        if egress is not None:
            bounds["network"] = egress.describe(spec.network.allow)
        isolation = IsolationReport(self.name, self.level, "partial" if not_enforced else "full",
                                    bounds=bounds, not_enforced=not_enforced, requested=spec.min_isolation)
        return BwrapSession(self, spec, root, workspace, isolation, egress, writable_root=build_root is not None)

    def _planned_bounds(self, spec: SandboxSpec, root: Path | None) -> dict[str, str]:
        resources = spec.resources
        bounds = {
            "root": root_report(spec.root, root),
            "network": "unshared (loopback only)",
            "user": f"uid {SANDBOX_UID} in a user namespace"
                    + (f" ({self.host_user.describe()})" if self.host_user is not None else "")
                    + ", all capabilities dropped, no nested user namespaces",
            "timeout": f"{resources.timeout_s:g}s wall clock",
            "output": f"{resources.output_bytes} bytes per stream",
            "files": f"{spec.workdir} {'read-only' if spec.file_access == 'read-only' else 'read-write'}, "
                     f"/tmp tmpfs of {resources.disk_bytes} bytes, files up to {resources.disk_bytes} bytes",
        }
        if self.seccomp_program() is not None:
            bounds["syscalls"] = "seccomp-bpf deny list"
        bounds["memory"] = f"rlimit AS={resources.memory_bytes}"
        # Binding: the sandbox's processes belong to an unprivileged host uid (root's are exempt), counted per user
        # namespace, so one sandbox's processes never count against another's.
        bounds["pids"] = f"rlimit NPROC={resources.pids}"
        if resources.cpu_seconds is not None:
            bounds["cpu"] = f"rlimit CPU={resources.cpu_seconds}s"
        layout = self.layout
        if layout.limits != "none":
            bounds["memory"] = f"{layout.limits} memory + rlimit AS"
            bounds["pids"] = f"{layout.limits} pids + rlimit NPROC={resources.pids}"
        return bounds


class BwrapSession:
    """A workspace directory on the host shared by the session's executions, each a fresh bwrap."""

    def __init__(self, driver: BwrapDriver, spec: SandboxSpec, root: Path | None, workspace: str,
                 isolation: IsolationReport, egress: EgressAttachment | None = None, *,
                 writable_root: bool = False) -> None:
        self.id = uuid.uuid4().hex
        self.writable_root = writable_root
        self.driver = driver
        self.spec = spec
        self.root = root
        self.host_workspace = workspace
        self.isolation = isolation
        self.egress = egress
        # As root with an allowlist: the thread that starts this sandbox's bwraps in its network namespace.
        self._netns_thread: HostUserThread | None = None

    def egress_log(self) -> tuple[EgressEvent, ...]:
        return self.egress.egress_log() if self.egress is not None else ()

    async def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout_s: float | None = None,
                    max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess:
        """``argv`` as a long-lived execution with streams (spawned.py): this profile and these bounds, the timeout
        its lifetime."""
        return start_process(self.exec, argv, env=env, timeout_s=timeout_s, max_line=max_line)

    async def exec(self, argv: list[str], *, stdin: bytes | InputChannel = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        if not argv or not all(isinstance(part, str) and part and "\0" not in part for part in argv):
            raise BadInputError("command: expected a non-empty list of non-empty arguments without NUL bytes")
        if sum(len(part) for part in argv) > _MAX_ARGV_BYTES:
            raise BadInputError(f"command: over the limit of {_MAX_ARGV_BYTES} bytes of arguments")
        resources = self.spec.resources
        timeout = check_timeout(timeout_s, "timeout") if timeout_s is not None else resources.timeout_s
        variables = {"PATH": DEFAULT_PATH, "HOME": self.spec.workdir, "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                     **self.spec.env, **_check_env(env or {}, "env")}
        egress = self.egress
        driver = self.driver
        preexec = None
        starter = driver.host_thread
        if egress is not None:
            # Without the namespace to join, bwrap (not unsharing the network) would run in the host's: refuse.
            if egress.netns_fd is None:
                raise BadInputError(f"sandbox {self.id}: its network namespace is gone (destroyed)")
            variables.update(egress.proxy_env())
            if driver.host_user is None:
                preexec = enter_hook(egress.netns_fd)
            else:  # joined as root by a thread of this sandbox's own, which then becomes the host user
                if self._netns_thread is None:
                    self._netns_thread = HostUserThread(driver.host_user, enter_hook(egress.netns_fd))
                starter = self._netns_thread
        groups = driver.cgroup_pool.acquire(memory_bytes=resources.memory_bytes, pids=resources.pids)
        program = driver.seccomp_program()
        status_read, status_write = os.pipe()
        status = StatusPipe(status_read)
        fds: list[int] = [status_write]
        try:
            seccomp_fd = filter_fd(program) if program is not None else None
            if seccomp_fd is not None:
                fds.append(seccomp_fd)
            block_read, block_write = os.pipe()
            fds += [block_read, block_write]
            profile = bwrap_profile(root=self.root, workspace=self.host_workspace, workdir=self.spec.workdir,
                                    read_only_workspace=self.spec.file_access == "read-only", env=variables,
                                    tmp_bytes=resources.disk_bytes, seccomp_fd=seccomp_fd, status_fd=status_write,
                                    own_netns=egress is not None, block_fd=block_read,
                                    writable_root=self.writable_root)
            args_fd = os.memfd_create("evalsi-bwrap-args", os.MFD_CLOEXEC)
            fds.append(args_fd)
            os.write(args_fd, b"".join(part.encode() + b"\0" for part in profile))
            os.lseek(args_fd, 0, os.SEEK_SET)
            memory_rlimit = resources.memory_bytes + (_AS_HEADROOM + resources.memory_bytes
                                                      if "memory" in groups.bounds else 0)
            limits = rlimits_for(memory_rlimit, resources.pids, resources.cpu_seconds, resources.disk_bytes)
            setup_errors: list[str] = []

            async def confine(pid: int) -> None:
                # Our copies of the pipes' other ends: closed, so EOF comes when bwrap is gone.
                for fd in (status_write, block_read):
                    os.close(fd)
                    fds.remove(fd)
                child = await status.child_pid()
                pids = (pid,) if child is None else (pid, child)
                try:
                    if driver.host_thread is None:
                        await asyncio.to_thread(_confine, pids, groups.join_paths, limits)
                    else:  # the cgroups as root, the rlimits as the host user that owns the processes, at once
                        steps = [driver.host_thread.apply(pids, limits)]
                        if groups.join_paths:
                            steps.append(asyncio.to_thread(_confine, pids, groups.join_paths, ()))
                        for failed in await asyncio.gather(*steps, return_exceptions=True):
                            if isinstance(failed, BaseException):
                                raise failed
                except ProcessLookupError:  # it exited before it was confined: a setup failure its stderr names
                    return
                except OSError as exc:
                    setup_errors.append(f"bwrap: putting the sandbox in its cgroups and rlimits failed: {exc}")
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                    return
                with contextlib.suppress(OSError):  # bwrap may have exited already (a setup failure)
                    os.write(block_write, b"x")

            command = Command(
                argv=[driver.binary, "--args", str(args_fd), "--", *argv], env={}, timeout_s=timeout,
                output_bytes=resources.output_bytes, stdin=stdin,
                pass_fds=tuple(fd for fd in (args_fd, seccomp_fd, status_write, block_read) if fd is not None),
                preexec=preexec, on_spawn=confine, spawn_on=starter.run if starter is not None else None)
            finished = await run_command(command, on_output)
            if setup_errors:
                finished = replace(finished, spawn_error=setup_errors[0])
            exit_code = status.exit_code()
            # bwrap could not execute the command (not in the image): the program's fault, as a shell's 127.
            not_found = exit_code is None and _last_line(finished.stderr).startswith("bwrap: execvp ")
            outcome = classify(finished, _dialect(exit_code is not None or not_found),
                               exit_code=_NOT_FOUND if not_found else exit_code,
                               oom_killed=groups.oom_killed(), pids_exhausted=groups.pids_exhausted())
            cpu_s, peak = groups.cpu_seconds(), groups.peak_memory()
        finally:
            for fd in fds:
                os.close(fd)
            status.close()
            await driver.cgroup_pool.release(groups)
        bounds = dict(self.isolation.bounds)
        bounds.update(groups.bounds)
        if "memory" in groups.bounds:
            bounds["memory"] += f" + rlimit AS={memory_rlimit}"
        isolation = replace(self.isolation, bounds=bounds)
        if "pids" in groups.bounds:
            bounds["pids"] += f" + rlimit NPROC={resources.pids}"
        bounds["timeout"] = f"{timeout:g}s wall clock"
        return ExecResult(outcome=outcome, isolation=isolation, stdout=finished.stdout,
                          stderr=finished.stderr, stdout_truncated=finished.stdout_truncated,
                          stderr_truncated=finished.stderr_truncated, duration_s=finished.duration_s, cpu_s=cpu_s,
                          max_rss_bytes=peak)

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        for path, data in files.items():
            await asyncio.to_thread(host_files.write_beneath, self.host_workspace, path, data,
                                    workdir=self.spec.workdir)

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        read: dict[str, bytes] = {}
        for path in paths:
            read[path] = await asyncio.to_thread(host_files.read_beneath, self.host_workspace, path,
                                                 max_bytes=max_bytes, workdir=self.spec.workdir)
        return read

    async def destroy(self) -> None:
        if self._netns_thread is not None:
            self._netns_thread.close()  # its end kills a bwrap still running (--die-with-parent)
        if self.egress is not None:
            await self.egress.close()
        await asyncio.to_thread(shutil.rmtree, self.host_workspace, True)


def _hand_over(workspace: str, root: Path | None, user: HostUser) -> None:
    """The new workspace to the host user (the sandbox writes it as that user), and a refusal naming the directory to
    open when that user could not reach the root or the workspace (bwrap resolves its binds with its permissions)."""
    os.chown(workspace, user.uid, user.gid)
    for what, path in (("root", root), ("workspace", Path(workspace))):
        blocked = unreachable(path, user) if path is not None else ""
        if blocked:
            shutil.rmtree(workspace, ignore_errors=True)
            raise BadInputError(f"{what}: {path} is out of reach of the sandbox's host user: {blocked}; keep images, "
                                "sandbox.cache_dir and $TMPDIR under directories it can search (chmod o+x), or set "
                                "sandbox.host_uid/host_gid")


def _confine(pids: tuple[int, ...], cgroup_procs: tuple[str, ...], limits: tuple[tuple[int, int], ...]) -> None:
    """bwrap and the sandbox's first process, both waiting, into the execution's cgroups and under its rlimits:
    whatever the sandbox runs descends from them, so nothing it starts escapes either."""
    for path in cgroup_procs:
        for pid in pids:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(pid).encode())
            finally:
                os.close(fd)
    for pid in pids:
        for limit, value in limits:
            resource.prlimit(pid, limit, (value, value))


def _check_env(env: Mapping[str, str], where: str) -> Mapping[str, str]:
    if len(env) > _MAX_ENV:
        raise BadInputError(f"{where}: {len(env)} variables is over the limit of {_MAX_ENV}")
    size = 0
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name or not isinstance(value, str) \
                or "\0" in value:
            raise BadInputError(f"{where}: {name!r}: a variable name is non-empty without '=' or NUL, and its value "
                                "a string without NUL")
        size += len(name) + len(value)
    if size > _MAX_ENV_BYTES:
        raise BadInputError(f"{where}: over the limit of {_MAX_ENV_BYTES} bytes of variables")
    return env
