"""The sandbox's vocabulary (§13): what a caller asks for, what a rung enforced, and how an execution ended.

One contract for every rung (vm, kernel, namespaced, confined), for `evalsi-sandboxd` and for the CLI, so a
record's provenance, a run's manifest and a gate read the same facts whichever driver ran the code.

Two failure dialects are kept apart on purpose: ``denied`` is the program's behavior under the policy (counted,
scored), ``runner_failure`` is our infrastructure (retried, never scored). ``SandboxUnavailable`` means nothing ran.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from evalsi.errors import BadInputError, EvalsiError

__all__ = [
    "DEFAULT_RESOURCES",
    "DEFAULT_ROOT",
    "EgressEvent",
    "EgressLogging",
    "Endpoint",
    "Enforcement",
    "ExecResult",
    "FileAccess",
    "HostWorkspace",
    "IsolationReport",
    "Level",
    "NetworkPolicy",
    "Outcome",
    "OutcomeKind",
    "OutputSink",
    "ProbeVerdict",
    "Resources",
    "RootFilesystem",
    "SandboxDriver",
    "SandboxSession",
    "SandboxSpec",
    "SandboxUnavailable",
    "StatefulSession",
]


class Level(enum.IntEnum):
    """Isolation levels, ordered: a request's minimum is met by its level or any stronger one."""

    NONE = 0
    CONFINED = 1
    NAMESPACED = 2
    KERNEL = 3
    VM = 4

    @classmethod
    def parse(cls, text: str, where: str = "min_isolation") -> Level:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            accepted = ", ".join(level.name.lower() for level in sorted(cls, reverse=True))
            raise BadInputError(f"{where}: {text!r} is not an isolation level; accepted: {accepted}") from None

    @property
    def label(self) -> str:
        return self.name.lower()


Enforcement = Literal["full", "partial"]
FileAccess = Literal["read-only", "workspace-write", "full-access"]
OutcomeKind = Literal["exit", "denied", "runner_failure", "timeout"]


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True)
class NetworkPolicy:
    """Egress: denied (loopback only) by default; an allowlist goes through the logging egress proxy."""

    allow: tuple[Endpoint, ...] = ()

    @property
    def denied(self) -> bool:
        return not self.allow


@dataclass(frozen=True)
class Resources:
    """Bounds of one execution. ``None`` leaves a bound to the driver's default, never unbounded."""

    timeout_s: float = 30.0
    memory_bytes: int = 512 * 1024 * 1024
    pids: int = 256
    cpu_seconds: int | None = None
    output_bytes: int = 1024 * 1024
    disk_bytes: int = 1024 * 1024 * 1024


DEFAULT_RESOURCES = Resources()


@dataclass(frozen=True)
class RootFilesystem:
    """What the sandbox sees as ``/``: the runtime image (``runtime``, the default: the host's Python and busybox in
    a minimal tree built once and cached by digest, ``runtime_image.py``), an image directory or a tarball (cached by
    digest), or, for trusted code only, the host's ``/usr`` read-only (``host``: opt-in by the operator's
    ``sandbox.root: host`` or explicitly from Python, never by a request to sandboxd). ``oci``: an OCI image,
    ``path`` a reference (``python:3.12-slim``, pulled only from the operator's registries) or the absolute path of
    an image layout or archive, unpacked once and cached by manifest digest (``oci.py``). ``dockerfile``: an image
    built from the Dockerfile at ``path`` with the build context ``context`` (default: the Dockerfile's directory),
    every RUN in a bwrap sandbox, cached by a digest chain (``image_build.py``); embedded only."""

    kind: Literal["runtime", "image", "tarball", "host", "oci", "dockerfile"] = "runtime"
    path: str = ""
    context: str = ""


DEFAULT_ROOT = RootFilesystem()


@dataclass(frozen=True)
class SandboxSpec:
    """What a caller asks for. The ladder (driver names, strongest first) defaults to the configured one."""

    min_isolation: Level = Level.NAMESPACED
    ladder: tuple[str, ...] | None = None
    network: NetworkPolicy = NetworkPolicy()
    resources: Resources = DEFAULT_RESOURCES
    root: RootFilesystem = RootFilesystem()
    env: Mapping[str, str] = field(default_factory=dict)
    file_access: FileAccess = "workspace-write"
    workdir: str = "/workspace"


