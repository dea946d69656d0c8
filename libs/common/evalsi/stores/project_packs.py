"""Packs per project set through the API (CatalogService.SetProjectPacks, SetPackAllowlist; docs/packs.md): the
enabled packs and the allowlist of a project, each None when the API has not set it (evalsi.yaml decides).

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``), like ``SqlPolicyAlerts``. Each setter writes its own
column, so an admin enabling packs and the owner changing the allowlist at once never undo each other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .metadata import project_or_default
from .sql_engines import Database


@dataclass(frozen=True)
class StoredPacks:
    """One project's stored lists (None: not set here); ``updated_at`` in Unix seconds."""

    project: str
    packs: tuple[str, ...] | None
    allowed_packs: tuple[str, ...] | None
    updated_at: float
    updated_by: str


class ProjectPacksStore(Protocol):
    async def set_enabled_packs(self, project: str, packs: Sequence[str] | None, *, at: float,
                                by: str) -> StoredPacks: ...

    async def set_allowed_packs(self, project: str, packs: Sequence[str] | None, *, at: float,
                                by: str) -> StoredPacks: ...

    async def list_project_packs(self) -> list[StoredPacks]:
        """Every project with a stored list, by name."""
        ...


class SqlProjectPacks:
    """Stored pack lists over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    async def set_enabled_packs(self, project: str, packs: Sequence[str] | None, *, at: float,
                                by: str) -> StoredPacks:
        return await self._set("packs", project, packs, at, by)

    async def set_allowed_packs(self, project: str, packs: Sequence[str] | None, *, at: float,
                                by: str) -> StoredPacks:
        return await self._set("allowed_packs", project, packs, at, by)

    async def list_project_packs(self) -> list[StoredPacks]:
        rows = await self._db.fetch(f"{_SELECT} WHERE tenant_id = '' ORDER BY project_id")
        return [_stored(row) for row in rows]

    async def _set(self, column: str, project: str, packs: Sequence[str] | None, at: float, by: str) -> StoredPacks:
        project = project_or_default(project)
        value = None if packs is None else json.dumps(list(packs))
        # column is one of two names fixed above, never the caller's.
        rows = await self._db.fetch(
            f"INSERT INTO project_packs (project_id, tenant_id, {column}, updated_at, updated_by) "
            f"VALUES (?, '', ?, ?, ?) ON CONFLICT (project_id) DO UPDATE SET {column} = excluded.{column}, "
            f"updated_at = excluded.updated_at, updated_by = excluded.updated_by "
            f"RETURNING project_id, packs, allowed_packs, updated_at, updated_by",
            project, value, at, by,
        )
        return _stored(rows[0])


_SELECT = "SELECT project_id, packs, allowed_packs, updated_at, updated_by FROM project_packs"


def _stored(row: Sequence[Any]) -> StoredPacks:
    def names(value: str | None) -> tuple[str, ...] | None:
        return None if value is None else tuple(json.loads(value))

    return StoredPacks(project=row[0], packs=names(row[1]), allowed_packs=names(row[2]),
                       updated_at=float(row[3]), updated_by=row[4])
