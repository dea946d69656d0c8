"""How code evaluators reach a sandbox: a run's ``spec.sandbox`` as a ``SandboxSpec``, and where sessions come from.

Embedded (``evalsi eval``, ``evalsi run``, ``evaluate()``) sessions come from the in-process ladder
(``LadderOpener``); on a server the ``sandbox`` worker pool opens them on ``evalsi-sandboxd``
(``evalsi.sandbox.sandboxd_opener``). Either way the request's minimum is honored or refused with
``SandboxUnavailable``: nothing runs below it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import MAX_ALLOW, check_bound, parse_endpoint
from evalsi.sandbox.config import (
    MAX_MEMORY_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_PIDS,
    MAX_TIMEOUT_S,
    SandboxConfig,
    check_timeout,
    load_sandbox_config,
)
from evalsi.sandbox.ladder import Ladder, check_ladder
from evalsi.sandbox.model import Level, NetworkPolicy, Resources, RootFilesystem, SandboxSession, SandboxSpec
from evalsi.v1alpha1 import run_pb2
from evalsi.yaml_files import read_yaml_file

__all__ = ["LadderOpener", "SandboxAccess", "SandboxOpener", "check_served_root", "local_sandbox_config",
           "sandbox_request"]

_NETWORK = ("deny", "allow")


class SandboxOpener(Protocol):
    """Starts a sandbox session under a spec for a project, or raises ``SandboxUnavailable`` (nothing ran).
    ``base`` is what a run's spec.sandbox leaves unset starts from."""

    @property
    def base(self) -> SandboxSpec: ...

    async def open(self, spec: SandboxSpec, project: str) -> SandboxSession: ...


class LadderOpener:
    """Sessions from the in-process ladder (probed once per process, strongest usable rung first), under the
    ``sandbox:`` section's root, minimum and bounds (``local_sandbox_config``, as `evalsi sandbox` reads it).

    ``caller_roots`` False (a worker serving other people's runs on its own ladder, without evalsi-sandboxd): a spec
    may not name a host path as its root (an image directory, a tarball, a Dockerfile or an OCI layout): only the
    configured root or an OCI image by reference. evalsi-sandboxd decides that by its ``--image-root`` list; a
    worker has no such list, so it refuses them all."""

    def __init__(self, ladder: Ladder | None = None, *, caller_roots: bool = True) -> None:
        self.ladder = ladder or Ladder(local_sandbox_config())
        config = self.ladder.config
        self.base = SandboxSpec(min_isolation=config.min_isolation, resources=config.resources, root=config.root)
        self.caller_roots = caller_roots

    async def open(self, spec: SandboxSpec, project: str) -> SandboxSession:
        if not self.caller_roots:
            check_served_root(spec.root, self.base.root)
        return await self.ladder.create(spec)  # one process, one caller: nothing to scope by project


def check_served_root(root: RootFilesystem, configured: RootFilesystem) -> None:
    """Refuse a root that names a host path (``BadInputError``): the configured root and OCI references pass."""
    if root == configured or root.kind == "runtime" or (root.kind == "oci" and not root.path.startswith("/")):
        return
    raise BadInputError(
        f"sandbox root {{{root.kind}: {root.path[:200]!r}}}: this worker opens sandboxes on its own ladder, where a "
        "run may not name a host path as a sandbox's root; accepted: the runtime root or an OCI image by reference. "
        "Start the worker with EVALSI_SANDBOXD (evalsi serve and compose do) to let runs name images under "
        "evalsi-sandboxd's --image-root directories")


@dataclass(frozen=True)
class SandboxAccess:
    """What an evaluator gets in ``EvalContext.sandbox``: the run's request and where to open sessions."""

    spec: SandboxSpec
    opener: SandboxOpener
    project: str = ""

    async def open(self) -> SandboxSession:
        return await self.opener.open(self.spec, self.project)


