"""The ``kernel`` rung: gVisor's ``runsc`` (§13). The program talks to a user-space kernel (the Sentry), never to
the host's: the host sees only the Sentry's few system calls, under its own seccomp filter.

Measured here (INFRA.md): the ptrace platform works, the KVM one hangs on this paravirtual hypervisor, so the
platform defaults to ``ptrace``. Each session is one OCI bundle (its ``config.json`` built from the spec) started
once with ``runsc create`` + ``start`` (``sleep infinity`` as its init); each execution is a ``runsc exec`` in it:

- root: the runtime image (the default), an image directory or a tarball (``rootfs.RootCache``) read-only, or for
  trusted code a skeleton whose ``/usr`` is the host's, read-only; the session's workspace is bound read-write at
  ``workdir``, ``/tmp`` is a tmpfs;
- user 65534, no capabilities, no new privileges, the environment exactly as given;
- ``--network=none``: no interface but loopback, whatever the spec's allowlist says;
- bounds: rlimits (AS, NPROC, FSIZE, CPU) set on the container and inherited by every execution inside the Sentry
  (``runsc exec`` ignores a process spec's own), and around the whole sandbox (the Sentry included) the host's
  memory and pids cgroups where S1's ``cgroups`` finds them. Host cgroups are not given to runsc itself
  (``--ignore-cgroups``): a pids bound there makes the Sentry panic instead of refusing the guest's fork.

An execution that outlives its timeout or output cap is killed with its whole container (``runsc exec`` cannot take
a guest process down with it); the workspace survives and the next execution boots the container again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox.cgroups import CgroupLayout, ExecutionCgroups, discover_layout, join_cgroups
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.host_files import read_beneath, write_beneath
from evalsi.sandbox.model import (
    ExecResult,
    IsolationReport,
    Level,
    Outcome,
    OutputSink,
    ProbeVerdict,
    SandboxSpec,
)
from evalsi.sandbox.probing import true_fails
from evalsi.sandbox.process import COMMON_DENIALS, Command, Dialect, Finished, classify, run_command
from evalsi.sandbox.rootfs import RootCache
from evalsi.sandbox.runtime_image import root_report
from evalsi.sandbox.spawned import DEFAULT_MAX_LINE, InputChannel, SandboxProcess, start_process

__all__ = ["GvisorDriver", "GvisorSession", "bundle_config", "classify_kernel"]

NAME = "gvisor"
SANDBOX_UID = 65534
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_SETUP_TIMEOUT_S = 60.0
# Around the whole sandbox: the Sentry's own memory and threads come on top of what the guest may use.
_SENTRY_MEMORY = 512 << 20
_SENTRY_PIDS = 512
_NOT_FOUND = re.compile(r"error finding executable|no such file or directory", re.IGNORECASE)
_AGAIN = re.compile(r"try again|resource temporarily unavailable", re.IGNORECASE)


def classify_kernel(finished: Finished, *, started: bool, oom_killed: bool = False) -> Outcome:
    """The kernel rung's dialects. Whether the guest process started is runsc's ``--pid-file`` on the host, which
    the guest cannot write: before it, runsc's failures are runner failures (except a command that does not exist,
    the caller's, and a session whose processes fill its NPROC bound, the program's); after it, everything is the
    program's, whatever it prints or returns."""
    text = finished.stderr.decode("utf-8", "replace")
    if not started and not finished.timed_out and not finished.spawn_error:
        if _NOT_FOUND.search(text):
            return Outcome("exit", code=127)
        if _AGAIN.search(text):
            return Outcome("denied", effect="pids limit (the session's processes)")

    def runner_failure(done: Finished) -> str:
        if done.spawn_error:
            return f"runsc: {done.spawn_error}"
        if started or done.timed_out:
            return ""
        lines = [line for line in text.splitlines() if line.strip()]
        return f"runsc: {lines[-1][:400]}" if lines else f"runsc exec: exit {done.returncode} before the command"

    return classify(finished, Dialect(runner_failure, COMMON_DENIALS), oom_killed=oom_killed)


