"""The users of the nats-server ``evalsi serve`` bundles: one per service, the operator's, nobody else.

Passwords are random and made at every start. nats-server reads them from its own 0600 configuration file
(``NatsServer(authorization=...)``); each service from a 0600 file in a 0700 directory, whose path alone is in its
environment (``EVALSI_NATS_CREDENTIALS``, ``--nats-credentials``). Neither is ever on a command line or in a log.
What each user may publish and subscribe to is ``evalsi.bus.permissions``'s.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evalsi.bus.credentials import NatsCredentials, new_password, read_credentials, write_credentials
from evalsi.bus.permissions import ADMIN, all_identities, authorization
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

    @classmethod
    def fresh(cls, pools: Sequence[str], directory: Path) -> BundledBusUsers:
        """New passwords for every service whose workers serve ``pools``, and the operator."""
        return cls(directory, {identity: new_password() for identity in all_identities(pools)})

    def authorization(self) -> dict[str, Any]:
        """The nats-server ``authorization`` block admitting these users with their permissions."""
        return authorization(self.passwords)

    def hand_out(self, children: Iterable[_BusChild]) -> None:
        """Write each user's ``user:password`` file and name it in the environment of the children that connect
        as it; a child of no known identity gets none (and nats-server refuses it)."""
        files = {identity: write_credentials(self.directory / identity, identity, password)
                 for identity, password in self.passwords.items()}
        for child in children:
            if child.bus_identity in files:
                child.env[NATS_CREDENTIALS.variable("")] = str(files[child.bus_identity].resolve())

    def credentials(self, identity: str = ADMIN) -> NatsCredentials:
        """The credentials of ``identity`` while the server runs (by default the operator's, which may do
        anything: for inspecting the bus with the nats CLI, and for tests)."""
        return read_credentials(self.directory / identity, f"the bundled nats-server's {identity} user")

    def remove(self) -> None:
        """Delete the files: their passwords open nothing once the server has stopped."""
        shutil.rmtree(self.directory, ignore_errors=True)
