"""SandboxService's messages to the sandbox's vocabulary (``model.py``) and back: sandboxd's handlers read specs
with these and the client reads results with them, so both sides agree on one mapping.

A spec from the wire is checked as a request from anyone: every bound within the limits ``config.py`` sets for
evalsi.yaml, env names and values bounded, 0 meaning the server's default (never unbounded). Errors name the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, cast

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import MAX_ALLOW, check_bound, check_endpoint
from evalsi.sandbox.config import (
    MAX_MEMORY_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_PIDS,
    MAX_TIMEOUT_S,
    check_timeout,
)
from evalsi.sandbox.model import (
    DEFAULT_ROOT,
    EgressEvent,
    Enforcement,
    ExecResult,
    FileAccess,
    IsolationReport,
    Level,
    NetworkPolicy,
    Outcome,
    OutcomeKind,
    ProbeVerdict,
    Resources,
    RootFilesystem,
    SandboxSpec,
)
from evalsi.sandbox.oci_ref import parse_reference
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb

__all__ = [
    "MAX_LADDER",
    "egress_from_proto",
    "egress_to_proto",
    "level_from_proto",
    "level_to_proto",
    "network_from_proto",
    "network_to_proto",
    "outcome_from_proto",
    "report_from_proto",
    "report_to_proto",
    "result_from_proto",
    "result_to_proto",
    "spec_from_proto",
    "spec_to_proto",
    "verdict_from_proto",
    "verdict_to_proto",
]

_MAX_ENV = 256
_MAX_ENV_BYTES = 128 * 1024
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_LADDER = 8  # driver names a caller's ladder may hold
_FILE_ACCESS = ("read-only", "workspace-write", "full-access")
_ROOT_KINDS = ("runtime", "image", "tarball", "oci")
_OUTCOME_KINDS = ("exit", "denied", "runner_failure", "timeout")


def level_to_proto(level: Level) -> Any:
    """The wire's IsolationLevel (its numbers are Level's; protobuf's enum type is a plain int at run time)."""
    return int(level)


def level_from_proto(value: int, where: str = "min_isolation") -> Level:
    if value == 0:
        return Level.NONE
    try:
        return Level(value)
    except ValueError:
        raise BadInputError(f"{where}: {value} is not an isolation level; accepted: vm, kernel, namespaced, "
                            "confined") from None


def network_to_proto(network: NetworkPolicy) -> pb.NetworkPolicy:
    return pb.NetworkPolicy(allow=[pb.Endpoint(host=e.host, port=e.port) for e in network.allow])


def network_from_proto(message: pb.NetworkPolicy, where: str = "spec.network") -> NetworkPolicy:
    if len(message.allow) > MAX_ALLOW:
        raise BadInputError(f"{where}.allow: at most {MAX_ALLOW} endpoints, got {len(message.allow)}")
    return NetworkPolicy(tuple(check_endpoint(endpoint.host, endpoint.port, f"{where}.allow[{index}]")
                               for index, endpoint in enumerate(message.allow)))


def _resources(message: pb.Resources, base: Resources, where: str) -> Resources:
    resources = base
    if message.timeout_s:
        if not math.isfinite(message.timeout_s):
            raise BadInputError(f"{where}.timeout_s: expected seconds, got {message.timeout_s}")
        resources = replace(resources, timeout_s=check_timeout(message.timeout_s, f"{where}.timeout_s"))
    if message.memory_bytes:
        resources = replace(resources, memory_bytes=check_bound(message.memory_bytes, f"{where}.memory_bytes",
                                                                1 << 20, MAX_MEMORY_BYTES))
    if message.pids:
        resources = replace(resources, pids=check_bound(message.pids, f"{where}.pids", 1, MAX_PIDS))
    if message.cpu_seconds:
        resources = replace(resources, cpu_seconds=check_bound(message.cpu_seconds, f"{where}.cpu_seconds", 1,
                                                               int(MAX_TIMEOUT_S)))
    if message.output_bytes:
        resources = replace(resources, output_bytes=check_bound(message.output_bytes, f"{where}.output_bytes", 1,
                                                                MAX_OUTPUT_BYTES))
    if message.disk_bytes:
        resources = replace(resources, disk_bytes=check_bound(message.disk_bytes, f"{where}.disk_bytes", 1 << 20,
                                                              MAX_MEMORY_BYTES * 16))
    return resources