def _skeleton(directory: Path) -> Path:
    """The root of a host-mode sandbox: mount points, the merged-/usr links, and an /etc naming only root and the
    sandbox user. Made once per driver; read-only to every sandbox."""
    root = directory / "host-root"
    if (root / "etc" / "passwd").exists():
        return root
    staging = Path(tempfile.mkdtemp(prefix=".root-", dir=directory))
    for part in ("usr", "tmp", "proc", "dev", "sys", "etc", "workspace"):
        (staging / part).mkdir()
    for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        (staging / link).symlink_to(target)
    (staging / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                            f"nobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/workspace:/bin/sh\n")
    (staging / "etc" / "group").write_text(f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n")
    for path in (staging, *staging.iterdir()):
        if not path.is_symlink():
            path.chmod(0o755)
    (staging / "etc" / "passwd").chmod(0o644)
    (staging / "etc" / "group").chmod(0o644)
    try:
        staging.rename(root)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another session made it first: the same files
    return root


def bundle_config(*, root: Path, host_usr: bool, workspace: str, workdir: str, env: Mapping[str, str],
                  spec: SandboxSpec) -> dict[str, Any]:
    """The OCI runtime spec of one session (pure)."""
    resources = spec.resources
    rlimits = [("RLIMIT_AS", resources.memory_bytes), ("RLIMIT_NPROC", resources.pids),
               ("RLIMIT_FSIZE", resources.disk_bytes), ("RLIMIT_CORE", 0), ("RLIMIT_NOFILE", 1024)]
    if resources.cpu_seconds:
        rlimits.append(("RLIMIT_CPU", resources.cpu_seconds))
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]},
        {"destination": workdir, "type": "bind", "source": workspace,
         "options": ["rbind", "ro" if spec.file_access == "read-only" else "rw"]},
    ]
    if host_usr:
        mounts.insert(0, {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]})
    no_capabilities: dict[str, list[str]] = {name: [] for name in
                                             ("bounding", "effective", "permitted", "inheritable", "ambient")}
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": SANDBOX_UID, "gid": SANDBOX_UID},
            "args": ["sleep", "infinity"],
            "env": [f"{key}={value}" for key, value in env.items()],
            "cwd": workdir,
            "capabilities": no_capabilities,
            "noNewPrivileges": True,
            "rlimits": [{"type": name, "hard": value, "soft": value} for name, value in rlimits],
        },
        "root": {"path": str(root), "readonly": True},
        "hostname": "sandbox",
        "mounts": mounts,
        "linux": {"namespaces": [{"type": kind} for kind in ("pid", "network", "ipc", "uts", "mount")]},
    }


class GvisorDriver:
    """``kernel``: probed by booting a real sandbox and running ``true`` in it."""

    name = NAME
    level = Level.KERNEL

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.config = config or SandboxConfig()
        options = self.config.driver_options(NAME)
        self.binary = str(options.get("binary") or shutil.which("runsc") or "/usr/bin/runsc")
        self.platform = str(options.get("platform") or "ptrace")
        self.base_dir = Path(str(options.get("dir") or Path(tempfile.gettempdir()) / "evalsi-gvisor"))
        self.roots = RootCache(self.config.cache_dir, self.config.images)
        self.cgroups: CgroupLayout = discover_layout(self.config.cgroup)

    def runsc(self, state: Path) -> list[str]:
        return [self.binary, "--root", str(state), "--network=none", f"--platform={self.platform}",
                "--ignore-cgroups"]

    async def probe(self) -> ProbeVerdict:
        if not os.access(self.binary, os.X_OK):
            return ProbeVerdict(NAME, self.level, False, reason=f"runsc not found at {self.binary}")
        spec = SandboxSpec(min_isolation=Level.KERNEL, root=self.config.root,
                           resources=replace(self.config.resources, timeout_s=30.0))
        try:
            session = await self.create(spec)
        except (InfraError, OSError) as exc:
            return ProbeVerdict(NAME, self.level, False, reason=f"cannot boot a sandbox: {exc}")
        failure = await true_fails(session)
        if failure:
            return ProbeVerdict(NAME, self.level, False, reason=f"`true` in the sandbox: {failure}")
        return ProbeVerdict(NAME, self.level, True, "full")

    async def create(self, spec: SandboxSpec) -> GvisorSession:
        root = await asyncio.to_thread(self.roots.resolve, spec.root)
        session = await asyncio.to_thread(GvisorSession.prepare, self, spec, root)
        try:
            await session.boot()
        except BaseException:
            await session.destroy()
            raise
        return session