@dataclass(frozen=True)
class IsolationReport:
    """What was enforced, reported on every create and exec, stored in provenance and the run manifest."""

    driver: str
    level: Level
    enforcement: Enforcement
    # bound name -> how it was applied, e.g. {"memory": "cgroup v1 memory.limit_in_bytes=536870912",
    # "pids": "rlimit NPROC=256", "network": "unshared (loopback only)", "syscalls": "seccomp-bpf"}
    bounds: Mapping[str, str] = field(default_factory=dict)
    # what the rung could not enforce here (the reason enforcement is partial)
    not_enforced: tuple[str, ...] = ()
    requested: Level = Level.NONE


@dataclass(frozen=True)
class Outcome:
    """How an execution ended: ``code`` for exit, ``effect`` for a denial (e.g. "oom-kill", "seccomp: socket",
    "output cap"), ``signature`` for a runner failure (e.g. "bwrap: setting up uid map: Permission denied")."""

    kind: OutcomeKind
    code: int | None = None
    effect: str = ""
    signature: str = ""


@dataclass(frozen=True)
class ExecResult:
    outcome: Outcome
    isolation: IsolationReport
    stdout: bytes = b""
    stderr: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    duration_s: float = 0.0
    # What the execution used, when the driver can tell (wait4's rusage, a cgroup's counters); 0 when it cannot.
    cpu_s: float = 0.0
    max_rss_bytes: int = 0


@dataclass(frozen=True)
class ProbeVerdict:
    """A rung's functional probe: the real profile run against ``true``, cached for the process's lifetime."""

    driver: str
    level: Level
    available: bool
    enforcement: Enforcement = "full"
    reason: str = ""
    not_enforced: tuple[str, ...] = ()


class SandboxUnavailable(EvalsiError):
    """No rung of the ladder meets the request's minimum: nothing ran (SANDBOX_UNAVAILABLE)."""

    code = "SANDBOX_UNAVAILABLE"

    def __init__(self, requested: Level, verdicts: tuple[ProbeVerdict, ...]) -> None:
        self.requested = requested
        self.verdicts = verdicts
        tried = "; ".join(f"{v.driver} ({v.level.label}): "
                          f"{f'available, below {requested.label}' if v.available else v.reason}"
                          for v in verdicts) or "no rung configured"
        super().__init__(f"{self.code}: no sandbox rung meets min_isolation {requested.label}; tried: {tried}")


# Called with ("stdout" | "stderr", chunk) as output arrives, for streaming Exec.
OutputSink = Callable[[str, bytes], Awaitable[None]]


class SandboxSession(Protocol):
    """One persistent sandbox: a private root and workspace that several executions share until destroyed."""

    id: str
    isolation: IsolationReport

    async def exec(self, argv: list[str], *, stdin: bytes = b"", env: Mapping[str, str] | None = None,
                   timeout_s: float | None = None, on_output: OutputSink | None = None) -> ExecResult: ...

    async def write_files(self, files: Mapping[str, bytes]) -> None: ...

    async def read_files(self, paths: list[str], *, max_bytes: int) -> dict[str, bytes]: ...

    async def destroy(self) -> None: ...


@dataclass(frozen=True)
class EgressEvent:
    """One connection the egress proxy saw: evidence for safety evaluators (sandboxd's Stats)."""

    time: float  # Unix seconds
    host: str
    port: int
    allowed: bool
    bytes_sent: int = 0
    bytes_received: int = 0
    # The address the proxy connected to (its one resolution of ``host``; "via HOST:PORT" through an upstream
    # proxy), how long the connection lasted, and why it was refused or ended early ("" when it ran its course).
    address: str = ""
    duration_s: float = 0.0
    reason: str = ""


class EgressLogging(Protocol):
    """A session whose egress goes through the logging proxy: what it reached, or tried to."""

    def egress_log(self) -> tuple[EgressEvent, ...]: ...


class HostWorkspace(Protocol):
    """A session whose writable state is a directory on the host (the bwrap and Landlock rungs): sandboxd's
    snapshots copy it, and host-side file access goes through ``evalsi.sandbox.host_files`` (never following a
    link the sandbox planted). A session without it snapshots through ``StatefulSession`` or not at all."""

    host_workspace: str


class StatefulSession(Protocol):
    """A session that saves and loads its own writable state (a microVM's disk and memory), as an opaque blob."""

    async def save_state(self) -> bytes: ...

    async def load_state(self, state: bytes) -> None: ...


class SandboxDriver(Protocol):
    """One rung. ``probe`` runs the real profile against ``true``; ``create`` starts a session under ``spec``."""

    name: str
    level: Level

    async def probe(self) -> ProbeVerdict: ...

    async def create(self, spec: SandboxSpec) -> SandboxSession: ...