def check_env(env: Mapping[str, str], where: str) -> dict[str, str]:
    if len(env) > _MAX_ENV:
        raise BadInputError(f"{where}: at most {_MAX_ENV} variables, got {len(env)}")
    size = 0
    for name, value in env.items():
        if not _ENV_NAME.fullmatch(name):
            raise BadInputError(f"{where}: {name[:130]!r} is not a variable name (letters, digits, _; at most 128)")
        if "\0" in value:
            raise BadInputError(f"{where}.{name}: a value cannot hold NUL")
        size += len(name) + len(value)
    if size > _MAX_ENV_BYTES:
        raise BadInputError(f"{where}: {size} characters in all is over the limit of {_MAX_ENV_BYTES}")
    return dict(env)


def spec_from_proto(message: pb.SandboxSpec, *, default_level: Level, default_resources: Resources,
                    image_roots: tuple[Path, ...] = (), default_root: RootFilesystem = DEFAULT_ROOT,
                    where: str = "spec") -> SandboxSpec:
    """A caller's spec, checked. The root is the server's (``default_root``, the runtime image unless its operator
    configured another) unless the caller names an image or tarball under one of ``image_roots`` (the server's): a
    caller never names an arbitrary host path, nor the host's /usr, as the sandbox's ``/``."""
    level = level_from_proto(message.min_isolation, f"{where}.min_isolation") if message.min_isolation else (
        default_level)
    if len(message.ladder) > MAX_LADDER:
        raise BadInputError(f"{where}.ladder: at most {MAX_LADDER} driver names")
    file_access = message.file_access or "workspace-write"
    if file_access not in _FILE_ACCESS:
        raise BadInputError(f"{where}.file_access: {file_access[:60]!r}; accepted: {', '.join(_FILE_ACCESS)}")
    workdir = message.workdir or "/workspace"
    if not workdir.startswith("/") or ".." in workdir.split("/") or len(workdir) > 256 or "\0" in workdir:
        raise BadInputError(f"{where}.workdir: {workdir[:60]!r}; an absolute path without '..', at most 256 "
                            "characters")
    return SandboxSpec(
        min_isolation=level,
        ladder=tuple(message.ladder) or None,
        network=network_from_proto(message.network, f"{where}.network"),
        resources=_resources(message.resources, default_resources, f"{where}.resources"),
        root=_root(message.root, image_roots, default_root, f"{where}.root"),
        env=check_env(message.env, f"{where}.env"),
        file_access=cast(FileAccess, file_access),
        workdir=workdir,
    )


def _root(message: pb.RootFilesystem, image_roots: tuple[Path, ...], default_root: RootFilesystem,
          where: str) -> RootFilesystem:
    """The server's own root (``default_root``) for an unset or ``runtime`` root; an image or tarball under the
    server's image roots; an OCI image by reference (served from the cache, or pulled from a registry this server's
    sandbox.images lists, checked where it is resolved) or by a layout or archive path under the image roots. The
    host's /usr is never a caller's choice: a request naming it is refused."""
    kind = message.kind or ("runtime" if not message.path else "")
    if kind == "host":
        raise BadInputError(f"{where}.kind: 'host' (the host's /usr) is not a request's choice: this server applies "
                            f"its own root (sandbox.root in its evalsi.yaml) to every sandbox; accepted: "
                            f"{', '.join(_ROOT_KINDS)}")
    if kind not in _ROOT_KINDS:
        raise BadInputError(f"{where}.kind: {message.kind[:40]!r}; accepted: {', '.join(_ROOT_KINDS)}")
    if kind == "runtime":
        if message.path:
            raise BadInputError(f"{where}.path: the runtime root takes no path (it is the server's own root)")
        return default_root
    if kind == "oci" and not message.path.startswith("/"):
        parse_reference(message.path, f"{where}.path")
        return RootFilesystem("oci", message.path)
    if not message.path.startswith("/") or "\0" in message.path:
        raise BadInputError(f"{where}.path: an absolute path under the server's image roots")
    path = Path(message.path).resolve()
    if not any(path == root or root in path.parents for root in image_roots):
        allowed = ", ".join(str(root) for root in image_roots) or "none configured (--image-root)"
        raise BadInputError(f"{where}.path: {message.path[:200]!r} is not under an image root of this server; "
                            f"accepted: {allowed}")
    return RootFilesystem(cast(Literal["image", "tarball", "oci"], kind), str(path))


