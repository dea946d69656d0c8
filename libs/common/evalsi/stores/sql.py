"""The metadata store in SQL: one implementation for SQLite and Postgres over a small dialect layer.

The store writes its SQL once, with ``?`` placeholders; a ``_Database`` runs it on its engine:
- ``_SqliteDatabase``: the stdlib ``sqlite3`` on one connection in one dedicated thread (WAL mode), so
  the event loop never blocks; an asyncio lock keeps a transaction's statements together.
- ``_PostgresDatabase``: an asyncpg pool; ``?`` becomes ``$n``.
The dialects differ only in bulk inserts (SQLite: ``executemany`` in one transaction; Postgres: one
``INSERT ... SELECT FROM unnest(arrays)`` per chunk), ``IN`` lists, substring tests and the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from evalsi.errors import BadInputError, InfraError
from evalsi.masking import mask_url
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_SCORED, OUTCOME_SKIPPED, EvaluationResult

from .metadata import (
    TASK_STATES,
    CaseImport,
    StoredCase,
    StoredPolicy,
    TaskRow,
    case_hash,
    check_page_size,
    check_task_states,
    decode_page_token,
    encode_page_token,
    policy_hash,
    project_or_default,
    query_fingerprint,
)
from .migrations import migrate_postgres, migrate_sqlite

_FINAL = (OUTCOME_SCORED, OUTCOME_SKIPPED)
_FINAL_OUTCOMES = ", ".join(str(int(o)) for o in _FINAL)

T = TypeVar("T")

# A column of a bulk insert: (name, neutral type); types are "text", "int", "bigint", "float", "bytes".
Column = tuple[str, str]
# A value shared by every row of a bulk insert: (name, neutral type, value).
Constant = tuple[str, str, Any]

_PG_TYPES = {"text": "text", "int": "int4", "bigint": "int8", "float": "float8", "bytes": "bytea"}
_PG_CHUNK = 20_000


class _Conn(Protocol):
    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    async def insert_many(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: Iterable[Sequence[Any]],
        tail: str,
    ) -> int: ...


class _Database(Protocol):
    dialect: str
    now: str  # an SQL expression: the database's clock, in seconds since the epoch

    def transaction(self) -> contextlib.AbstractAsyncContextManager[_Conn]: ...

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

    def contains(self, column: str) -> str: ...

    async def forget_connections(self) -> None: ...

    async def close(self) -> None: ...


# --- SQLite ----------------------------------------------------------------------------------------


class _SqliteConn:
    def __init__(self, db: _SqliteDatabase) -> None:
        self._db = db

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._db.call(lambda c: c.execute(sql, args).fetchall())

    async def execute(self, sql: str, *args: Any) -> int:
        return await self._db.call(lambda c: c.execute(sql, args).rowcount)

    async def insert_many(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: Iterable[Sequence[Any]],
        tail: str,
    ) -> int:
        names = [c[0] for c in constants] + [c[0] for c in columns]
        marks = ", ".join("?" * len(names))
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks}) {tail}"
        fixed = tuple(c[2] for c in constants)
        rows = list(rows)
        if not rows:
            return 0
        # The parameter tuples are built in the database thread too, off the event loop.
        return await self._db.call(lambda c: c.executemany(sql, (fixed + tuple(row) for row in rows)).rowcount)


def _switch_to_wal(conn: sqlite3.Connection, *, attempts: int = 200, pause_s: float = 0.05) -> None:
    """Switch the file to WAL, waiting while another process holds it.

    Changing the journal mode needs an exclusive lock and SQLite answers "database is locked" at once
    rather than through the busy handler when another connection is reading, so it is retried here.
    """
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(pause_s)


class _SqliteDatabase:
    """One sqlite3 connection, used only from one dedicated thread."""

    dialect = "sqlite"
    now = "((julianday('now') - 2440587.5) * 86400.0)"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsi-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> list[int]:
        def connect() -> list[int]:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._conn = conn
            # Standalone mode has several processes on one file: wait for a writer rather than fail at once.
            conn.execute("PRAGMA busy_timeout = 10000")
            _switch_to_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            return migrate_sqlite(conn, where=f"SQLite database {self.path}")

        return await self._in_thread(connect)

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn)
        except sqlite3.IntegrityError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise InfraError(f"SQLite database {self.path}: {exc}") from exc

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise InfraError(f"SQLite database {self.path} is closed")
        return await self._in_thread(functools.partial(fn, conn))

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Conn]:
        async with self._lock:
            # IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading read locks.
            await self.call(lambda c: c.execute("BEGIN IMMEDIATE"))
            try:
                yield _SqliteConn(self)
            except BaseException:
                await self.call(lambda c: c.execute("ROLLBACK"))
                raise
            await self.call(lambda c: c.execute("COMMIT"))

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        async with self._lock:
            return await _SqliteConn(self).fetch(sql, *args)

    async def execute(self, sql: str, *args: Any) -> int:
        async with self._lock:
            return await _SqliteConn(self).execute(sql, *args)

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def contains(self, column: str) -> str:
        return f"instr(lower({column}), lower(?)) > 0"

    async def forget_connections(self) -> None:
        """Nothing to do: a file does not go away the way a server does."""

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                await self._in_thread(conn.close)
        self._executor.shutdown(wait=True)


# --- Postgres --------------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\?")


@functools.lru_cache(maxsize=512)
def _dollar(sql: str) -> str:
    """``?`` placeholders to ``$1, $2, ...`` (the store's SQL never has a ``?`` inside a literal)."""
    counter = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(counter)}", sql)


