"""A service's NATS credentials, by reference: a file it is told the path of, never a password in a URL or on a
command line.

Two forms are read:
- a ``user:password`` file (one line), what ``evalsi serve`` writes for each service of its bundled nats-server;
- a NATS ``.creds`` file (a user JWT and its nkey seed, from ``nsc``), handed to nats-py as it is.

Files are written 0600 in a 0700 directory; the password is random (``new_password``).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalsi.bus.subjects import check_token
from evalsi.errors import BadInputError

__all__ = ["NatsCredentials", "inbox_prefix", "new_password", "read_credentials", "write_credentials"]

_JWT_MARKER = "-----BEGIN NATS USER JWT-----"
_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class NatsCredentials:
    """What ``nats.connect`` needs to authenticate: a user and password, or the path of a ``.creds`` file."""

    user: str = ""
    password: str = field(default="", repr=False)
    creds_file: str = ""

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments for ``nats.aio.client.Client.connect``."""
        if self.creds_file:
            return {"user_credentials": self.creds_file}
        return {"user": self.user, "password": self.password}


def inbox_prefix(user: str) -> str:
    """Where a user's replies arrive: ``_INBOX.<user>``, the one inbox its permissions let it read
    (``evalsi.bus.permissions``); the bare ``_INBOX`` for a name that is not one subject token (a user of an
    external NATS whose operator named it so, and granted ``_INBOX.>``)."""
    try:
        return f"_INBOX.{check_token(user, 'NATS user')}"
    except ValueError:
        return "_INBOX"


def new_password() -> str:
    """A random password: 256 bits, URL-safe (no ``:``, so a ``user:password`` line splits at the first colon)."""
    return secrets.token_urlsafe(32)


def read_credentials(path: str | os.PathLike[str], where: str = "--nats-credentials") -> NatsCredentials:
    """The credentials in the file at ``path``; a BadInputError naming ``where`` (the flag, variable or evalsi.yaml
    key that named the file) when it is unreadable or of neither form. The secret itself is never in the error."""
    file = Path(path)
    try:
        if file.stat().st_size > _MAX_BYTES:
            raise BadInputError(f"{where}: {file} is over {_MAX_BYTES} bytes; expected a user:password line or a "
                                "NATS .creds file")
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInputError(f"{where}: cannot read {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise BadInputError(
            f"{where}: {file} is not text; expected a user:password line or a NATS .creds file"
        ) from None
    if _JWT_MARKER in text:
        return NatsCredentials(creds_file=str(file.resolve()))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    user, colon, password = lines[0].partition(":") if len(lines) == 1 else ("", "", "")
    if not (user and colon and password):
        raise BadInputError(f"{where}: {file} holds neither one user:password line nor a NATS .creds file")
    return NatsCredentials(user=user, password=password)


def write_credentials(path: Path, user: str, password: str) -> Path:
    """Write ``user:password`` to ``path`` (0600, its directory 0700); the path."""
    if ":" in user or "\n" in user or "\n" in password:
        raise ValueError(f"NATS user {user!r}: a user name has no ':' and neither part a line break")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(f"{user}:{password}\n")
    return path
