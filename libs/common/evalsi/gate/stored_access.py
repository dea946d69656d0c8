"""The authorizer the gate asks (in the api and in ingest): evalsi.yaml's roles and bindings plus those stored
through AuthService.

``LiveAuthorizer.decide`` is synchronous and reads no database: it delegates to an ``Authorizer`` built from
the config and the stored rows (``Authorizer.with_stored``). AuthService calls ``reload`` after every change it
makes, so a change takes effect on the next request here; other replicas pick it up within ``refresh_s``.
A stored row that no longer checks out against the config (its inherited role was removed from evalsi.yaml) is
left out with an error in the log rather than taking the whole authorizer down.
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog

from evalsi.authz.authorizer import Authorizer
from evalsi.authz.bindings import BindingDefinition
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.authz.roles import RoleDefinition
from evalsi.errors import BadInputError
from evalsi.stores.identity import IdentityStore, StoredBinding, StoredRole

log = structlog.get_logger("evalsi.auth")


def role_definition(role: StoredRole) -> RoleDefinition:
    return RoleDefinition(name=role.name, permissions=role.permissions, inherits=role.inherits,
                          condition=role.condition, project=role.project, description=role.description,
                          origin=_origin("role", role.name, role.project))


def binding_definition(binding: StoredBinding) -> BindingDefinition:
    return BindingDefinition(project=binding.project, role=binding.role, subject=binding.subject,
                             origin=f"stored binding {binding.id}", id=binding.id)


def _origin(kind: str, name: str, project: str) -> str:
    return f"stored {kind} {name!r}" + (f" of project {project!r}" if project else " (install-wide)")


def with_stored(base: Authorizer, roles: list[StoredRole], bindings: list[StoredBinding]) -> Authorizer:
    """``base`` plus every stored role and binding that still checks out; the others are logged and skipped."""
    kept_roles = [role_definition(r) for r in roles]
    kept_bindings = [binding_definition(b) for b in bindings]
    try:
        return base.with_stored(kept_roles, kept_bindings)
    except BadInputError:
        pass  # one row is at fault: find it, one at a time (rare, and the rows are few)
    good_roles: list[RoleDefinition] = []
    for definition in kept_roles:
        try:
            base.with_stored([*good_roles, definition])
        except BadInputError as exc:
            log.error("stored role skipped", role=definition.name, project=definition.project, error=str(exc))
            continue
        good_roles.append(definition)
    good_bindings: list[BindingDefinition] = []
    for binding in kept_bindings:
        try:
            base.with_stored(good_roles, [*good_bindings, binding])
        except BadInputError as exc:
            log.error("stored binding skipped", binding=binding.id, error=str(exc))
            continue
        good_bindings.append(binding)
    return base.with_stored(good_roles, good_bindings)


class LiveAuthorizer:
    """Decides with the current config-plus-database authorizer; ``start`` refreshes it every ``refresh_s``."""

    def __init__(self, base: Authorizer, store: IdentityStore, *, refresh_s: float = 5.0) -> None:
        self.base = base
        self.current = base
        self._store = store
        self._refresh_s = refresh_s
        self._task: asyncio.Task[None] | None = None

    def decide(self, request: AccessRequest) -> Decision:
        return self.current.decide(request)

    async def reload(self) -> Authorizer:
        roles = await self._store.list_roles(None)
        bindings = await self._store.list_bindings(None)
        self.current = with_stored(self.base, roles, bindings)
        return self.current

    async def start(self) -> None:
        await self.reload()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh(), name="authorizer-refresh")

    async def close(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            try:
                await self.reload()
            except Exception as exc:  # the store is down: keep deciding with what was loaded last
                log.warning("could not reload stored roles and bindings", error=str(exc))
