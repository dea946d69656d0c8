"""The metadata store's stored documents in SQL: online evaluation policies and agent cases.

A mixin of ``SqlMetadataStore`` (``evalsi.stores.sql``): these tables share nothing with runs, results and
tasks but the database, so their statements live apart from the run bookkeeping.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from evalsi.errors import BadInputError
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy

from .metadata import CaseImport, StoredCase, StoredPolicy, case_hash, policy_hash, project_or_default
from .sql_engines import Column, Database


class SqlDocuments:
    """Policies and agent cases over a ``Database``; the store that mixes this in sets ``_db``."""

    _db: Database

    # --- online policies ---

    async def put_policy(self, project: str, policy: OnlineEvalPolicy) -> tuple[StoredPolicy, bool]:
        """Insert or replace the policy named ``policy.metadata.name``; True when that changed what is stored.

        One conditional upsert: the row is only touched (and its generation raised) when the hash differs, so
        concurrent applies of one document count once and re-applying it leaves generation and time alone.
        """
        project = project_or_default(project)
        name = policy.metadata.name
        if not name:
            raise BadInputError("metadata.name: a policy needs a name before it is stored")
        stored = OnlineEvalPolicy()
        stored.CopyFrom(policy)
        stored.metadata.project = project
        spec = stored.SerializeToString(deterministic=True)
        digest = policy_hash(stored)
        now = time.time()
        async with self._db.transaction() as c:
            rows = await c.fetch(
                "INSERT INTO policies (project_id, tenant_id, name, spec, spec_hash, generation, created_at, "
                "updated_at) VALUES (?, '', ?, ?, ?, 1, ?, ?) ON CONFLICT (project_id, tenant_id, name) DO UPDATE "
                "SET spec = excluded.spec, spec_hash = excluded.spec_hash, generation = policies.generation + 1, "
                "updated_at = excluded.updated_at WHERE policies.spec_hash <> excluded.spec_hash "
                "RETURNING generation, updated_at",
                project, name, spec, digest, now, now,
            )
            if rows:
                return StoredPolicy(project, name, stored, int(rows[0][0]), digest, float(rows[0][1])), True
            rows = await c.fetch(f"{_POLICY_SELECT} WHERE {_POLICY_KEY}", project, name)
        return _stored_policy(rows[0]), False

    async def get_policy(self, project: str, name: str) -> StoredPolicy | None:
        rows = await self._db.fetch(f"{_POLICY_SELECT} WHERE {_POLICY_KEY}", project_or_default(project), name)
        return _stored_policy(rows[0]) if rows else None

    async def list_policies(self, project: str | None = None) -> list[StoredPolicy]:
        """The project's policies by name; every project's (by project, then name) when ``project`` is None."""
        if project is None:
            rows = await self._db.fetch(_POLICY_SELECT + " WHERE tenant_id = '' ORDER BY project_id, name")
        else:
            rows = await self._db.fetch(
                _POLICY_SELECT + " WHERE project_id = ? AND tenant_id = '' ORDER BY name", project_or_default(project)
            )
        return [_stored_policy(r) for r in rows]

    async def delete_policy(self, project: str, name: str) -> bool:
        deleted = await self._db.execute(f"DELETE FROM policies WHERE {_POLICY_KEY}", project_or_default(project), name)
        return deleted > 0

    # --- agent cases ---

    async def put_cases(
        self, project: str, cases: Sequence[StoredCase], *, keep_existing: bool = False
    ) -> CaseImport:
        """Store ``cases`` in one transaction (all or none), each under its own tenant.

        An existing case with the same id in the same tenant is replaced, unless ``keep_existing``: then it is
        left as it is (it may have been edited in the store since). A case whose text and place in the corpus
        are unchanged is not rewritten, so its ``updated_at`` keeps meaning "last changed".
        """
        project = project_or_default(project)
        seen: set[tuple[str, str]] = set()
        for case in cases:
            if not case.tenant or not case.case_id:
                raise BadInputError(f"put_cases: a case needs a tenant and an id, got {case.tenant!r}/{case.case_id!r}")
            if (case.tenant, case.case_id) in seen:
                raise BadInputError(f"put_cases: case {case.case_id!r} of tenant {case.tenant!r} is given twice")
            seen.add((case.tenant, case.case_id))
        if not cases:
            return CaseImport()
        now = time.time()
        created: list[str] = []
        replaced: list[str] = []
        unchanged: list[str] = []
        kept: list[str] = []
        rows: list[tuple[Any, ...]] = []
        async with self._db.transaction() as c:
            clause, args = self._db.in_list("case_id", sorted({case.case_id for case in cases}))
            existing = {
                (r[0], r[1]): (r[2], r[3], int(r[4]), int(r[5]))
                for r in await c.fetch(
                    f"SELECT tenant_id, case_id, yaml_hash, path, position, line FROM cases "
                    f"WHERE project_id = ? AND {clause}",
                    project, *args,
                )
            }
            for case in cases:
                digest = case_hash(case.yaml)
                before = existing.get((case.tenant, case.case_id))
                if before is None:
                    created.append(case.case_id)
                elif keep_existing:
                    kept.append(case.case_id)
                    continue
                elif before == (digest, case.path, case.position, case.line):
                    unchanged.append(case.case_id)
                    continue
                else:
                    replaced.append(case.case_id)
                rows.append((case.tenant, case.case_id, case.agent, case.path, case.position, case.line, case.yaml,
                             digest, now, now))
            await c.insert_many(
                "cases", [("project_id", "text", project)], _CASE_COLUMNS, rows,
                "ON CONFLICT (project_id, tenant_id, case_id) DO UPDATE SET agent = excluded.agent, "
                "path = excluded.path, position = excluded.position, line = excluded.line, yaml = excluded.yaml, "
                "yaml_hash = excluded.yaml_hash, updated_at = excluded.updated_at",
            )
        return CaseImport(tuple(created), tuple(replaced), tuple(unchanged), tuple(kept))

    async def get_case(self, project: str, tenant: str, case_id: str) -> StoredCase | None:
        """The case, or None when there is none with this id in this tenant (whatever other tenants hold)."""
        rows = await self._db.fetch(
            f"{_CASE_SELECT} WHERE project_id = ? AND tenant_id = ? AND case_id = ?",
            project_or_default(project), tenant, case_id,
        )
        return _stored_case(rows[0]) if rows else None

    async def list_cases(self, project: str, tenant: str, *, agent: str = "") -> list[StoredCase]:
        """The tenant's cases in corpus order (path, then position in the file), only ``agent``'s when given."""
        where, args = "project_id = ? AND tenant_id = ?", [project_or_default(project), tenant]
        if agent:
            where += " AND agent = ?"
            args.append(agent)
        rows = await self._db.fetch(f"{_CASE_SELECT} WHERE {where} ORDER BY path, position, case_id", *args)
        return [_stored_case(r) for r in rows]


_CASE_COLUMNS: tuple[Column, ...] = (
    ("tenant_id", "text"), ("case_id", "text"), ("agent", "text"), ("path", "text"), ("position", "int"),
    ("line", "int"), ("yaml", "text"), ("yaml_hash", "text"), ("created_at", "float"), ("updated_at", "float"),
)
_CASE_SELECT = (
    "SELECT tenant_id, case_id, agent, path, position, line, yaml, yaml_hash, created_at, updated_at FROM cases"
)


def _stored_case(row: Sequence[Any]) -> StoredCase:
    return StoredCase(
        tenant=row[0], case_id=row[1], agent=row[2], path=row[3], position=int(row[4]), line=int(row[5]),
        yaml=row[6], yaml_hash=row[7], created_at=float(row[8]), updated_at=float(row[9]),
    )


_POLICY_SELECT = "SELECT project_id, name, spec, generation, spec_hash, updated_at FROM policies"
_POLICY_KEY = "project_id = ? AND tenant_id = '' AND name = ?"


def _stored_policy(row: Sequence[Any]) -> StoredPolicy:
    return StoredPolicy(
        project=row[0], name=row[1], policy=OnlineEvalPolicy.FromString(bytes(row[2])), generation=int(row[3]),
        spec_hash=row[4], updated_at=float(row[5]),
    )