class GvisorSession:
    """One gVisor sandbox: its bundle, its runsc state, its workspace on the host (``host_workspace``)."""

    def __init__(self, driver: GvisorDriver, spec: SandboxSpec, directory: Path, bundle_root: Path,
                 host_usr: bool) -> None:
        self.id = f"gvisor-{uuid.uuid4().hex[:12]}"
        self.driver, self.spec, self.directory = driver, spec, directory
        self.host_workspace = str(directory / "workspace")
        self.state = directory / "state"
        self.bundle = directory / "bundle"
        self.env = _environment(spec.env, spec.workdir)
        config = bundle_config(root=bundle_root, host_usr=host_usr, workspace=self.host_workspace,
                               workdir=spec.workdir, env=self.env, spec=spec)
        (self.bundle / "config.json").write_text(json.dumps(config))
        self.isolation = self._report(root_report(spec.root, None if host_usr else bundle_root))
        self._groups: ExecutionCgroups | None = None
        self._running = False
        self._destroyed = False

    @classmethod
    def prepare(cls, driver: GvisorDriver, spec: SandboxSpec, image_root: Path | None) -> GvisorSession:
        driver.base_dir.mkdir(parents=True, exist_ok=True, mode=0o711)
        directory = Path(tempfile.mkdtemp(prefix="s-", dir=driver.base_dir))
        for part in ("workspace", "state", "bundle"):
            (directory / part).mkdir(mode=0o700)
        if os.geteuid() == 0:
            os.chown(directory / "workspace", SANDBOX_UID, SANDBOX_UID)
        root = image_root if image_root is not None else _skeleton(driver.base_dir)
        return cls(driver, spec, directory, root, image_root is None)

    def _report(self, root: str) -> IsolationReport:
        resources = self.spec.resources
        layout = self.driver.cgroups
        bounds = {
            "kernel": f"gVisor runsc ({self.driver.platform} platform)",
            "root": root,
            "network": "none (runsc --network=none)" + ("" if self.spec.network.denied else
                                                        "; the allowlist is not reachable on this rung"),
            "memory": f"rlimit AS={resources.memory_bytes} per process",
            "pids": f"rlimit NPROC={resources.pids} (inside the Sentry)",
            "user": f"uid {SANDBOX_UID}, no capabilities",
            "timeout": f"wall clock {resources.timeout_s:g}s, container killed",
            "output": f"{resources.output_bytes} bytes per stream",
        }
        if layout.limits != "none":
            bounds["sandbox"] = (f"{layout.limits} memory {resources.memory_bytes + _SENTRY_MEMORY} and pids "
                                 f"{resources.pids + _SENTRY_PIDS} around the whole sandbox, Sentry included")
        if resources.cpu_seconds:
            bounds["cpu"] = f"rlimit CPU={resources.cpu_seconds}"
        return IsolationReport(NAME, Level.KERNEL, "full", bounds, (), self.spec.min_isolation)

    async def boot(self) -> None:
        """``runsc create`` + ``start``: the container's init waits, executions join it."""
        resources = self.spec.resources
        self._groups = await asyncio.to_thread(ExecutionCgroups.create, self.driver.cgroups,
                                               memory_bytes=resources.memory_bytes + _SENTRY_MEMORY,
                                               pids=resources.pids + _SENTRY_PIDS)
        runsc = self.driver.runsc(self.state)
        await _setup([*runsc, "create", "--bundle", str(self.bundle), self.id], self.directory,
                     self._groups.join_paths)
        await _setup([*runsc, "start", self.id], self.directory, ())
        self._running = True

    async def _halt(self) -> None:
        """Kill everything in the container (``runsc kill --all``), remove it (``delete --force``), then its host
        groups. The next execution boots it again."""
        self._running = False
        runsc = self.driver.runsc(self.state)
        env = {"PATH": _DEFAULT_PATH}
        await run_command(Command([*runsc, "kill", "--all", self.id, "KILL"], env, 30.0, 64 * 1024))
        await run_command(Command([*runsc, "delete", "--force", self.id], env, 30.0, 64 * 1024))
        if self._groups is not None:
            groups, self._groups = self._groups, None
            await groups.close()

    def exec_argv(self, argv: list[str], env: Mapping[str, str], pid_file: str) -> list[str]:
        options = ["--user", f"{SANDBOX_UID}:{SANDBOX_UID}", "--cwd", self.spec.workdir, "--pid-file", pid_file]
        for key, value in env.items():
            options += ["--env", f"{key}={value}"]
        return [*self.driver.runsc(self.state), "exec", *options, self.id, *argv]

    async def spawn(self, argv: list[str], *, env: Mapping[str, str] | None = None, timeout_s: float | None = None,
                    max_line: int = DEFAULT_MAX_LINE) -> SandboxProcess:
        """``argv`` as a long-lived ``runsc exec`` with streams (spawned.py). Killed, its ``runsc exec`` ends and
        its stdin closes; a guest process that outlives that ends with the container, at the latest when the
        session is destroyed. Past its timeout it is killed as any execution is: with the whole container."""
        return start_process(self.exec, argv, env=env, timeout_s=timeout_s, max_line=max_line)

    async def exec(self, argv: list[str], *, stdin: bytes | InputChannel = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult:
        if self._destroyed:
            raise BadInputError(f"sandbox {self.id} was destroyed")
        if not argv:
            raise BadInputError("argv: empty; give the command to run")
        environment = {**self.env, **_environment(env or {}, self.spec.workdir, base=False)}
        started = time.monotonic()
        if not self._running:
            try:
                await self.boot()
            except InfraError as exc:
                return ExecResult(Outcome("runner_failure", signature=str(exc)[:500]), self.isolation,
                                  duration_s=time.monotonic() - started)
        resources = self.spec.resources
        limit = timeout_s or resources.timeout_s
        groups = self._groups
        oom_before = groups.oom_killed() if groups is not None else False
        pid_file = self.directory / f"exec-{uuid.uuid4().hex[:8]}.pid"
        try:
            finished = await _run_exec(self.exec_argv(argv, environment, str(pid_file)), stdin, limit,
                                       resources.output_bytes, on_output, self._halt)
            started_guest = pid_file.exists()
        finally:
            pid_file.unlink(missing_ok=True)
        oom_killed = groups is not None and not oom_before and groups.oom_killed()
        outcome = classify_kernel(finished, started=started_guest, oom_killed=oom_killed)
        exhausted = outcome.kind == "denied" and ("pids" in outcome.effect or "process limit" in outcome.effect)
        if self._running and (oom_killed or exhausted or outcome.kind == "runner_failure"):
            # Nothing the session held is worth keeping in a container its processes filled or its runsc broke.
            await self._halt()
        return ExecResult(outcome, self.isolation, finished.stdout, finished.stderr, finished.stdout_truncated,
                          finished.stderr_truncated, time.monotonic() - started)

    async def write_files(self, files: Mapping[str, bytes]) -> None:
        for path, data in files.items():
            await asyncio.to_thread(write_beneath, self.host_workspace, path, data, workdir=self.spec.workdir)

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]:
        return {path: await asyncio.to_thread(read_beneath, self.host_workspace, path, max_bytes=max_bytes,
                                              workdir=self.spec.workdir) for path in paths}

    async def destroy(self) -> None:
        if self._destroyed:
            return
        self._destroyed = True
        with contextlib.suppress(Exception):
            await self._halt()
        await asyncio.to_thread(shutil.rmtree, self.directory, True)


