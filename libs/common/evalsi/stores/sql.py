"""The metadata store in SQL: one implementation for SQLite and Postgres over a small dialect layer.

The store writes its SQL once, with ``?`` placeholders; a ``Database`` (``evalsi.stores.sql_engines``) runs
it on SQLite or Postgres. This module holds runs, results, tasks and leases; policies and agent cases are
the ``SqlDocuments`` mixin (``evalsi.stores.sql_documents``), agent case reports ``SqlCaseReports``
(``evalsi.stores.case_reports``), the alerts policies fired ``SqlPolicyAlerts`` (``evalsi.stores.policy_alerts``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, OUTCOME_SKIPPED, EvaluationResult

from .audit import SqlAudit
from .case_reports import SqlCaseReports
from .identity import SqlIdentity
from .metadata import (
    TASK_STATES,
    ResultRow,
    TaskEnd,
    TaskRow,
    check_page_size,
    check_task_states,
    decode_page_token,
    encode_page_token,
    project_or_default,
    query_fingerprint,
)
from .policy_alerts import SqlPolicyAlerts
from .project_packs import SqlProjectPacks
from .sql_documents import SqlDocuments
from .sql_engines import Column, Conn, Database, PostgresDatabase, SqliteDatabase

_FINAL = (OUTCOME_SCORED, OUTCOME_SKIPPED)
_FINAL_OUTCOMES = ", ".join(str(int(o)) for o in _FINAL)

_RESULT_COLUMNS: tuple[Column, ...] = (
    ("evaluator", "text"), ("record_id", "text"), ("trial", "int"), ("outcome", "int"), ("data", "bytes"),
)
_TASK_COLUMNS: tuple[Column, ...] = (
    ("run_id", "text"), ("key", "text"), ("stage", "int"), ("shard", "int"), ("trial", "int"), ("state", "text"),
    ("attempts", "int"), ("output_ref", "text"), ("error", "text"), ("update_us", "bigint"),
)
_TASK_SELECT = "SELECT run_id, key, stage, shard, trial, state, attempts, output_ref, error FROM tasks"


def _now_us() -> int:
    return time.time_ns() // 1000


def _one_row_per_key(rows: Sequence[ResultRow]) -> Sequence[ResultRow]:
    """``rows`` with one row per key: the last of several wins, as it would across calls, unless it would replace a
    final outcome (the upsert's rule below). Postgres also refuses to touch one row twice in a single upsert."""
    if len({(r[0], r[1], r[2]) for r in rows}) == len(rows):  # the usual case: nothing to merge, no dict built
        return rows
    kept: dict[tuple[str, str, int], ResultRow] = {}
    for row in rows:
        key = (row[0], row[1], row[2])
        before = kept.get(key)
        if before is not None and before[3] in _FINAL and row[3] not in _FINAL:
            continue
        kept[key] = row
    return list(kept.values())


def _without_results(run: Run, project: str) -> Run:
    stored = run
    if run.results or run.project != project:
        stored = Run()
        stored.CopyFrom(run)
        stored.ClearField("results")
        stored.project = project
    return stored


class SqlMetadataStore(SqlDocuments, SqlCaseReports, SqlIdentity, SqlAudit, SqlPolicyAlerts, SqlProjectPacks):
    """The MetadataStore over SQLite or Postgres; open it with ``open_sqlite``/``open_postgres`` or a URL. It is also
    the IdentityStore (``identity``), the AuditStore (``audit``), the CaseReportStore (``case_reports``), the
    PolicyAlertStore (``policy_alerts``) and the ProjectPacksStore (``project_packs``)."""

    def __init__(self, db: Database, *, applied_migrations: Sequence[int] = ()) -> None:
        self._db = db
        self.dialect: str = db.dialect
        # The migrations this open applied (empty when the schema was already current).
        self.applied_migrations: tuple[int, ...] = tuple(applied_migrations)

    @classmethod
    async def open_sqlite(cls, path: str | Path) -> SqlMetadataStore:
        db = SqliteDatabase(Path(path))
        try:
            applied = await db.open()
        except BaseException:
            await db.close()
            raise
        return cls(db, applied_migrations=applied)

    @classmethod
    async def open_postgres(cls, dsn: str, *, pool_size: int = 10) -> SqlMetadataStore:
        db = PostgresDatabase(dsn, pool_size=pool_size)
        try:
            applied = await db.open()
        except BaseException:
            await db.close()
            raise
        return cls(db, applied_migrations=applied)

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqlMetadataStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ping(self) -> bool:
        """Whether the database answers now (one trivial query); never raises."""
        try:
            await self._db.fetch("SELECT 1")
        except InfraError:
            await self._db.forget_connections()
            return False
        return True

    # --- runs ---

    async def create_run(self, run: Run) -> None:
        if not run.id:
            raise BadInputError("run.id is empty; a run needs an id before it is stored")
        project = project_or_default(run.project)
        stored = _without_results(run, project)
        now = _now_us()
        created = run.create_time.ToMicroseconds() if run.HasField("create_time") else now
        async with self._db.transaction() as c:
            inserted = await c.execute(
                "INSERT INTO runs (run_id, project_id, tenant_id, name, state, create_us, update_us, data) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
                run.id, project, run.tenant_id, run.name, int(run.state), created, now, stored.SerializeToString(),
            )
            if not inserted:
                raise BadInputError(f"run {run.id!r} already exists; run ids are unique across projects")
            await self._write_labels(c, run, project)

    async def get_run(self, project: str, run_id: str) -> Run | None:
        rows = await self._db.fetch(
            "SELECT data FROM runs WHERE project_id = ? AND run_id = ?", project_or_default(project), run_id
        )
        return Run.FromString(rows[0][0]) if rows else None

    async def update_run(self, run: Run, *, only_from: Sequence[int] = ()) -> bool:
        project = project_or_default(run.project)
        stored = _without_results(run, project)
        condition = ""
        condition_args: list[Any] = []
        if only_from:
            clause, condition_args = self._db.in_list("state", [int(s) for s in only_from])
            condition = f" AND {clause}"
        async with self._db.transaction() as c:
            updated = await c.execute(
                "UPDATE runs SET tenant_id = ?, name = ?, state = ?, update_us = ?, data = ? "
                f"WHERE run_id = ? AND project_id = ?{condition}",
                run.tenant_id, run.name, int(run.state), _now_us(), stored.SerializeToString(), run.id, project,
                *condition_args,
            )
            if updated:
                await c.execute("DELETE FROM run_labels WHERE run_id = ?", run.id)
                await self._write_labels(c, run, project)
        if updated:
            return True
        # Outside the transaction: the SQLite store serializes its connection, a read inside would wait on itself.
        if only_from and await self.get_run(project, run.id) is not None:
            return False
        raise BadInputError(f"no run {run.id!r} in project {project!r} to update; create it first")

    @staticmethod
    async def _write_labels(c: Conn, run: Run, project: str) -> None:
        await c.insert_many(
            "run_labels",
            [("run_id", "text", run.id), ("project_id", "text", project), ("tenant_id", "text", run.tenant_id)],
            [("key", "text"), ("value", "text")],
            sorted(run.labels.items()),
            "",
        )

    async def run_project(self, run_id: str) -> str | None:
        """The project holding ``run_id`` (run ids are unique across projects), or None."""
        rows = await self._db.fetch("SELECT project_id FROM runs WHERE run_id = ?", run_id)
        return str(rows[0][0]) if rows else None

    async def list_runs(
        self,
        project: str,
        *,
        state: int = 0,
        name_contains: str = "",
        labels: Mapping[str, str] | None = None,
        page_size: int = 50,
        page_token: str = "",
        all_projects: bool = False,
        created_after_us: int | None = None,
        created_before_us: int | None = None,
    ) -> tuple[list[Run], str]:
        project = project_or_default(project)
        labels = dict(sorted((labels or {}).items()))
        check_page_size(page_size)
        # "*" is no project name (evalsi.projects), so an all-projects cursor never continues a one-project list.
        scope = "*" if all_projects else project
        fingerprint = query_fingerprint(
            "runs", scope, int(state), name_contains, labels, created_after_us, created_before_us
        )
        cursor = decode_page_token(page_token, fingerprint, types=(int, str))
        where = [] if all_projects else ["project_id = ?"]
        args: list[Any] = [] if all_projects else [project]
        if state:
            where.append("state = ?")
            args.append(int(state))
        if name_contains:
            where.append(self._db.contains("name"))
            args.append(name_contains)
        for key, value in labels.items():
            where.append(
                "EXISTS (SELECT 1 FROM run_labels l WHERE l.run_id = runs.run_id AND l.key = ? AND l.value = ?)"
            )
            args += [key, value]
        if created_after_us is not None:
            where.append("create_us >= ?")
            args.append(created_after_us)
        if created_before_us is not None:
            where.append("create_us < ?")
            args.append(created_before_us)
        if cursor is not None:
            where.append("(create_us < ? OR (create_us = ? AND run_id < ?))")
            args += [cursor[0], cursor[0], cursor[1]]
        rows = await self._db.fetch(
            f"SELECT create_us, run_id, data FROM runs WHERE {' AND '.join(where) or '1 = 1'} "
            "ORDER BY create_us DESC, run_id DESC LIMIT ?",
            *args, page_size + 1,
        )
        page = rows[:page_size]
        token = encode_page_token([int(page[-1][0]), page[-1][1]], fingerprint) if len(rows) > page_size else ""
        return [Run.FromString(r[2]) for r in page], token

    async def runs_in_states(self, states: Sequence[int]) -> list[tuple[str, str]]:
        if not states:
            return []
        clause, args = self._db.in_list("state", [int(s) for s in states])
        rows = await self._db.fetch(
            f"SELECT project_id, run_id FROM runs WHERE {clause} ORDER BY create_us, run_id", *args
        )
        return [(r[0], r[1]) for r in rows]

    # --- results ---

    async def upsert_results(self, project: str, run_id: str, results: Sequence[EvaluationResult]) -> None:
        await self.upsert_result_rows(
            project,
            run_id,
            # a million results a run: each field is read once
            [(r.evaluator, r.record_id, r.trial, r.outcome, r.SerializeToString()) for r in results],
        )

    async def upsert_result_rows(self, project: str, run_id: str, rows: Sequence[ResultRow]) -> None:
        if not rows:
            return
        async with self._db.transaction() as c:
            await c.insert_many(
                "results",
                [("tenant_id", "text", ""), ("project_id", "text", project_or_default(project)),
                 ("run_id", "text", run_id)],
                _RESULT_COLUMNS,
                _one_row_per_key(rows),
                "ON CONFLICT (project_id, run_id, evaluator, record_id, trial) "
                "DO UPDATE SET outcome = excluded.outcome, data = excluded.data "
                # A result the evaluator produced is a fact: a late error or cancellation for the same key (a
                # dead-lettered copy of a task that was also scored, a cancel racing the last result) never
                # replaces it.
                f"WHERE results.outcome NOT IN ({_FINAL_OUTCOMES}) OR excluded.outcome IN ({_FINAL_OUTCOMES})",
            )

    async def _results_after(
        self, project: str, run_id: str, evaluator: str, cursor: Sequence[Any] | None, limit: int
    ) -> list[Sequence[Any]]:
        where = ["project_id = ?", "run_id = ?"]
        args: list[Any] = [project, run_id]
        if evaluator:
            where.append("evaluator = ?")
            args.append(evaluator)
        if cursor is not None:
            where.append("(evaluator, record_id, trial) > (?, ?, ?)")
            args += list(cursor)
        return await self._db.fetch(
            f"SELECT evaluator, record_id, trial, data FROM results WHERE {' AND '.join(where)} "
            "ORDER BY evaluator, record_id, trial LIMIT ?",
            *args, limit,
        )

    async def list_results(
        self, project: str, run_id: str, *, evaluator: str = "", page_size: int = 100, page_token: str = ""
    ) -> tuple[list[EvaluationResult], str]:
        project = project_or_default(project)
        check_page_size(page_size)
        fingerprint = query_fingerprint("results", project, run_id, evaluator)
        cursor = decode_page_token(page_token, fingerprint, types=(str, str, int))
        rows = await self._results_after(project, run_id, evaluator, cursor, page_size + 1)
        page = rows[:page_size]
        token = ""
        if len(rows) > page_size:
            token = encode_page_token([page[-1][0], page[-1][1], int(page[-1][2])], fingerprint)
        return [EvaluationResult.FromString(r[3]) for r in page], token

    async def iter_results(
        self, project: str, run_id: str, *, batch_size: int = 5000
    ) -> AsyncIterator[list[EvaluationResult]]:
        """Every result of a run in (evaluator, record_id, trial) order, ``batch_size`` at a time.

        Each batch is its own keyset query, so memory stays bounded and no transaction is held open.
        """
        project = project_or_default(project)
        check_page_size(batch_size, limit=1_000_000)
        cursor: Sequence[Any] | None = None
        while True:
            rows = await self._results_after(project, run_id, "", cursor, batch_size)
            if not rows:
                return
            yield [EvaluationResult.FromString(r[3]) for r in rows]
            if len(rows) < batch_size:
                return
            cursor = rows[-1][:3]

    async def count_results(self, project: str, run_id: str) -> dict[int, int]:
        rows = await self._db.fetch(
            "SELECT outcome, count(*) FROM results WHERE project_id = ? AND run_id = ? GROUP BY outcome",
            project_or_default(project), run_id,
        )
        return {int(r[0]): int(r[1]) for r in rows}

    async def delete_results(self, project: str, run_id: str, *, outcomes: Sequence[int]) -> int:
        if not outcomes:
            return 0
        clause, args = self._db.in_list("outcome", [int(o) for o in outcomes])
        async with self._db.transaction() as c:
            return await c.execute(
                f"DELETE FROM results WHERE project_id = ? AND run_id = ? AND {clause}",
                project_or_default(project), run_id, *args,
            )

    # --- tasks ---

    async def add_tasks(self, project: str, tasks: Sequence[TaskRow]) -> int:
        if not tasks:
            return 0
        check_task_states(sorted({t.state for t in tasks}), what="add_tasks")
        now = _now_us()
        rows: dict[tuple[str, str], tuple[Any, ...]] = {}
        for t in tasks:
            # The first of several rows with one key wins, as it would across calls.
            rows.setdefault(
                (t.run_id, t.key),
                (t.run_id, t.key, t.stage, t.shard, t.trial, t.state, t.attempts, t.output_ref, t.error, now),
            )
        async with self._db.transaction() as c:
            return await c.insert_many(
                "tasks",
                [("tenant_id", "text", ""), ("project_id", "text", project_or_default(project))],
                _TASK_COLUMNS,
                rows.values(),
                "ON CONFLICT (run_id, key) DO NOTHING",
            )

    async def set_task_state(
        self,
        run_id: str,
        key: str,
        state: str,
        *,
        output_ref: str = "",
        error: str = "",
        only_from: Sequence[str] = ("pending",),
        attempts: int | None = None,
        usage: tuple[int, int, float] | None = None,
    ) -> bool:
        """Move a task to ``state`` if it is in one of ``only_from`` (any state when empty); True if it moved.

        One conditional UPDATE, so of several concurrent completions of one task exactly one returns True.
        ``attempts``, when given, is stored too (the caller counts deliveries); so is ``usage`` (input
        tokens, output tokens, USD) of the work the task did.
        """
        (state,) = check_task_states((state,), what="set_task_state")
        sets = ["state = ?", "output_ref = ?", "error = ?", "update_us = ?"]
        args: list[Any] = [state, output_ref, error, _now_us()]
        if attempts is not None:
            sets.append("attempts = ?")
            args.append(int(attempts))
        if usage is not None:
            sets += ["input_tokens = ?", "output_tokens = ?", "cost_usd = ?"]
            args += [int(usage[0]), int(usage[1]), float(usage[2])]
        where = ["run_id = ?", "key = ?"]
        args += [run_id, key]
        sources = check_task_states(only_from, what="set_task_state only_from")
        if sources:
            clause, extra = self._db.in_list("state", list(sources))
            where.append(clause)
            args += extra
        changed = await self._db.execute(f"UPDATE tasks SET {', '.join(sets)} WHERE {' AND '.join(where)}", *args)
        return changed > 0

    async def end_tasks(self, run_id: str, ends: Sequence[TaskEnd]) -> set[str]:
        """One statement for a batch of tasks on Postgres (a scheduler ends some 2,000 tasks a million results):
        an UPDATE joined to the ends as arrays; on SQLite, whose statements cost no round trip, one each."""
        firsts = list({end.key: end for end in reversed(ends)}.values())  # the first end of each key
        if not firsts:
            return set()
        states = check_task_states([end.state for end in firsts], what="end_tasks")
        # Done also from cancelled: work that finished after a cancel still counts (a resume then skips it).
        movable = "(tasks.state = 'pending' OR (v.state = 'done' AND tasks.state = 'cancelled'))"
        if self.dialect == "postgres":
            rows = await self._db.fetch(
                "UPDATE tasks SET state = v.state, error = v.error, output_ref = '', update_us = ?, "
                "input_tokens = v.tokens_in, output_tokens = v.tokens_out, cost_usd = v.usd "
                "FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::float8[]) "
                "AS v(key, state, error, tokens_in, tokens_out, usd) "
                f"WHERE tasks.run_id = ? AND tasks.key = v.key AND {movable} RETURNING tasks.key",
                _now_us(), [end.key for end in firsts], list(states), [end.error for end in firsts],
                [int(end.usage[0]) for end in firsts], [int(end.usage[1]) for end in firsts],
                [float(end.usage[2]) for end in firsts], run_id,
            )
            return {row[0] for row in rows}
        moved: set[str] = set()
        async with self._db.transaction() as c:
            for end, state in zip(firsts, states, strict=True):
                changed = await c.execute(
                    "UPDATE tasks SET state = ?, error = ?, output_ref = '', update_us = ?, input_tokens = ?, "
                    "output_tokens = ?, cost_usd = ? WHERE run_id = ? AND key = ? "
                    "AND (state = 'pending' OR (? = 'done' AND state = 'cancelled'))",
                    state, end.error, _now_us(), int(end.usage[0]), int(end.usage[1]), float(end.usage[2]), run_id,
                    end.key, state,
                )
                if changed:
                    moved.add(end.key)
        return moved

    async def task_usage(self, run_id: str) -> tuple[int, int, float]:
        """Input tokens, output tokens and USD of every task of a run so far."""
        rows = await self._db.fetch(
            "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cost_usd), 0) "
            "FROM tasks WHERE run_id = ?",
            run_id,
        )
        first = rows[0]
        return int(first[0]), int(first[1]), float(first[2])

    async def list_tasks(self, run_id: str, *, states: Sequence[str] = (), stage: int = 0) -> list[TaskRow]:
        where = ["run_id = ?"]
        args: list[Any] = [run_id]
        states = check_task_states(states, what="list_tasks")
        if states:
            clause, extra = self._db.in_list("state", list(states))
            where.append(clause)
            args += extra
        if stage:
            where.append("stage = ?")
            args.append(int(stage))
        rows = await self._db.fetch(f"{_TASK_SELECT} WHERE {' AND '.join(where)} ORDER BY key", *args)
        return [TaskRow(*r) for r in rows]

    async def task_counts(self, run_id: str) -> dict[str, int]:
        """Tasks of a run per state; every known state is present, zero when none."""
        rows = await self._db.fetch("SELECT state, count(*) FROM tasks WHERE run_id = ? GROUP BY state", run_id)
        counts = dict.fromkeys(TASK_STATES, 0)
        counts.update({r[0]: int(r[1]) for r in rows})
        return counts

    # --- leases ---

    async def acquire_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take ``name`` if free or expired, or renew it if ``owner`` holds it; times come from the database."""
        if not owner:
            raise BadInputError("acquire_lease: owner is empty; name the replica that takes the lease")
        if ttl_s <= 0:
            raise BadInputError(f"acquire_lease: ttl_s {ttl_s} must be positive")
        now = self._db.now
        taken = await self._db.execute(
            f"INSERT INTO leases (name, owner, expires_at) VALUES (?, ?, {now} + ?) "
            "ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
            f"WHERE leases.owner = excluded.owner OR leases.expires_at <= {now}",
            name, owner, float(ttl_s),
        )
        return taken > 0

    async def release_lease(self, name: str, owner: str) -> None:
        await self._db.execute("DELETE FROM leases WHERE name = ? AND owner = ?", name, owner)

    async def lease_owner(self, name: str) -> str | None:
        rows = await self._db.fetch(f"SELECT owner FROM leases WHERE name = ? AND expires_at > {self._db.now}", name)
        return rows[0][0] if rows else None
