"""The SQL engines under the metadata store: SQLite and Postgres behind one small ``Database`` interface.

The store writes its SQL once, with ``?`` placeholders; a ``Database`` runs it on its engine:
- ``SqliteDatabase``: the stdlib ``sqlite3`` on one connection in one dedicated thread (WAL mode), so
  the event loop never blocks; an asyncio lock keeps a transaction's statements together.
- ``PostgresDatabase``: an asyncpg pool; ``?`` becomes ``$n``.
The dialects differ only in bulk inserts (SQLite: ``executemany`` in one transaction; Postgres: from a few hundred
rows a binary COPY straight into the table under a savepoint, kept when no row's key exists already; else one
``INSERT ... SELECT FROM unnest(arrays)`` per chunk, or from some thousands of rows a binary COPY into a
session-local staging table and one ``INSERT ... SELECT`` from it), ``IN`` lists, substring tests and the clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from evalsi.errors import InfraError
from evalsi.masking import mask_url

from .migrations import migrate_postgres, migrate_sqlite

T = TypeVar("T")

# A column of a bulk insert: (name, neutral type); types are "text", "int", "bigint", "float", "bytes".
Column = tuple[str, str]
# A value shared by every row of a bulk insert: (name, neutral type, value).
Constant = tuple[str, str, Any]

_PG_TYPES = {"text": "text", "int": "int4", "bigint": "int8", "float": "float8", "bytes": "bytea"}
_PG_CHUNK = 20_000
# From this many rows a bulk insert goes through COPY: below it, the staging table's extra statements cost Postgres
# more than COPY's cheaper encoding saves the client (docs/benchmarks.md, "Results written with COPY").
_PG_COPY_FROM = 2_000
# From this many rows a bulk insert whose tail only handles conflicts first tries a plain COPY into the table (two
# more round trips for the savepoint: a few labels gain nothing, a task's 500 results do).
_PG_DIRECT_COPY_FROM = 200


class Conn(Protocol):
    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    async def insert_many(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: Iterable[Sequence[Any]],
        tail: str,
    ) -> int: ...


class Database(Protocol):
    dialect: str
    now: str  # an SQL expression: the database's clock, in seconds since the epoch

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Conn]: ...

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]: ...

    async def execute(self, sql: str, *args: Any) -> int: ...

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

    def contains(self, column: str) -> str: ...

    async def forget_connections(self) -> None: ...

    async def close(self) -> None: ...


# --- SQLite ----------------------------------------------------------------------------------------


class SqliteConn:
    def __init__(self, db: SqliteDatabase) -> None:
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


class SqliteDatabase:
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
    async def transaction(self) -> AsyncIterator[Conn]:
        async with self._lock:
            # IMMEDIATE takes the write lock up front, so two processes never deadlock upgrading read locks.
            await self.call(lambda c: c.execute("BEGIN IMMEDIATE"))
            try:
                yield SqliteConn(self)
            except BaseException:
                await self.call(lambda c: c.execute("ROLLBACK"))
                raise
            await self.call(lambda c: c.execute("COMMIT"))

    async def fetch(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        async with self._lock:
            return await SqliteConn(self).fetch(sql, *args)

    async def execute(self, sql: str, *args: Any) -> int:
        async with self._lock:
            return await SqliteConn(self).execute(sql, *args)

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


class PostgresConn:
    def __init__(self, conn: Any, errors: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._conn = conn
        self._errors = errors
        self._staged: set[str] = set()  # staging tables this transaction has filled (emptied again at commit)

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
        rows = list(rows)
        if not rows:
            return 0
        if len(rows) >= _PG_DIRECT_COPY_FROM and _only_conflicts(tail):
            copied = await self._copy_unless_conflicting(table, constants, columns, rows)
            if copied is not None:
                return copied
        if len(rows) >= _PG_COPY_FROM:
            return await self._copy_many(table, constants, columns, rows, tail)
        names = [c[0] for c in constants] + [c[0] for c in columns]
        fixed = [f"${i}::{_PG_TYPES[c[1]]}" for i, c in enumerate(constants, 1)]
        arrays = [f"${i}::{_PG_TYPES[c[1]]}[]" for i, c in enumerate(columns, len(constants) + 1)]
        sql = (
            f"INSERT INTO {table} ({', '.join(names)}) SELECT {', '.join([*fixed, 'u.*'])} "
            f"FROM unnest({', '.join(arrays)}) AS u {tail}"
        )
        values = [c[2] for c in constants]
        total = 0
        with self._errors():
            for start in range(0, len(rows), _PG_CHUNK):
                chunk = rows[start : start + _PG_CHUNK]
                status = await self._conn.execute(sql, *values, *(list(col) for col in zip(*chunk, strict=True)))
                total += _rowcount(status)
        return total

    async def _copy_unless_conflicting(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: list[Sequence[Any]]
    ) -> int | None:
        """Binary COPY straight into ``table`` under a savepoint; None (and nothing written) when a row's key is
        there already, for the conflict clause to decide. A run's results are new keys but for redeliveries,
        resumes and cancels, and a plain COPY costs Postgres about half of an ``INSERT ... ON CONFLICT`` per row
        (11 vs 18-20 µs at 500-4,000 rows a batch; docs/benchmarks.md, "The million after the leak")."""
        import asyncpg

        fixed = tuple(c[2] for c in constants)
        names = [c[0] for c in constants] + [c[0] for c in columns]
        try:
            with self._errors():
                async with self._conn.transaction():  # nested in the caller's: a savepoint
                    await self._conn.copy_records_to_table(table, records=_with_constants(fixed, rows), columns=names)
        except InfraError as exc:
            if isinstance(exc.__cause__, asyncpg.UniqueViolationError):
                return None
            raise
        return len(rows)

    async def _copy_many(
        self, table: str, constants: Sequence[Constant], columns: Sequence[Column], rows: list[Sequence[Any]],
        tail: str,
    ) -> int:
        """Binary COPY into a temporary table of this session (made once per connection, emptied at each commit),
        then one ``INSERT ... SELECT`` from it with the same conflict clause: COPY encodes rows without asyncpg's
        per-element array checks, and the whole batch is one statement."""
        stage = f"_evalsi_stage_{table}"
        typed = [(c[0], c[1]) for c in constants] + list(columns)
        names = ", ".join(c[0] for c in typed)
        fixed = tuple(c[2] for c in constants)
        with self._errors():
            if stage in self._staged:  # a second batch in one transaction: the first one's rows are still there
                await self._conn.execute(f"TRUNCATE {stage}")
            else:
                await self._conn.execute(
                    f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} "
                    f"({', '.join(f'{n} {_PG_TYPES[t]}' for n, t in typed)}) ON COMMIT DELETE ROWS"
                )
            self._staged.add(stage)
            await self._conn.copy_records_to_table(stage, records=_with_constants(fixed, rows),
                                                   columns=[c[0] for c in typed])
            moved = await self._conn.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} {tail}")
        return _rowcount(moved)


def _with_constants(fixed: tuple[Any, ...], rows: list[Sequence[Any]]) -> Sequence[Sequence[Any]]:
    """Each row after the values every row shares (tuples are joined as they are: no copy of each row first)."""
    if not fixed:
        return rows
    return [fixed + row if type(row) is tuple else fixed + tuple(row) for row in rows]


def _only_conflicts(tail: str) -> bool:
    """Whether an insert's tail only says what to do with rows whose key exists (or nothing at all), so that
    rows with new keys go in as they are whatever it says."""
    return not tail or tail.lstrip().upper().startswith("ON CONFLICT")


async def _keep_session(conn: Any) -> None:
    """What a pooled connection runs when it goes back to the pool, beyond asyncpg's own rollback of a transaction
    left open: nothing. asyncpg's default reset is a round trip of four statements (advisory unlock, CLOSE ALL,
    UNLISTEN, RESET ALL) after every query through the pool, and this store leaves none of that behind (it never
    listens, sets, declares cursors or keeps an advisory lock); its staging tables are meant to stay."""


class PostgresDatabase:
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
                self.dsn, min_size=1, max_size=self._pool_size, timeout=10, command_timeout=300, reset=_keep_session
            )
            async with self._pool.acquire() as conn:
                return await migrate_postgres(conn, where=f"Postgres at {mask_url(self.dsn)}")

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        with self._errors():
            async with self._pool.acquire() as conn, conn.transaction():
                yield PostgresConn(conn, self._errors)

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