async def _run_exec(argv: list[str], stdin: bytes | InputChannel, limit: float, cap: int,
                    on_output: OutputSink | None, halt: Callable[[], Awaitable[None]]) -> Finished:
    """One ``runsc exec``. Unlike process.run_command, a timeout or the output cap is enforced by ``halt`` (the
    container killed): ``runsc exec``, even SIGKILLed, lives until its guest process ends. The pipes are drained to
    their end past the cap (what passes it is dropped), since asyncio's ``wait`` returns only once they close."""
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={"PATH": _DEFAULT_PATH}, start_new_session=True)
    except OSError as exc:
        return Finished(returncode=-1, spawn_error=f"{type(exc).__name__}: {exc}", duration_s=0.0)
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = {"stdout": False, "stderr": False}
    full = asyncio.Event()

    streaming = isinstance(stdin, InputChannel)  # a spawned process: output streamed, never kept

    async def pump(name: str, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            if streaming:
                if on_output is not None:
                    await on_output(name, chunk)
                continue
            room = cap - len(kept[name])
            if room > 0:
                kept[name].extend(chunk[:room])
                if on_output is not None:
                    await on_output(name, chunk[:room])
            if len(chunk) > room:
                truncated[name] = True
                full.set()

    async def feed(writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if isinstance(stdin, InputChannel):
                async for chunk in stdin.chunks():
                    writer.write(chunk)
                    await writer.drain()
            elif stdin:
                writer.write(stdin)
                await writer.drain()
            writer.close()

    assert process.stdout is not None and process.stderr is not None and process.stdin is not None
    readers = asyncio.gather(pump("stdout", process.stdout), pump("stderr", process.stderr))
    feeder = asyncio.ensure_future(feed(process.stdin))
    waiter = asyncio.ensure_future(process.wait())
    capped = asyncio.ensure_future(full.wait())
    try:
        done, _ = await asyncio.wait({waiter, capped}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            await halt()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), _SETUP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(readers), 5.0)
    except BaseException:  # cancelled (a spawned process killed): runsc exec ends and the guest's stdin closes
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.stdin.close()
        raise
    finally:
        feeder.cancel()
        capped.cancel()
        readers.cancel()
        with contextlib.suppress(BaseException):
            await readers
        if not waiter.done():
            waiter.cancel()
    return Finished(returncode=process.returncode if process.returncode is not None else -signal.SIGKILL,
                    stdout=bytes(kept["stdout"]), stderr=bytes(kept["stderr"]),
                    stdout_truncated=truncated["stdout"], stderr_truncated=truncated["stderr"],
                    timed_out=not done, output_capped=full.is_set() and bool(done),
                    duration_s=time.monotonic() - started)


async def _setup(argv: list[str], directory: Path, joins: tuple[str, ...]) -> None:
    """One runsc setup step. Its output goes to a file, not a pipe: the container's init inherits runsc create's
    descriptors and would hold a pipe open for the sandbox's life."""
    log = directory / "runsc.log"
    with open(log, "wb") as sink:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=sink, stderr=sink, env={"PATH": _DEFAULT_PATH},
                start_new_session=True, preexec_fn=(lambda: join_cgroups(joins)) if joins else None)
        except (OSError, RuntimeError) as exc:
            raise InfraError(f"{argv[0]}: {exc}") from None
        try:
            code = await asyncio.wait_for(process.wait(), _SETUP_TIMEOUT_S)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise InfraError(f"runsc {argv[5]}: no answer in {_SETUP_TIMEOUT_S:g}s") from None
    if code != 0:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        raise InfraError(f"runsc {argv[5]}: {lines[-1][:400] if lines else f'exit {code}'}")


def _environment(extra: Mapping[str, str], workdir: str, *, base: bool = True) -> dict[str, str]:
    env = {"PATH": _DEFAULT_PATH, "HOME": workdir, "TMPDIR": "/tmp", "LANG": "C.UTF-8"} if base else {}
    for key, value in extra.items():
        if not key or "=" in key or "\0" in key or "\0" in value:
            raise BadInputError(f"env: {key!r} is not a valid variable (no '=', no NUL)")
        env[key] = value
    return env
