"""evalsi.yaml's ``sandbox`` section: the ladder, the default minimum and the default bounds of an execution.

    sandbox:
      ladder: [firecracker, bwrap, landlock]   # tried strongest first; the first usable rung meeting the minimum wins
      min_isolation: namespaced                # vm | kernel | namespaced | confined
      root: runtime                            # runtime (default: the runtime image) | host (trusted code
                                               # only: the host's /usr read-only) | an image directory or tarball
      cache_dir: /var/cache/evalsi/sandbox     # the runtime image and unpacked tarballs, by digest
      cgroup: auto                             # auto | none | a delegated cgroup v2 directory
      resources: {timeout: 30s, memory: 536870912, pids: 256, output_bytes: 1048576, cpu_seconds: 60}
      drivers:                                 # per-driver options, each driver checks its own
        bwrap: {binary: /usr/bin/bwrap}
      egress: {upstream: http://proxy:3128}    # the egress proxy of allowlists (egress_config.py)
      host_uid: 65533                          # as root: the unprivileged host user (and host_gid: its group)
                                               # sandboxed processes run as (host_user.py); 1 to 4294967294
      images: {registries: [docker.io]}        # where OCI image roots may be pulled from (oci_config.py)

Every error names the key path and what is accepted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError
from evalsi.sandbox.checks import check_bound, seconds
from evalsi.sandbox.egress_config import EgressSettings, load_egress_settings
from evalsi.sandbox.host_user import DEFAULT_HOST_ID, MAX_HOST_ID
from evalsi.sandbox.model import DEFAULT_RESOURCES, Level, Resources, RootFilesystem
from evalsi.sandbox.oci_config import ImageSettings, load_image_settings
from evalsi.sandbox.oci_ref import parse_reference

__all__ = ["SandboxConfig", "default_cache_dir", "load_sandbox_config", "oci_root", "root_from_path"]

_KEYS = ("ladder", "min_isolation", "root", "cache_dir", "cgroup", "resources", "drivers", "egress", "host_uid",
         "host_gid", "images")
_RESOURCE_KEYS = ("timeout", "memory", "pids", "output_bytes", "cpu_seconds", "disk_bytes")
# Upper bounds a config or a request may ask for: past them a typo (an extra zero) would go unnoticed.
MAX_TIMEOUT_S = 24 * 3600.0
MAX_MEMORY_BYTES = 1 << 40
MAX_PIDS = 1 << 16
MAX_OUTPUT_BYTES = 1 << 30


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME, else ``~/.cache``; for root ``/var/cache``: the sandbox's host user (host_user.py) must be
    able to reach the roots cached there, and root's home is closed to it."""
    base = os.environ.get("XDG_CACHE_HOME") or ("/var/cache" if os.geteuid() == 0 else str(Path.home() / ".cache"))
    return Path(base) / "evalsi" / "sandbox"


@dataclass(frozen=True)
class SandboxConfig:
    # Strongest first. None: the default ladder (ladder.DEFAULT_LADDER, limited to the registered drivers).
    ladder: tuple[str, ...] | None = None
    min_isolation: Level = Level.NAMESPACED
    root: RootFilesystem = field(default_factory=RootFilesystem)
    cache_dir: Path = field(default_factory=default_cache_dir)
    # "auto": a delegated cgroup v2 directory or the v1 memory/pids hierarchies when writable; "none": rlimits only.
    cgroup: str = "auto"
    resources: Resources = DEFAULT_RESOURCES
    drivers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    egress: EgressSettings = field(default_factory=EgressSettings)
    # The unprivileged host user sandboxed processes run as when evalsi runs as root (host_user.py).
    host_uid: int = DEFAULT_HOST_ID
    host_gid: int = DEFAULT_HOST_ID
    # OCI image roots: the registries they may be pulled from and their bounds (oci_config.py).
    images: ImageSettings = field(default_factory=ImageSettings)

    def driver_options(self, name: str) -> Mapping[str, Any]:
        return self.drivers.get(name, {})


def root_from_path(text: str, where: str) -> RootFilesystem:
    """``runtime`` (or empty: the default), the runtime image; ``host``, the host's /usr read-only (trusted code only,
    the operator's choice); else an image directory or a tarball named by path (``./host`` for a directory named
    host)."""
    if not text or text == "runtime":
        return RootFilesystem("runtime")
    if text == "host":
        return RootFilesystem("host")
    if text.startswith("oci:"):
        return oci_root(text[len("oci:"):], where)
    path = Path(text).expanduser()
    if path.is_dir():
        return RootFilesystem("image", str(path.resolve()))
    if path.is_file():
        return RootFilesystem("tarball", str(path.resolve()))
    raise BadInputError(f"{where}: {text!r} is neither an image directory nor a tarball; accepted: runtime (the "
                        "default runtime image), host (the host's /usr, trusted code only), oci:REFERENCE or "
                        "oci:PATH (an OCI image), or a path to an image directory or tarball")


def oci_root(text: str, where: str) -> RootFilesystem:
    """An OCI image: a reference (``python:3.12-slim``), or an image layout directory or archive by path (absolute,
    or starting with ``./``, ``../`` or ``~``). The registry is checked where the image is resolved."""
    if text.startswith(("/", "./", "../", "~")):
        path = Path(text).expanduser()
        if not path.exists():
            raise BadInputError(f"{where}: oci:{text!r}: no such image layout directory or archive")
        return RootFilesystem("oci", str(path.resolve()))
    parse_reference(text, where)
    return RootFilesystem("oci", text)


