"""The audit log in the metadata store: appended in batches, read newest first with filters, purged by age.

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``). Entries are never updated; the only delete is the
retention purge (``evalsi.audit.retention``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from evalsi.audit.entry import AuditEntry

from .metadata import check_page_size, decode_page_token, encode_page_token, query_fingerprint
from .sql_engines import Column, Database

MAX_AUDIT_PAGE = 1000


@dataclass(frozen=True)
class AuditQuery:
    """Filters of ``list_audit``; empty ones match everything. ``start``/``end`` are unix seconds, end excluded."""

    project: str = ""
    principal: str = ""
    action: str = ""
    decision: str = ""
    start: float | None = None
    end: float | None = None


class AuditStore(Protocol):
    async def append_audit(self, entries: Sequence[AuditEntry]) -> None: ...

    async def list_audit(
        self, query: AuditQuery, *, page_size: int = 100, page_token: str = ""
    ) -> tuple[list[AuditEntry], str]:
        """Newest first (by id); the token of the next page, empty on the last."""
        ...

    async def purge_audit(self, before: float) -> int:
        """Delete the entries older than ``before``; how many."""
        ...


_COLUMNS: tuple[Column, ...] = (
    ("event_time", "float"), ("principal", "text"), ("principal_kind", "text"), ("action", "text"),
    ("project_id", "text"), ("resource", "text"), ("decision", "text"), ("deciding", "text"), ("request_id", "text"),
    ("source", "text"), ("method", "text"), ("old_value", "text"), ("new_value", "text"),
)
_SELECT = "SELECT id, " + ", ".join(name for name, _ in _COLUMNS) + " FROM audit_events"


def _definition(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _row(entry: AuditEntry) -> tuple[Any, ...]:
    return (entry.time, entry.principal, entry.principal_kind, entry.action, entry.project, entry.resource,
            entry.decision, entry.deciding, entry.request_id, entry.source, entry.method,
            _definition(entry.old_value), _definition(entry.new_value))


def _entry(row: Sequence[Any]) -> AuditEntry:
    return AuditEntry(
        id=int(row[0]), time=float(row[1]), principal=row[2], principal_kind=row[3], action=row[4], project=row[5],
        resource=row[6], decision=row[7], deciding=row[8], request_id=row[9], source=row[10], method=row[11],
        old_value=None if row[12] is None else json.loads(row[12]),
        new_value=None if row[13] is None else json.loads(row[13]),
    )


class SqlAudit:
    """The AuditStore over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    async def append_audit(self, entries: Sequence[AuditEntry]) -> None:
        if not entries:
            return
        async with self._db.transaction() as c:
            await c.insert_many("audit_events", (), _COLUMNS, [_row(e) for e in entries], "")

    async def list_audit(
        self, query: AuditQuery, *, page_size: int = 100, page_token: str = ""
    ) -> tuple[list[AuditEntry], str]:
        check_page_size(page_size, limit=MAX_AUDIT_PAGE)
        fingerprint = query_fingerprint("audit", query.project, query.principal, query.action, query.decision,
                                        query.start, query.end)
        cursor = decode_page_token(page_token, fingerprint, types=(int,))
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("project_id", query.project), ("principal", query.principal),
                              ("action", query.action), ("decision", query.decision)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        if query.start is not None:
            where.append("event_time >= ?")
            args.append(query.start)
        if query.end is not None:
            where.append("event_time < ?")
            args.append(query.end)
        if cursor is not None:
            where.append("id < ?")
            args.append(cursor[0])
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = await self._db.fetch(f"{_SELECT}{clause} ORDER BY id DESC LIMIT ?", *args, page_size + 1)
        entries = [_entry(r) for r in rows[:page_size]]
        token = encode_page_token([entries[-1].id], fingerprint) if len(rows) > page_size else ""
        return entries, token

    async def purge_audit(self, before: float) -> int:
        return await self._db.execute("DELETE FROM audit_events WHERE event_time < ?", before)
