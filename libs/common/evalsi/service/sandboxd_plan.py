"""How ``evalsi serve`` runs ``evalsi-sandboxd``: its command line, its configuration file and its address.

sandboxd listens on a Unix socket in ``<state>/sandboxd/`` (0700) unless evalsi.yaml's ``sandboxd.listen`` names
another address; the workers find it in ``EVALSI_SANDBOXD`` (``evalsi.sandbox.client.SANDBOXD_ENV``). Its
configuration (evalsi.yaml's ``sandbox`` section and the access sections, so a gated sandboxd authenticates its
callers like the api) goes in a 0600 file of its own. It is exec'd rather than forked from the supervisor: gRPC's
fork handlers must be off in it from its first import of grpc (``evalsi_sandboxd``'s package says why), and the
supervisor has imported grpc long before.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from evalsi.sandbox.client import SANDBOXD_ENV
from evalsi.service.config import Config

__all__ = ["SANDBOXD_ENV", "SandboxdPlan", "sandboxd_environment", "sandboxd_plan"]


@dataclass(frozen=True)
class SandboxdPlan:
    argv: list[str]
    env: dict[str, str]
    address: str


# All sandboxd inherits from serve's environment: sandbox hosts hold no provider keys or store secrets (§17), and
# whatever runs in a sandbox starts from a cleared environment anyway.
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_CACHE_HOME", "VIRTUAL_ENV", "PYTHONPATH",
              "PYTHONUNBUFFERED", "EVALSI_NO_AUTH")


def sandboxd_environment(base: Mapping[str, str], plan: SandboxdPlan) -> dict[str, str]:
    return {**{key: base[key] for key in _INHERITED if key in base}, **plan.env}


def sandboxd_plan(config: Config, state_dir: Path) -> SandboxdPlan | None:
    """sandboxd's process under ``evalsi serve``, or None when ``sandboxd.enabled`` is false."""
    settings = config.sandboxd
    if not settings.enabled:
        return None
    home = (state_dir / "sandboxd").resolve()
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    address = settings.listen or f"unix:{_socket_path(home)}"
    document = {**dict(config.access.sections), "sandbox": dict(config.sandbox)}
    path = home / "sandboxd.yaml"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(document, out)  # JSON is YAML
    argv = [sys.executable, "-m", "evalsi_sandboxd.main", "--listen", address, "--state-dir", str(home),
            "--lease", str(settings.lease_s), "--max-sandboxes", str(settings.max_sandboxes)]
    return SandboxdPlan(argv, {"EVALSI_CONFIG": str(path), "GRPC_ENABLE_FORK_SUPPORT": "0"}, address)


def _socket_path(home: Path) -> Path:
    """``<home>/sandboxd.sock``, or, when that path is too long for a Unix socket address (108 bytes with its NUL),
    a directory of this user's under the temporary directory named by the state directory's hash."""
    path = home / "sandboxd.sock"
    if len(os.fsencode(path)) < 100:
        return path
    digest = hashlib.sha256(os.fsencode(home)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"evalsi-sandboxd-{os.getuid()}-{digest}" / "sandboxd.sock"
