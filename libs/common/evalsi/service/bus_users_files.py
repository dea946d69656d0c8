"""The bus users of a nats-server that ``evalsi serve`` does not run (docker compose's), written into a directory
that the server and each service mount: ``evalsi bus credentials``.

Layout of the directory (one subdirectory per reader, because a compose volume's ``subpath`` is a directory, so
each container mounts its own and sees no other's)::

    nats-server/authorization.conf   the ``authorization`` block: every user, its password and permissions
    <identity>/nats.credentials       one ``user:password`` line per service (api, scheduler, worker-cpu, ...)

Files are 0600 and directories 0700; the services' are handed to ``owner`` (the services' user) when one is given,
nats-server's and the operator's stay the writer's. Passwords already
in the directory are kept, so a restarted init container does not lock out the services that still hold the old
ones; ``rotate`` makes new ones for every user.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evalsi.bus.permissions import ADMIN
from evalsi.errors import BadInputError
from evalsi.service.bus_users import BundledBusUsers

__all__ = ["AUTHORIZATION_FILE", "CREDENTIALS_FILE", "SERVER_DIRECTORY", "Owner", "WrittenUsers", "write_bus_users"]

SERVER_DIRECTORY = "nats-server"
AUTHORIZATION_FILE = "authorization.conf"
CREDENTIALS_FILE = "nats.credentials"


@dataclass(frozen=True)
class Owner:
    """Who the written files belong to: a uid, and a gid (-1 leaves the group as it is)."""

    uid: int
    gid: int = -1

    @classmethod
    def parse(cls, text: str, where: str = "--owner") -> Owner:
        """``USER[:GROUP]``, each a name known to this system or a number."""
        user, _, group = text.partition(":")
        if not user:
            raise BadInputError(f"{where} {text!r}: expected USER[:GROUP], names or numeric ids")
        if user.isdigit():
            uid, gid = int(user), -1
        else:
            try:
                entry = pwd.getpwnam(user)
            except KeyError:
                raise BadInputError(
                    f"{where}: no user {user!r} on this system; give a known name or a number"
                ) from None
            uid, gid = entry.pw_uid, entry.pw_gid  # a named user's files go to its own group too
        if group:
            if group.isdigit():
                gid = int(group)
            else:
                try:
                    gid = grp.getgrnam(group).gr_gid
                except KeyError:
                    raise BadInputError(
                        f"{where}: no group {group!r} on this system; give a known name or a number"
                    ) from None
        return cls(uid, gid)


@dataclass(frozen=True)
class WrittenUsers:
    """What ``write_bus_users`` did: each identity and whether it kept its password, and the server's file."""

    kept: tuple[str, ...]
    made: tuple[str, ...]
    removed: tuple[str, ...]
    authorization: Path
    files: dict[str, Path]


def write_bus_users(out: Path, pools: Sequence[str], *, rotate: bool = False, owner: Owner | None = None
                    ) -> WrittenUsers:
    """Write (or complete) the users of a deployment whose workers serve ``pools`` under ``out``."""
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {out}: not a directory")
    if not out.exists():
        out.mkdir(mode=0o700, parents=True)
    if rotate:
        users = BundledBusUsers.fresh(pools, out, CREDENTIALS_FILE)
        made = list(users.passwords)
    else:
        users, made = BundledBusUsers.kept(pools, out, CREDENTIALS_FILE)
    # The services' files first, the server's last: an authorization file on disk always has its users' files.
    files = users.write()
    for file in files.values():  # a kept file keeps its mode through the rewrite: put it right
        os.chmod(file, 0o600)
    server = out / SERVER_DIRECTORY
    server.mkdir(mode=0o700, exist_ok=True)
    os.chmod(server, 0o700)
    authorization = server / AUTHORIZATION_FILE
    _replace(authorization, authorization_text(users))
    removed = _remove_retired(out, set(users.passwords))
    if owner is not None:
        # The services' files only: nats-server's (every password) and the operator's stay the writer's.
        for identity, file in files.items():
            if identity != ADMIN:
                _chown(file.parent, owner)
                _chown(file, owner)
    kept = tuple(identity for identity in users.passwords if identity not in made)
    return WrittenUsers(kept, tuple(made), removed, authorization, files)


def authorization_text(users: BundledBusUsers) -> str:
    """The ``authorization`` block as nats-server configuration: a whole configuration for ``nats-server -c``, and a
    fragment an operator's own configuration can ``include`` (the value is JSON, which nats-server also reads)."""
    return (
        "# Written by `evalsi bus credentials`: every Evals.si service's NATS user and what it may publish and\n"
        "# subscribe to (evalsi.bus.permissions). Passwords are secrets: keep this file 0600.\n"
        f"authorization: {json.dumps(users.authorization(), indent=2)}\n"
    )


def _replace(path: Path, text: str) -> None:
    """Write ``path`` (0600) by renaming a finished file over it, so a reader never sees half of it."""
    partial = path.with_name(path.name + ".partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, path)


def _remove_retired(out: Path, wanted: set[str]) -> tuple[str, ...]:
    """Remove the directories of workers whose pool is no longer served (their passwords open nothing now); only
    a directory that holds our one file and nothing else, so nothing of anyone else's is touched."""
    removed = []
    for entry in sorted(out.iterdir()):
        if entry.name in wanted or not entry.name.startswith("worker-"):
            continue
        if entry.is_dir() and not entry.is_symlink() and [p.name for p in entry.iterdir()] == [CREDENTIALS_FILE]:
            shutil.rmtree(entry)
            removed.append(entry.name)
    return tuple(removed)


def _chown(path: Path, owner: Owner) -> None:
    try:
        os.chown(path, owner.uid, owner.gid, follow_symlinks=False)
    except PermissionError:
        raise BadInputError(
            f"--owner: cannot give {path} to uid {owner.uid} (gid {owner.gid}): only root may; run the command as "
            "root (compose: the init service's `user: root`) or leave --owner out"
        ) from None