def load_sandbox_config(raw: Any, path: str = "sandbox") -> SandboxConfig:
    """The ``sandbox`` section (None: the defaults)."""
    if raw is None:
        return SandboxConfig()
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{path}: expected a mapping such as {{ladder: [bwrap, landlock]}}, "
                            f"got {type(raw).__name__}")
    _no_unknown(raw, _KEYS, path)
    config = SandboxConfig()
    if raw.get("ladder") is not None:
        config = replace(config, ladder=_ladder(raw["ladder"], f"{path}.ladder"))
    if raw.get("min_isolation") is not None:
        config = replace(config, min_isolation=Level.parse(str(raw["min_isolation"]), f"{path}.min_isolation"))
    if raw.get("root"):
        config = replace(config, root=root_from_path(_text(raw["root"], f"{path}.root"), f"{path}.root"))
    if raw.get("cache_dir"):
        config = replace(config, cache_dir=Path(_text(raw["cache_dir"], f"{path}.cache_dir")).expanduser())
    if raw.get("cgroup") is not None:
        config = replace(config, cgroup=_cgroup(raw["cgroup"], f"{path}.cgroup"))
    if raw.get("resources") is not None:
        config = replace(config, resources=load_resources(raw["resources"], f"{path}.resources"))
    if raw.get("drivers") is not None:
        config = replace(config, drivers=_drivers(raw["drivers"], f"{path}.drivers"))
    if raw.get("egress") is not None:
        config = replace(config, egress=load_egress_settings(raw["egress"], f"{path}.egress"))
    if raw.get("images") is not None:
        config = replace(config, images=load_image_settings(raw["images"], f"{path}.images"))
    # Never 0: the point is a user without root's privileges.
    if raw.get("host_uid") is not None:
        config = replace(config, host_uid=check_bound(raw["host_uid"], f"{path}.host_uid", 1, MAX_HOST_ID))
    if raw.get("host_gid") is not None:
        config = replace(config, host_gid=check_bound(raw["host_gid"], f"{path}.host_gid", 1, MAX_HOST_ID))
    return config


def load_resources(raw: Any, path: str, base: Resources = DEFAULT_RESOURCES) -> Resources:
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{path}: expected a mapping such as {{timeout: 30s, memory: 536870912}}")
    _no_unknown(raw, _RESOURCE_KEYS, path)
    resources = base
    if raw.get("timeout") is not None:
        resources = replace(resources, timeout_s=check_timeout(seconds(raw["timeout"], f"{path}.timeout"),
                                                               f"{path}.timeout"))
    if raw.get("memory") is not None:
        resources = replace(resources, memory_bytes=check_bound(raw["memory"], f"{path}.memory", 1 << 20,
                                                                MAX_MEMORY_BYTES))
    if raw.get("pids") is not None:
        resources = replace(resources, pids=check_bound(raw["pids"], f"{path}.pids", 1, MAX_PIDS))
    if raw.get("output_bytes") is not None:
        resources = replace(resources, output_bytes=check_bound(raw["output_bytes"], f"{path}.output_bytes", 0,
                                                                MAX_OUTPUT_BYTES))
    if raw.get("cpu_seconds") is not None:
        resources = replace(resources, cpu_seconds=check_bound(raw["cpu_seconds"], f"{path}.cpu_seconds", 1,
                                                               int(MAX_TIMEOUT_S)))
    if raw.get("disk_bytes") is not None:
        resources = replace(resources, disk_bytes=check_bound(raw["disk_bytes"], f"{path}.disk_bytes", 1 << 20,
                                                              MAX_MEMORY_BYTES * 16))
    return resources


def check_timeout(seconds: float, where: str) -> float:
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise BadInputError(f"{where}: {seconds:g}s is out of range; accepted: more than 0 and at most "
                            f"{MAX_TIMEOUT_S:g}s")
    return seconds


def _ladder(raw: Any, where: str) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [part for part in raw.split(",")]
    if not isinstance(raw, list) or not raw:
        raise BadInputError(f"{where}: expected a non-empty list of driver names such as [bwrap, landlock]")
    names = tuple(_text(item, f"{where}[{index}]").strip() for index, item in enumerate(raw))
    for index, name in enumerate(names):
        if names.index(name) != index:
            raise BadInputError(f"{where}[{index}]: {name!r} appears twice")
    return names


def _cgroup(raw: Any, where: str) -> str:
    text = _text(raw, where)
    if text in ("auto", "none") or text.startswith("/"):
        return text
    raise BadInputError(f"{where}: {text!r}; accepted: auto, none, or an absolute cgroup v2 directory")


def _drivers(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(raw, Mapping):
        raise BadInputError(f"{where}: expected a mapping of driver name to its options, such as "
                            "{bwrap: {binary: /usr/bin/bwrap}}")
    options: dict[str, Mapping[str, Any]] = {}
    for name, value in raw.items():
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise BadInputError(f"{where}.{name}: expected a mapping of options")
        options[str(name)] = dict(value)
    return options


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise BadInputError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _no_unknown(raw: Mapping[Any, Any], keys: tuple[str, ...], path: str) -> None:
    unknown = sorted(str(key) for key in raw if key not in keys)
    if unknown:
        raise BadInputError(f"{path}.{unknown[0]}: unknown key; accepted: {', '.join(keys)}")
