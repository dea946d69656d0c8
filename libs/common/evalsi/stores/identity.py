"""Identity in the metadata store: projects, API keys, custom roles and role bindings (docs/auth.md).

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``), like ``SqlDocuments``. API keys are kept as their
``sha256:`` hash and a short prefix only; the plaintext never reaches the store. Lists and maps are JSON text.
Every time is unix seconds.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from evalsi.errors import EvalsiError

from .sql_engines import Database

# The project of an install-wide role.
INSTALL_WIDE = ""


class AlreadyExistsError(EvalsiError):
    """A project, key, role or binding with this name (or subject) exists already."""


@dataclass(frozen=True)
class StoredProject:
    name: str
    description: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    created_at: float = 0.0
    created_by: str = ""


@dataclass(frozen=True)
class StoredApiKey:
    """A database API key. ``prefix`` is the key's first characters, to tell keys apart in lists; ``roles`` are
    the roles it grants in ``project``. ``revoked_at``, ``expires_at`` and ``last_used_at`` are None when unset."""

    project: str
    name: str
    key_hash: str
    prefix: str
    roles: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    expires_at: float | None = None
    created_at: float = 0.0
    created_by: str = ""
    revoked_at: float | None = None
    last_used_at: float | None = None


@dataclass(frozen=True)
class StoredRole:
    """A custom role created through AuthService; ``project`` is ``INSTALL_WIDE`` ("") for an install-wide one."""

    project: str
    name: str
    permissions: tuple[str, ...]
    inherits: tuple[str, ...] = ()
    condition: str = ""
    description: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    created_by: str = ""

    def definition(self) -> dict[str, Any]:
        """What the role grants, as the audit log records it before and after a change."""
        return {"name": self.name, "project": self.project, "permissions": list(self.permissions),
                "inherits": list(self.inherits), "condition": self.condition, "description": self.description}


@dataclass(frozen=True)
class StoredBinding:
    """``role`` granted to ``subject`` (``user:``, ``email:``, ``group:``, ``key:`` or ``cel:``) in ``project``
    (``*``: every project)."""

    id: str
    project: str
    role: str
    subject: str
    created_at: float = 0.0
    created_by: str = ""

    def definition(self) -> dict[str, Any]:
        return {"id": self.id, "project": self.project, "role": self.role, "subject": self.subject}


def new_binding_id() -> str:
    return "b_" + secrets.token_hex(8)


class IdentityStore(Protocol):
    """Projects, API keys, custom roles and bindings. Creating what exists raises ``AlreadyExistsError``."""

    async def create_project(self, project: StoredProject) -> StoredProject: ...

    async def list_projects(self) -> list[StoredProject]: ...

    async def create_api_key(self, key: StoredApiKey) -> StoredApiKey: ...

    async def get_api_key(self, project: str, name: str) -> StoredApiKey | None: ...

    async def list_api_keys(self, project: str, *, include_revoked: bool = False) -> list[StoredApiKey]: ...

    async def find_api_key(self, key_hash: str) -> StoredApiKey | None:
        """The key with this hash unless revoked (expiry is the verifier's to judge, with its clock)."""
        ...

    async def revoke_api_key(self, project: str, name: str, at: float) -> StoredApiKey | None:
        """Revoke once: a key already revoked keeps its first time. None when there is no such key."""
        ...

    async def record_key_use(self, uses: Mapping[str, float]) -> None:
        """Last use per key hash (only ever moved forward)."""
        ...

    async def create_role(self, role: StoredRole) -> StoredRole: ...

    async def get_role(self, project: str, name: str) -> StoredRole | None: ...

    async def list_roles(self, project: str | None) -> list[StoredRole]:
        """The project's roles and the install-wide ones; every role when ``project`` is None."""
        ...

    async def update_role(self, role: StoredRole) -> tuple[StoredRole, StoredRole] | None:
        """Replace the definition; (old, new), or None when there is no such role."""
        ...

    async def delete_role(self, project: str, name: str) -> StoredRole | None: ...

    async def create_binding(self, binding: StoredBinding) -> StoredBinding: ...

    async def list_bindings(self, project: str | None, *, role: str = "") -> list[StoredBinding]:
        """The project's bindings and the every-project (``*``) ones; all bindings when ``project`` is None."""
        ...

    async def delete_binding(self, project: str, binding_id: str) -> StoredBinding | None: ...


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


_PROJECT_SELECT = "SELECT project_id, description, labels, created_at, created_by FROM projects"
_KEY_SELECT = (
    "SELECT project_id, name, key_hash, prefix, roles, labels, expires_at, created_at, created_by, revoked_at, "
    "last_used_at FROM api_keys"
)
_ROLE_SELECT = (
    "SELECT project_id, name, permissions, inherits, condition, description, created_at, updated_at, created_by "
    "FROM roles"
)
_BINDING_SELECT = "SELECT binding_id, project_id, role, subject, created_at, created_by FROM role_bindings"


def _project(row: Sequence[Any]) -> StoredProject:
    return StoredProject(row[0], row[1], json.loads(row[2]), float(row[3]), row[4])


def _key(row: Sequence[Any]) -> StoredApiKey:
    return StoredApiKey(
        project=row[0], name=row[1], key_hash=row[2], prefix=row[3], roles=tuple(json.loads(row[4])),
        labels=json.loads(row[5]), expires_at=_optional(row[6]), created_at=float(row[7]), created_by=row[8],
        revoked_at=_optional(row[9]), last_used_at=_optional(row[10]),
    )


def _role(row: Sequence[Any]) -> StoredRole:
    return StoredRole(
        project=row[0], name=row[1], permissions=tuple(json.loads(row[2])), inherits=tuple(json.loads(row[3])),
        condition=row[4], description=row[5], created_at=float(row[6]), updated_at=float(row[7]), created_by=row[8],
    )


def _binding(row: Sequence[Any]) -> StoredBinding:
    return StoredBinding(row[0], row[1], row[2], row[3], float(row[4]), row[5])


class SqlIdentity:
    """The IdentityStore over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    async def _insert(self, sql: str, args: Sequence[Any], conflict: str) -> None:
        """Insert one row; ``AlreadyExistsError(conflict)`` when its key is taken (ON CONFLICT DO NOTHING, so the
        refusal is the same on both databases and needs no driver-specific exception)."""
        inserted = await self._db.execute(sql + " ON CONFLICT DO NOTHING", *args)
        if inserted == 0:
            raise AlreadyExistsError(conflict)

    # --- projects ---

    async def create_project(self, project: StoredProject) -> StoredProject:
        await self._insert(
            "INSERT INTO projects (project_id, description, labels, created_at, created_by) VALUES (?, ?, ?, ?, ?)",
            (project.name, project.description, _json(dict(project.labels)), project.created_at, project.created_by),
            f"project {project.name!r} already exists",
        )
        return project

    async def list_projects(self) -> list[StoredProject]:
        return [_project(r) for r in await self._db.fetch(_PROJECT_SELECT + " ORDER BY project_id")]

    # --- API keys ---

    async def create_api_key(self, key: StoredApiKey) -> StoredApiKey:
        await self._insert(
            "INSERT INTO api_keys (project_id, tenant_id, name, key_hash, prefix, roles, labels, expires_at, "
            "created_at, created_by) VALUES (?, '', ?, ?, ?, ?, ?, ?, ?, ?)",
            (key.project, key.name, key.key_hash, key.prefix, _json(list(key.roles)), _json(dict(key.labels)),
             key.expires_at, key.created_at, key.created_by),
            f"API key {key.name!r} already exists in project {key.project!r} (names stay taken after a revoke)",
        )
        return key

    async def get_api_key(self, project: str, name: str) -> StoredApiKey | None:
        rows = await self._db.fetch(f"{_KEY_SELECT} WHERE project_id = ? AND tenant_id = '' AND name = ?",
                                    project, name)
        return _key(rows[0]) if rows else None

    async def list_api_keys(self, project: str, *, include_revoked: bool = False) -> list[StoredApiKey]:
        live = "" if include_revoked else " AND revoked_at IS NULL"
        rows = await self._db.fetch(f"{_KEY_SELECT} WHERE project_id = ? AND tenant_id = ''{live} ORDER BY name",
                                    project)
        return [_key(r) for r in rows]

    async def find_api_key(self, key_hash: str) -> StoredApiKey | None:
        rows = await self._db.fetch(f"{_KEY_SELECT} WHERE key_hash = ? AND revoked_at IS NULL", key_hash)
        return _key(rows[0]) if rows else None

    async def revoke_api_key(self, project: str, name: str, at: float) -> StoredApiKey | None:
        await self._db.execute(
            "UPDATE api_keys SET revoked_at = ? WHERE project_id = ? AND tenant_id = '' AND name = ? "
            "AND revoked_at IS NULL", at, project, name,
        )
        return await self.get_api_key(project, name)

    async def record_key_use(self, uses: Mapping[str, float]) -> None:
        async with self._db.transaction() as c:
            for key_hash, at in sorted(uses.items()):
                await c.execute(
                    "UPDATE api_keys SET last_used_at = ? WHERE key_hash = ? "
                    "AND (last_used_at IS NULL OR last_used_at < ?)", at, key_hash, at,
                )

    # --- roles ---

    async def create_role(self, role: StoredRole) -> StoredRole:
        where = f"project {role.project!r}" if role.project else "the install"
        await self._insert(
            "INSERT INTO roles (project_id, name, permissions, inherits, condition, description, created_at, "
            "updated_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (role.project, role.name, _json(list(role.permissions)), _json(list(role.inherits)), role.condition,
             role.description, role.created_at, role.updated_at, role.created_by),
            f"role {role.name!r} already exists in {where}",
        )
        return role

    async def get_role(self, project: str, name: str) -> StoredRole | None:
        rows = await self._db.fetch(f"{_ROLE_SELECT} WHERE project_id = ? AND name = ?", project, name)
        return _role(rows[0]) if rows else None

    async def list_roles(self, project: str | None) -> list[StoredRole]:
        if project is None:
            rows = await self._db.fetch(_ROLE_SELECT + " ORDER BY project_id, name")
        else:
            rows = await self._db.fetch(f"{_ROLE_SELECT} WHERE project_id IN (?, ?) ORDER BY project_id, name",
                                        INSTALL_WIDE, project)
        return [_role(r) for r in rows]

    async def update_role(self, role: StoredRole) -> tuple[StoredRole, StoredRole] | None:
        async with self._db.transaction() as c:
            rows = await c.fetch(f"{_ROLE_SELECT} WHERE project_id = ? AND name = ?", role.project, role.name)
            if not rows:
                return None
            old = _role(rows[0])
            new = replace(role, created_at=old.created_at, created_by=old.created_by)
            await c.execute(
                "UPDATE roles SET permissions = ?, inherits = ?, condition = ?, description = ?, updated_at = ? "
                "WHERE project_id = ? AND name = ?",
                _json(list(new.permissions)), _json(list(new.inherits)), new.condition, new.description,
                new.updated_at, new.project, new.name,
            )
        return old, new

    async def delete_role(self, project: str, name: str) -> StoredRole | None:
        async with self._db.transaction() as c:
            rows = await c.fetch(f"{_ROLE_SELECT} WHERE project_id = ? AND name = ?", project, name)
            if not rows:
                return None
            await c.execute("DELETE FROM roles WHERE project_id = ? AND name = ?", project, name)
        return _role(rows[0])

    # --- bindings ---

    async def create_binding(self, binding: StoredBinding) -> StoredBinding:
        await self._insert(
            "INSERT INTO role_bindings (binding_id, project_id, role, subject, created_at, created_by) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (binding.id, binding.project, binding.role, binding.subject, binding.created_at, binding.created_by),
            f"{binding.subject} already holds role {binding.role!r} in project {binding.project!r}",
        )
        return binding

    async def list_bindings(self, project: str | None, *, role: str = "") -> list[StoredBinding]:
        where: list[str] = []
        args: list[Any] = []
        if project is not None:
            where.append("project_id IN (?, '*')")
            args.append(project)
        if role:
            where.append("role = ?")
            args.append(role)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._db.fetch(f"{_BINDING_SELECT}{clause} ORDER BY project_id, role, subject", *args)
        return [_binding(r) for r in rows]

    async def delete_binding(self, project: str, binding_id: str) -> StoredBinding | None:
        async with self._db.transaction() as c:
            rows = await c.fetch(f"{_BINDING_SELECT} WHERE binding_id = ? AND project_id = ?", binding_id, project)
            if not rows:
                return None
            await c.execute("DELETE FROM role_bindings WHERE binding_id = ?", binding_id)
        return _binding(rows[0])
