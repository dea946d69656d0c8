"""``evalsi-plugin.yaml``: what a subprocess plugin is, where its code comes from, and the host's bounds on it.

Only the Python runtime is built: ``runtime.python`` with a pip requirement (``package``) or a local directory
(``path``, relative to the manifest) and an ``entrypoint`` (``module:attr`` naming a Pack, Evaluator or list).
Which evaluators a plugin hosts, their scopes, requirements and outputs, come from its Describe answer.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.durations import parse_duration
from evalsi.errors import BadInputError
from evalsi.yaml_files import read_yaml_file

MANIFEST_NAME = "evalsi-plugin.yaml"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)?$")
_ENTRYPOINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
# (default, ceiling) of each limit.
TIMEOUT_S = (30.0, 600.0)
STARTUP_TIMEOUT_S = (60.0, 600.0)
MAX_BATCH = (64, 1024)
MAX_MESSAGE_MB = (64, 256)
_TOP_KEYS = {"name", "version", "kind", "description", "tier", "upstream", "runtime", "limits"}
# A plugin's maturity tier in the catalog: a community plugin by default; "wrapped" for a thin shim over a pinned
# upstream framework (the adapters Evals.si ships), which then names that release. "native" is the built-in packs'.
TIERS = ("community", "wrapped")
_PYTHON_KEYS = {"package", "path", "entrypoint", "share_host_packages"}
_LIMIT_KEYS = {"timeout", "startup_timeout", "max_batch", "max_message_mb"}
# Bytes of a local package hashed into the venv's digest; a bigger tree is refused (a plugin, not a monorepo).
_MAX_TREE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PluginManifest:
    name: str
    version: str
    description: str
    entrypoint: str
    package: str  # a pip requirement, or "" with path
    path: Path | None  # a local package directory, installed offline
    share_host_packages: bool
    timeout_s: float
    startup_timeout_s: float
    max_batch: int
    max_message_bytes: int
    source: Path
    digest: str  # the manifest's bytes and a local package's files: the venv's cache key
    tier: str = "community"
    upstream: str = ""  # a wrapped plugin's pinned upstream release, e.g. "deepeval==4.3.1"

    @property
    def pack(self) -> str:
        return self.name


def _unknown(where: str, given: dict[str, Any], known: set[str]) -> None:
    extra = sorted(set(given) - known)
    if extra:
        raise BadInputError(f"{where}: unknown key(s) {', '.join(extra)}; accepted: {', '.join(sorted(known))}")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _seconds(value: Any, where: str, bounds: tuple[float, float]) -> float:
    if value is None:
        return bounds[0]
    try:
        seconds = float(parse_duration(value)[:-1])
    except ValueError as exc:
        raise BadInputError(f"{where}: {exc}") from None
    if not 0 < seconds <= bounds[1]:
        raise BadInputError(f"{where}: must be more than 0s and at most {bounds[1]:g}s, got {value!r}")
    return seconds


def _count(value: Any, where: str, bounds: tuple[int, int]) -> int:
    if value is None:
        return bounds[0]
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= bounds[1]:
        raise BadInputError(f"{where}: must be an integer from 1 to {bounds[1]}, got {value!r}")
    return value


def _tree_digest(root: Path, where: str) -> str:
    digest, total = hashlib.sha256(), 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                       and not any(part.endswith(".egg-info") or part == "build" for part in p.parts)):
        data = path.read_bytes()
        total += len(data)
        if total > _MAX_TREE_BYTES:
            raise BadInputError(f"{where}: the package tree {root} is over {_MAX_TREE_BYTES >> 20} MiB")
        digest.update(str(path.relative_to(root)).encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


def read_manifest(path: str | Path) -> PluginManifest:
    """Parse and check ``evalsi-plugin.yaml``; every error names the file and the key at fault."""
    source = Path(path).resolve()
    doc = _mapping(read_yaml_file(source), str(source))
    _unknown(str(source), doc, _TOP_KEYS)
    name, version = str(doc.get("name", "")), str(doc.get("version", ""))
    if not _NAME.match(name):
        raise BadInputError(f"{source}: name {name!r} must look like 'namespace/name' (lowercase, digits, - _ .)")
    if not re.match(r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$", version):
        raise BadInputError(f"{source}: version {version!r} must be semantic (1.0.0)")
    if doc.get("kind", "evaluator") != "evaluator":
        raise BadInputError(f"{source}: kind {doc.get('kind')!r}: only 'evaluator' plugins are built")
    runtime = _mapping(doc.get("runtime"), f"{source}: runtime")
    if set(runtime) != {"python"}:
        raise BadInputError(f"{source}: runtime must be 'python' ({{package or path, entrypoint}}); "
                            f"got {', '.join(sorted(runtime)) or 'nothing'} (wasm and image runtimes are not built)")
    python = _mapping(runtime["python"], f"{source}: runtime.python")
    _unknown(f"{source}: runtime.python", python, _PYTHON_KEYS)
    entrypoint = str(python.get("entrypoint", ""))
    if not _ENTRYPOINT.match(entrypoint):
        raise BadInputError(f"{source}: runtime.python.entrypoint {entrypoint!r} must be module:attribute")
    package, local = str(python.get("package", "")), python.get("path")
    if bool(package) == (local is not None):
        raise BadInputError(f"{source}: runtime.python needs exactly one of package (a pip requirement) or path")
    tree = ""
    local_path = None
    if local is not None:
        local_path = (source.parent / str(local)).resolve()
        if not (local_path / "pyproject.toml").is_file() and not (local_path / "setup.py").is_file():
            raise BadInputError(f"{source}: runtime.python.path {local!r}: {local_path} has no pyproject.toml")
        tree = _tree_digest(local_path, f"{source}: runtime.python.path")
    share = python.get("share_host_packages", False)
    if not isinstance(share, bool):
        raise BadInputError(f"{source}: runtime.python.share_host_packages must be true or false")
    tier, upstream = str(doc.get("tier", "community")), doc.get("upstream", "")
    if tier not in TIERS:
        raise BadInputError(f"{source}: tier {tier!r}: accepted: {', '.join(TIERS)}")
    if not isinstance(upstream, str) or len(upstream) > 200 or bool(upstream) != (tier == "wrapped"):
        raise BadInputError(f"{source}: upstream: a wrapped plugin names its pinned upstream release "
                            "(e.g. 'deepeval==4.3.1', at most 200 characters); only a wrapped one does")
    limits = _mapping(doc.get("limits", {}), f"{source}: limits")
    _unknown(f"{source}: limits", limits, _LIMIT_KEYS)
    digest = hashlib.sha256(source.read_bytes() + b"\0" + tree.encode()).hexdigest()
    return PluginManifest(
        name=name, version=version, description=str(doc.get("description", "")), entrypoint=entrypoint,
        package=package, path=local_path,
        share_host_packages=share,
        timeout_s=_seconds(limits.get("timeout"), f"{source}: limits.timeout", TIMEOUT_S),
        startup_timeout_s=_seconds(limits.get("startup_timeout"), f"{source}: limits.startup_timeout",
                                   STARTUP_TIMEOUT_S),
        max_batch=_count(limits.get("max_batch"), f"{source}: limits.max_batch", MAX_BATCH),
        max_message_bytes=_count(limits.get("max_message_mb"), f"{source}: limits.max_message_mb",
                                 MAX_MESSAGE_MB) << 20,
        source=source, digest=digest, tier=tier, upstream=upstream,
    )