def _rowcount(status: str) -> int:
    """Rows affected, from a command tag such as ``INSERT 0 5`` or ``UPDATE 1``."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class _PostgresConn:
    def __init__(self, conn: Any, errors: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._conn = conn
        self._errors = errors

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        with self._errors():
            return await self._conn.fetch(_dollar(sql), *args)

    async def execute(self, sql: str, *args: Any) -> int:
        with self._errors():
            return _rowcount(await self._conn.execute(_dollar(sql), *args))

    async def insert_many(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: Iterable[Sequence[Any]],
        tail: str,
    ) -> int:
        names = [c[0] for c in constants] + [c[0] for c in columns]
        fixed = [f"${i}::{_PG_TYPES[c[1]]}" for i, c in enumerate(constants, 1)]
        arrays = [f"${i}::{_PG_TYPES[c[1]]}[]" for i, c in enumerate(columns, len(constants) + 1)]
        sql = (
            f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join([*fixed, 'u.*'])} "
            f"FROM unnest({', '.join(arrays)}) AS u {tail}"
        )
        values = [c[2] for c in constants]
        rows = list(rows)
        total = 0
        with self._errors():
            for start in range(0, len(rows), _PG_CHUNK):
                chunk = rows[start : start + _PG_CHUNK]
                status = await self._conn.execute(sql, *values, *(list(col) for col in zip(*chunk, strict=True)))
                total += _rowcount(status)
        return total


class _PostgresDatabase:
    dialect = "postgres"
    now = "extract(epoch from clock_timestamp())::float8"

    def __init__(self, dsn: str, *, pool_size: int) -> None:
        self.dsn = dsn
        self._pool_size = pool_size
        self._pool: Any = None

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        import asyncpg

        try:
            yield
        except (TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            raise InfraError(f"Postgres at {mask_url(self.dsn)}: {type(exc).__name__}: {exc}") from exc

    async def open(self) -> list[int]:
        import asyncpg

        with self._errors():
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self._pool_size, timeout=10, command_timeout=300
            )
            async with self._pool.acquire() as conn:
                return await migrate_postgres(conn, where=f"Postgres at {mask_url(self.dsn)}")

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Conn]:
        with self._errors():
            async with self._pool.acquire() as conn, conn.transaction():
                yield _PostgresConn(conn, self._errors)

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        with self._errors():
            return await self._pool.fetch(_dollar(sql), *args)

    async def execute(self, sql: str, *args: Any) -> int:
        with self._errors():
            return _rowcount(await self._pool.execute(_dollar(sql), *args))

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def contains(self, column: str) -> str:
        return f"strpos(lower({column}), lower(?)) > 0"

    async def forget_connections(self) -> None:
        """Replace every pooled connection on its next use: after a server restart each one is broken, and
        finding that out query by query would fail as many queries as the pool holds connections."""
        if self._pool is not None:
            await self._pool.expire_connections()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


# --- The store -------------------------------------------------------------------------------------

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


def _without_results(run: Run, project: str) -> Run:
    stored = run
    if run.results or run.project != project:
        stored = Run()
        stored.CopyFrom(run)
        stored.ClearField("results")
        stored.project = project
    return stored


class SqlMetadataStore:
    """The MetadataStore over SQLite or Postgres; open it with ``open_sqlite``/``open_postgres`` or a URL."""

    def __init__(self, db: _Database, *, applied_migrations: Sequence[int] = ()) -> None:
        self._db = db
        self.dialect: str = db.dialect
        # The migrations this open applied (empty when the schema was already current).
        self.applied_migrations: tuple[int, ...] = tuple(applied_migrations)

    @classmethod
    async def open_sqlite(cls, path: str | Path) -> SqlMetadataStore:
        db = _SqliteDatabase(Path(path))
        try:
            applied = await db.open()
        except BaseException:
            await db.close()
            raise
        return cls(db, applied_migrations=applied)

    @classmethod
    async def open_postgres(cls, dsn: str, *, pool_size: int = 10) -> SqlMetadataStore:
        db = _PostgresDatabase(dsn, pool_size=pool_size)
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
        condition, condition_args = "", []
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
    async def _write_labels(c: _Conn, run: Run, project: str) -> None:
        await c.insert_many(
            "run_labels",
            [("run_id", "text", run.id), ("project_id", "text", project), ("tenant_id", "text", run.tenant_id)],
            [("key", "text"), ("value", "text")],
            sorted(run.labels.items()),
            "",
        )

    async def list_runs(
        self,
        project: str,
        *,
        state: int = 0,
        name_contains: str = "",
        labels: Mapping[str, str] | None = None,
        page_size: int = 50,
        page_token: str = "",
    ) -> tuple[list[Run], str]:
        project = project_or_default(project)
        labels = dict(sorted((labels or {}).items()))
        check_page_size(page_size)
        fingerprint = query_fingerprint("runs", project, int(state), name_contains, labels)
        cursor = decode_page_token(page_token, fingerprint, types=(int, str))
        where = ["project_id = ?"]
        args: list[Any] = [project]
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
        if cursor is not None:
            where.append("(create_us < ? OR (create_us = ? AND run_id < ?))")
            args += [cursor[0], cursor[0], cursor[1]]
        rows = await self._db.fetch(
            f"SELECT create_us, run_id, data FROM runs WHERE {' AND '.join(where)} "
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
        if not results:
            return
        # The last of several results with one key wins, as it would across calls; Postgres also refuses
        # to touch one row twice in a single INSERT ... ON CONFLICT.
        rows: dict[tuple[str, str, int], tuple[str, str, int, int, bytes]] = {}
        for r in results:
            key = (r.evaluator, r.record_id, r.trial)
            kept = rows.get(key)
            if kept is not None and kept[3] in _FINAL and r.outcome not in _FINAL:
                continue  # the same rule as the upsert below
            rows[key] = (r.evaluator, r.record_id, r.trial, int(r.outcome), r.SerializeToString())
        async with self._db.transaction() as c:
            await c.insert_many(
                "results",
                [("tenant_id", "text", ""), ("project_id", "text", project_or_default(project)),
                 ("run_id", "text", run_id)],
                _RESULT_COLUMNS,
                rows.values(),
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
