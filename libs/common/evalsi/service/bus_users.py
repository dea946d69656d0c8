"""The users of the nats-server ``evalsi serve`` bundles: one per service, the operator's, nobody else.

Passwords are random and made at every start. nats-server reads them from its own 0600 configuration file
(``NatsServer(authorization=...)``); each service from a 0600 file in a 0700 directory, whose path alone is in its
environment (``EVALSI_NATS_CREDENTIALS``, ``--nats-credentials``). Neither is ever on a command line or in a log.
What each user may publish and subscribe to is ``evalsi.bus.permissions``'s.

Docker compose has no supervisor to hand passwords to its children: ``evalsi bus credentials`` (an init container)
writes the same users into a volume, one directory per service (``file_name``: a volume's subpath is a directory,
so each container mounts its own and sees no other's), and keeps the passwords already there across restarts
(``kept``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evalsi.bus.credentials import NatsCredentials, new_password, read_credentials, write_credentials
from evalsi.bus.permissions import ADMIN, all_identities, authorization
from evalsi.errors import BadInputError
from evalsi.service.settings import NATS_CREDENTIALS

__all__ = ["BundledBusUsers"]


class _BusChild(Protocol):
    bus_identity: str
    env: dict[str, str]


@dataclass
class BundledBusUsers:
    """The users of one start of the bundled nats-server and where their credentials files go."""

    directory: Path
    passwords: dict[str, str] = field(repr=False)
    # Empty: each user's file is <directory>/<identity> (`evalsi serve`); else <directory>/<identity>/<file_name>.
    file_name: str = ""

    @classmethod
    def fresh(cls, pools: Sequence[str], directory: Path, file_name: str = "") -> BundledBusUsers:
        """New passwords for every service whose workers serve ``pools``, and the operator."""
        return cls(directory, {identity: new_password() for identity in all_identities(pools)}, file_name)

    @classmethod
    def kept(cls, pools: Sequence[str], directory: Path, file_name: str = "") -> tuple[BundledBusUsers, list[str]]:
        """The users of ``pools`` with the passwords their files under ``directory`` already hold, so a service
        started earlier still connects; a new password for each user whose file is missing, garbled (a write cut
        short) or names another user, and a BadInputError for a file that is there but cannot be opened. Also the
        identities that got a new one."""
        fresh = cls.fresh(pools, directory, file_name)
        made: list[str] = []
        for identity in fresh.passwords:
            path = fresh.path(identity)
            try:
                path.open("rb").close()
            except FileNotFoundError:
                made.append(identity)
                continue
            except OSError as exc:
                # Never a new password for a file we merely cannot read: the service reading it would be locked out.
                raise BadInputError(f"{path}: cannot read it ({exc.strerror or exc}); run as its owner or as root "
                                    "(or replace every password on purpose)") from None
            try:
                held = read_credentials(path, identity)
            except BadInputError:
                made.append(identity)
                continue
            if held.user == identity and held.password:
                fresh.passwords[identity] = held.password
            else:
                made.append(identity)
        return fresh, made

    def path(self, identity: str) -> Path:
        """Where ``identity``'s ``user:password`` file is."""
        return self.directory / identity / self.file_name if self.file_name else self.directory / identity

    def write(self) -> dict[str, Path]:
        """Write every user's file (0600, its directory 0700); identity -> its file."""
        return {identity: write_credentials(self.path(identity), identity, password)
                for identity, password in self.passwords.items()}

    def authorization(self) -> dict[str, Any]:
        """The nats-server ``authorization`` block admitting these users with their permissions."""
        return authorization(self.passwords)

    def hand_out(self, children: Iterable[_BusChild]) -> None:
        """Write each user's ``user:password`` file and name it in the environment of the children that connect
        as it; a child of no known identity gets none (and nats-server refuses it)."""
        files = self.write()
        for child in children:
            if child.bus_identity in files:
                child.env[NATS_CREDENTIALS.variable("")] = str(files[child.bus_identity].resolve())

    def credentials(self, identity: str = ADMIN) -> NatsCredentials:
        """The credentials of ``identity`` while the server runs (by default the operator's, which may do
        anything: for inspecting the bus with the nats CLI, and for tests)."""
        return read_credentials(self.path(identity), f"the bundled nats-server's {identity} user")

    def remove(self) -> None:
        """Delete the files: their passwords open nothing once the server has stopped."""
        shutil.rmtree(self.directory, ignore_errors=True)