def local_sandbox_config(path: Path = Path("evalsi.yaml")) -> SandboxConfig:
    """The ``sandbox:`` section of ./evalsi.yaml when the file exists, else the defaults; an error names the file
    and the key."""
    if not path.is_file():
        return SandboxConfig()
    document = read_yaml_file(path)
    if not isinstance(document, dict):
        raise BadInputError(f"{path}: expected a mapping at the top level")
    try:
        config = load_sandbox_config(document.get("sandbox"))
        if config.ladder is not None:
            check_ladder(config.ladder, "sandbox.ladder")
        return config
    except BadInputError as exc:
        raise BadInputError(f"{path}: {exc}") from None


def sandbox_request(message: run_pb2.SandboxSpec | None, where: str = "spec.sandbox",
                    base: SandboxSpec | None = None) -> SandboxSpec:
    """``spec.sandbox`` as a ``SandboxSpec`` over ``base`` (unset fields keep its values); a ``BadInputError`` naming
    the field and what is accepted when a value is wrong."""
    spec = base or SandboxSpec()
    if message is None:
        return spec
    problems = sandbox_problems(message, where)
    if problems:
        raise BadInputError("; ".join(problems))
    if message.min_isolation:
        spec = replace(spec, min_isolation=Level.parse(message.min_isolation, f"{where}.minIsolation"))
    if message.network == "allow":
        spec = replace(spec, network=NetworkPolicy(tuple(parse_endpoint(text, "") for text in message.allow)))
    return replace(spec, resources=_resources(message.resources, spec.resources))


def sandbox_problems(message: run_pb2.SandboxSpec, where: str = "spec.sandbox") -> list[str]:
    """Every problem of ``spec.sandbox``, each naming its field and what is accepted."""
    problems: list[str] = []
    pool = getattr(message, "class")  # a Python keyword, so not an attribute name
    if pool not in ("", "default"):
        problems.append(f"{where}.class: {pool[:100]!r} is not a sandbox class here; accepted: default "
                        "(standalone servers have one sandbox pool)")
    if message.min_isolation:
        try:
            Level.parse(message.min_isolation, f"{where}.minIsolation")
        except BadInputError as exc:
            problems.append(str(exc))
    if message.network not in ("", *_NETWORK):
        problems.append(f"{where}.network: {message.network[:100]!r}; accepted: {', '.join(_NETWORK)}")
    if message.network == "allow" and not message.allow:
        problems.append(f"{where}.allow: network allow needs at least one HOST:PORT endpoint")
    if message.allow and message.network != "allow":
        problems.append(f"{where}.allow: endpoints are only used with network: allow")
    if len(message.allow) > MAX_ALLOW:
        problems.append(f"{where}.allow: {len(message.allow)} endpoints exceed the limit of {MAX_ALLOW}")
    else:
        for index, text in enumerate(message.allow):
            try:
                parse_endpoint(text, f"{where}.allow[{index}]")
            except BadInputError as exc:
                problems.append(str(exc))
    if message.HasField("resources"):
        try:
            _resources(message.resources, Resources(), f"{where}.resources")
        except BadInputError as exc:
            problems.append(str(exc))
    return problems


def _resources(message: run_pb2.SandboxResources, base: Resources, where: str = "spec.sandbox.resources"
               ) -> Resources:
    out = base
    if message.HasField("timeout"):
        seconds = message.timeout.ToNanoseconds() / 1e9
        out = replace(out, timeout_s=check_timeout(seconds, f"{where}.timeout"))
    if message.memory:
        out = replace(out, memory_bytes=check_bound(message.memory, f"{where}.memory", 1 << 20, MAX_MEMORY_BYTES))
    if message.pids:
        out = replace(out, pids=check_bound(message.pids, f"{where}.pids", 1, MAX_PIDS))
    if message.output_bytes:
        out = replace(out, output_bytes=check_bound(message.output_bytes, f"{where}.outputBytes", 1,
                                                    MAX_OUTPUT_BYTES))
    if message.cpu_seconds:
        out = replace(out, cpu_seconds=check_bound(message.cpu_seconds, f"{where}.cpuSeconds", 1,
                                                   int(MAX_TIMEOUT_S)))
    return out