def spec_to_proto(spec: SandboxSpec) -> pb.SandboxSpec:
    r = spec.resources
    return pb.SandboxSpec(
        min_isolation=level_to_proto(spec.min_isolation),
        ladder=list(spec.ladder or ()),
        network=network_to_proto(spec.network),
        resources=pb.Resources(timeout_s=r.timeout_s, memory_bytes=r.memory_bytes, pids=r.pids,
                               cpu_seconds=r.cpu_seconds or 0, output_bytes=r.output_bytes, disk_bytes=r.disk_bytes),
        root=pb.RootFilesystem(kind=spec.root.kind, path=spec.root.path),
        env=dict(spec.env),
        file_access=spec.file_access,
        workdir=spec.workdir,
    )


def report_to_proto(report: IsolationReport) -> pb.IsolationReport:
    return pb.IsolationReport(driver=report.driver, level=level_to_proto(report.level),
                              enforcement=report.enforcement, bounds=dict(report.bounds),
                              not_enforced=list(report.not_enforced), requested=level_to_proto(report.requested))


def report_from_proto(message: pb.IsolationReport) -> IsolationReport:
    enforcement: Enforcement = "full" if message.enforcement == "full" else "partial"
    return IsolationReport(driver=message.driver, level=level_from_proto(message.level, "isolation.level"),
                           enforcement=enforcement, bounds=dict(message.bounds),
                           not_enforced=tuple(message.not_enforced),
                           requested=level_from_proto(message.requested, "isolation.requested"))


def verdict_to_proto(verdict: ProbeVerdict) -> pb.ProbeVerdict:
    return pb.ProbeVerdict(driver=verdict.driver, level=level_to_proto(verdict.level), available=verdict.available,
                           enforcement=verdict.enforcement, reason=verdict.reason,
                           not_enforced=list(verdict.not_enforced))


def verdict_from_proto(message: pb.ProbeVerdict) -> ProbeVerdict:
    enforcement: Enforcement = "full" if message.enforcement == "full" else "partial"
    return ProbeVerdict(driver=message.driver, level=level_from_proto(message.level, "verdict.level"),
                        available=message.available, enforcement=enforcement, reason=message.reason,
                        not_enforced=tuple(message.not_enforced))


def result_to_proto(result: ExecResult) -> pb.ExecResult:
    outcome = result.outcome
    wire = pb.Outcome(kind=outcome.kind, effect=outcome.effect, signature=outcome.signature)
    if outcome.code is not None:
        wire.code = outcome.code
    return pb.ExecResult(outcome=wire, isolation=report_to_proto(result.isolation),
                         stdout_truncated=result.stdout_truncated, stderr_truncated=result.stderr_truncated,
                         duration_s=result.duration_s, cpu_s=result.cpu_s, max_rss_bytes=result.max_rss_bytes)


def outcome_from_proto(message: pb.Outcome) -> Outcome:
    if message.kind not in _OUTCOME_KINDS:
        # A server newer than this client: never mistaken for the program's own behavior.
        return Outcome("runner_failure", signature=f"unknown outcome kind {message.kind[:40]!r} from sandboxd")
    return Outcome(cast(OutcomeKind, message.kind), code=message.code if message.HasField("code") else None,
                   effect=message.effect, signature=message.signature)


def result_from_proto(message: pb.ExecResult, stdout: bytes, stderr: bytes) -> ExecResult:
    return ExecResult(outcome=outcome_from_proto(message.outcome), isolation=report_from_proto(message.isolation),
                      stdout=stdout, stderr=stderr, stdout_truncated=message.stdout_truncated,
                      stderr_truncated=message.stderr_truncated, duration_s=message.duration_s,
                      cpu_s=message.cpu_s, max_rss_bytes=message.max_rss_bytes)


def egress_from_proto(message: pb.EgressEvent) -> EgressEvent:
    return EgressEvent(time=message.time.ToNanoseconds() / 1e9, host=message.host, port=message.port,
                       allowed=message.allowed, bytes_sent=message.bytes_sent, bytes_received=message.bytes_received,
                       address=message.address, duration_s=message.duration_s, reason=message.reason)


def egress_to_proto(event: EgressEvent) -> pb.EgressEvent:
    wire = pb.EgressEvent(host=event.host, port=event.port, allowed=event.allowed, bytes_sent=event.bytes_sent,
                          bytes_received=event.bytes_received, address=event.address, duration_s=event.duration_s,
                          reason=event.reason)
    wire.time.FromNanoseconds(int(event.time * 1e9))
    return wire
