"""The credential cache: ``$XDG_CONFIG_HOME/evalsi/credentials`` (``~/.config/evalsi/credentials``), one login per
server, written by ``evalsi login`` and read before each call.

The file holds bearer and refresh tokens, so it is created 0600 in a 0700 directory, replaced atomically, and
refused when group or others can read it (the message says how to fix it), as ssh refuses a readable key. A JSON
document::

    {"version": 1, "servers": {"http://127.0.0.1:8080": {"issuer": ..., "client_id": ..., "token_endpoint": ...,
                                                          "access_token": ..., "refresh_token": ...,
                                                          "expires_at": 1767225600.0}}}
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError

CACHE_NAME = Path("evalsi") / "credentials"
VERSION = 1


@dataclass(frozen=True)
class CachedLogin:
    """What one ``evalsi login`` left for one server: the tokens and how to refresh them."""

    issuer: str
    client_id: str
    token_endpoint: str
    access_token: str
    refresh_token: str = ""
    # Seconds since the epoch; 0 when the issuer did not say (the token is then used until refused).
    expires_at: float = 0.0
    scopes: tuple[str, ...] = field(default_factory=tuple)

    def expired(self, now: float, margin_s: float = 30.0) -> bool:
        """Expired, or about to: a call started now must not arrive with a token that lapsed on the way."""
        return bool(self.expires_at) and now >= self.expires_at - margin_s

    def __repr__(self) -> str:  # a login in a traceback or a debugger must not show its tokens
        return f"CachedLogin(issuer={self.issuer!r}, client_id={self.client_id!r}, expires_at={self.expires_at})"


def cache_path(env: Mapping[str, str], home: Path) -> Path:
    """``$XDG_CONFIG_HOME/evalsi/credentials`` when the variable names an absolute directory (the XDG rule),
    else ``~/.config/evalsi/credentials``."""
    base = env.get("XDG_CONFIG_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else home / ".config"
    return root / CACHE_NAME


def server_key(server: str) -> str:
    """One spelling per server: scheme and host lower-case, no trailing slash or path."""
    parsed = urllib.parse.urlsplit(server.strip())
    return f"{parsed.scheme.lower()}://{parsed.netloc.lower()}"


class CredentialCache:
    """The cache file at ``path``: read, update and remove logins, each under an exclusive lock so two commands
    refreshing at once do not spend one refresh token twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._held = False

    def get(self, server: str) -> CachedLogin | None:
        entry = self._read().get(server_key(server))
        return _login(entry, self.path, server) if entry is not None else None

    def servers(self) -> list[str]:
        return sorted(self._read())

    def put(self, server: str, login: CachedLogin) -> None:
        with self.locked():
            servers = self._read()
            servers[server_key(server)] = {**asdict(login), "scopes": list(login.scopes)}
            self._write(servers)

    def remove(self, server: str | None) -> list[str]:
        """Forget ``server``'s login (every login when None); returns the servers forgotten."""
        with self.locked():
            servers = self._read()
            gone = sorted(servers) if server is None else [k for k in [server_key(server)] if k in servers]
            for key in gone:
                del servers[key]
            if gone:
                self._write(servers)
            return gone

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock beside the file (``credentials.lock``), held across a read-refresh-write; taken again
        inside (``put`` during a refresh) it is already held (a second flock on a new descriptor would wait on
        this process's own lock)."""
        if self._held:
            yield
            return
        _private_directory(self.path.parent)
        descriptor = os.open(self.path.with_name(self.path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            self._held = True
            yield
        finally:
            self._held = False
            os.close(descriptor)  # closing releases the lock

    def _read(self) -> dict[str, Any]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise BadInputError(
                f"{self.path}: group or others can read it (mode {stat.S_IMODE(info.st_mode):04o}) and it holds "
                f"tokens, so it is not used; fix it with `chmod 600 {self.path}` (or remove it and log in again)")
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise BadInputError(f"{self.path}: not a credential cache ({exc}); remove it and run `evalsi login` "
                                "again") from None
        servers = document.get("servers") if isinstance(document, dict) else None
        if not isinstance(servers, dict):
            raise BadInputError(f"{self.path}: no 'servers' mapping; remove it and run `evalsi login` again")
        return servers

    def _write(self, servers: Mapping[str, Any]) -> None:
        _private_directory(self.path.parent)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        # Created 0600 from the start (not chmod-ed after), so no other user can open it in between.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                json.dump({"version": VERSION, "servers": servers}, file, indent=2, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temporary, 0o600)  # an O_CREAT on an existing file keeps its old mode
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def _private_directory(path: Path) -> None:
    """The cache's directory, created 0700 when missing (an existing one keeps its mode: it is the user's)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def _login(entry: Any, path: Path, server: str) -> CachedLogin:
    if not isinstance(entry, dict):
        raise BadInputError(f"{path}: servers[{server_key(server)!r}] is not a login; run `evalsi login --server "
                            f"{server}` again")
    try:
        return CachedLogin(
            issuer=str(entry["issuer"]), client_id=str(entry["client_id"]),
            token_endpoint=str(entry["token_endpoint"]), access_token=str(entry["access_token"]),
            refresh_token=str(entry.get("refresh_token") or ""), expires_at=float(entry.get("expires_at") or 0),
            scopes=tuple(str(s) for s in entry.get("scopes") or ()),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BadInputError(f"{path}: the login for {server_key(server)} lacks {exc}; run `evalsi login --server "
                            f"{server}` again") from None
