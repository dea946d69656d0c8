"""Versioned schema migrations of the metadata store, applied when a store opens.

Each migration has a version, a name and its statements per dialect; ``schema_migrations`` records the
versions applied. Postgres applies them under an advisory lock, so services that start together do not
race; SQLite under ``BEGIN IMMEDIATE``, which serializes writers across processes. A database whose
schema is newer than this code is refused rather than written with an older idea of its tables.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalsi.errors import InfraError

if TYPE_CHECKING:
    import asyncpg

# pg_advisory_lock key for migrations: "evalsi" in ASCII.
ADVISORY_LOCK_KEY = 0x6576616C7369


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def statements(self, dialect: str) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


def _v1(dialect: str) -> tuple[str, ...]:
    # Text keys compare byte-wise in both dialects (COLLATE "C" in Postgres, SQLite's BINARY), so result
    # pages come in the same order whichever store holds them.
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text = "text" if pg else "TEXT"
    blob = "bytea" if pg else "BLOB"
    integer = "integer" if pg else "INTEGER"
    bigint = "bigint" if pg else "INTEGER"
    double = "double precision" if pg else "REAL"
    return (
        f"""CREATE TABLE runs (
            run_id {key} PRIMARY KEY,
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            name {text} NOT NULL DEFAULT '',
            state {integer} NOT NULL,
            create_us {bigint} NOT NULL,
            update_us {bigint} NOT NULL,
            data {blob} NOT NULL
        )""",
        "CREATE INDEX runs_by_project ON runs (project_id, create_us DESC, run_id DESC)",
        "CREATE INDEX runs_by_state ON runs (state)",
        f"""CREATE TABLE run_labels (
            run_id {key} NOT NULL,
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            key {key} NOT NULL,
            value {key} NOT NULL,
            PRIMARY KEY (run_id, key)
        )""",
        "CREATE INDEX run_labels_by_value ON run_labels (project_id, key, value)",
        f"""CREATE TABLE results (
            tenant_id {text} NOT NULL DEFAULT '',
            project_id {key} NOT NULL,
            run_id {key} NOT NULL,
            evaluator {key} NOT NULL,
            record_id {key} NOT NULL,
            trial {integer} NOT NULL,
            outcome {integer} NOT NULL,
            data {blob} NOT NULL,
            PRIMARY KEY (project_id, run_id, evaluator, record_id, trial)
        )""",
        f"""CREATE TABLE tasks (
            tenant_id {text} NOT NULL DEFAULT '',
            project_id {key} NOT NULL,
            run_id {key} NOT NULL,
            key {key} NOT NULL,
            stage {integer} NOT NULL,
            shard {integer} NOT NULL,
            trial {integer} NOT NULL,
            state {text} NOT NULL,
            attempts {integer} NOT NULL DEFAULT 0,
            output_ref {text} NOT NULL DEFAULT '',
            error {text} NOT NULL DEFAULT '',
            update_us {bigint} NOT NULL DEFAULT 0,
            PRIMARY KEY (run_id, key)
        )""",
        "CREATE INDEX tasks_by_state ON tasks (run_id, state)",
        f"""CREATE TABLE leases (
            name {key} PRIMARY KEY,
            owner {text} NOT NULL,
            expires_at {double} NOT NULL,
            project_id {key} NOT NULL DEFAULT '',
            tenant_id {text} NOT NULL DEFAULT ''
        )""",
    )


def _v2(dialect: str) -> tuple[str, ...]:
    """Per-task usage, so a run's token and cost budget can be checked by any scheduler replica."""
    bigint, real = ("INTEGER", "REAL") if dialect == "sqlite" else ("bigint", "double precision")
    return (
        f"ALTER TABLE tasks ADD COLUMN input_tokens {bigint} NOT NULL DEFAULT 0",
        f"ALTER TABLE tasks ADD COLUMN output_tokens {bigint} NOT NULL DEFAULT 0",
        f"ALTER TABLE tasks ADD COLUMN cost_usd {real} NOT NULL DEFAULT 0",
    )


def _v3(dialect: str) -> tuple[str, ...]:
    """Online policies (MonitorService.ApplyPolicy): the serialized OnlineEvalPolicy by (project, tenant, name)."""
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, blob, bigint, double = (
        ("text", "bytea", "bigint", "double precision") if pg else ("TEXT", "BLOB", "INTEGER", "REAL")
    )
    return (
        f"""CREATE TABLE policies (
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            name {key} NOT NULL,
            spec {blob} NOT NULL,
            spec_hash {text} NOT NULL,
            generation {bigint} NOT NULL,
            created_at {double} NOT NULL,
            updated_at {double} NOT NULL,
            PRIMARY KEY (project_id, tenant_id, name)
        )""",
    )


def _v4(dialect: str) -> tuple[str, ...]:
    """Agent cases (docs/cases.md): each case's YAML document as imported, by (project, tenant, case id).

    The text is kept as it was written, comments included, so an export gives the corpus back byte for byte;
    ``path``, ``position`` and ``line`` say where in the corpus it came from.
    """
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, integer, double = ("text", "integer", "double precision") if pg else ("TEXT", "INTEGER", "REAL")
    return (
        f"""CREATE TABLE cases (
            project_id {key} NOT NULL,
            tenant_id {key} NOT NULL,
            case_id {key} NOT NULL,
            agent {key} NOT NULL,
            path {key} NOT NULL,
            position {integer} NOT NULL,
            line {integer} NOT NULL,
            yaml {text} NOT NULL,
            yaml_hash {text} NOT NULL,
            created_at {double} NOT NULL,
            updated_at {double} NOT NULL,
            PRIMARY KEY (project_id, tenant_id, case_id)
        )""",
        "CREATE INDEX cases_by_path ON cases (project_id, tenant_id, path, position)",
    )


def _v5(dialect: str) -> tuple[str, ...]:
    """Identity and access (docs/auth.md): projects, API keys (their SHA-256 hash, never the key), custom roles,
    role bindings and the append-only audit log. Lists and maps are JSON text; times are unix seconds. An
    install-wide role has the project "" and a binding in every project "*"."""
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, double = ("text", "double precision") if pg else ("TEXT", "REAL")
    # SQLite's INTEGER PRIMARY KEY is the rowid: increasing, without AUTOINCREMENT's extra sqlite_sequence table.
    audit_id = "bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY" if pg else "INTEGER PRIMARY KEY"
    return (
        f"""CREATE TABLE projects (
            project_id {key} PRIMARY KEY,
            tenant_id {text} NOT NULL DEFAULT '',
            description {text} NOT NULL DEFAULT '',
            labels {text} NOT NULL DEFAULT '{{}}',
            created_at {double} NOT NULL,
            created_by {text} NOT NULL DEFAULT ''
        )""",
        f"""CREATE TABLE api_keys (
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            name {key} NOT NULL,
            key_hash {text} NOT NULL UNIQUE,
            prefix {text} NOT NULL,
            roles {text} NOT NULL DEFAULT '[]',
            labels {text} NOT NULL DEFAULT '{{}}',
            expires_at {double},
            created_at {double} NOT NULL,
            created_by {text} NOT NULL DEFAULT '',
            revoked_at {double},
            last_used_at {double},
            PRIMARY KEY (project_id, tenant_id, name)
        )""",
        f"""CREATE TABLE roles (
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            name {key} NOT NULL,
            permissions {text} NOT NULL,
            inherits {text} NOT NULL DEFAULT '[]',
            condition {text} NOT NULL DEFAULT '',
            description {text} NOT NULL DEFAULT '',
            created_at {double} NOT NULL,
            updated_at {double} NOT NULL,
            created_by {text} NOT NULL DEFAULT '',
            PRIMARY KEY (project_id, name)
        )""",
        f"""CREATE TABLE role_bindings (
            binding_id {key} PRIMARY KEY,
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            role {key} NOT NULL,
            subject {key} NOT NULL,
            created_at {double} NOT NULL,
            created_by {text} NOT NULL DEFAULT '',
            UNIQUE (project_id, role, subject)
        )""",
        f"""CREATE TABLE audit_events (
            id {audit_id},
            event_time {double} NOT NULL,
            principal {key} NOT NULL,
            principal_kind {text} NOT NULL,
            action {key} NOT NULL,
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            resource {text} NOT NULL DEFAULT '',
            decision {key} NOT NULL,
            deciding {text} NOT NULL DEFAULT '',
            request_id {text} NOT NULL DEFAULT '',
            source {text} NOT NULL DEFAULT '',
            method {text} NOT NULL DEFAULT '',
            old_value {text},
            new_value {text}
        )""",
        "CREATE INDEX audit_events_by_time ON audit_events (event_time)",
        "CREATE INDEX audit_events_by_project ON audit_events (project_id, id)",
    )


def _v6(dialect: str) -> tuple[str, ...]:
    """Agent case reports (CaseService.UploadCaseReport): each report's canonical JSON by (project, tenant, id),
    the id a hash of the content, with what lists show beside it; its agents apart, for the agent filter."""
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, integer, bigint, double = (
        ("text", "integer", "bigint", "double precision") if pg else ("TEXT", "INTEGER", "INTEGER", "REAL")
    )
    return (
        f"""CREATE TABLE case_reports (
            project_id {key} NOT NULL,
            tenant_id {key} NOT NULL,
            report_id {key} NOT NULL,
            name {text} NOT NULL DEFAULT '',
            agents {text} NOT NULL,
            counts {text} NOT NULL,
            pass_rate {double},
            ci_low {double},
            ci_high {double},
            regressions {integer},
            simulated {integer} NOT NULL DEFAULT 0,
            uploaded_by {text} NOT NULL DEFAULT '',
            upload_us {bigint} NOT NULL,
            size_bytes {bigint} NOT NULL,
            document {text} NOT NULL,
            PRIMARY KEY (project_id, tenant_id, report_id)
        )""",
        "CREATE INDEX case_reports_by_time ON case_reports (project_id, tenant_id, upload_us DESC, report_id DESC)",
        f"""CREATE TABLE case_report_agents (
            project_id {key} NOT NULL,
            tenant_id {key} NOT NULL,
            report_id {key} NOT NULL,
            agent {key} NOT NULL,
            PRIMARY KEY (project_id, tenant_id, report_id, agent)
        )""",
    )


def _v7(dialect: str) -> tuple[str, ...]:
    """Alerts evalsi-policy fired (docs/policies.md): one row per (project, policy, alert key), the key naming the
    rule and the window, with the figures read and what became of the webhook."""
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, integer, double = ("text", "integer", "double precision") if pg else ("TEXT", "INTEGER", "REAL")
    return (
        f"""CREATE TABLE policy_alerts (
            project_id {key} NOT NULL,
            tenant_id {text} NOT NULL DEFAULT '',
            policy {key} NOT NULL,
            alert_key {key} NOT NULL,
            rule {integer} NOT NULL,
            rule_when {text} NOT NULL,
            window_start {double} NOT NULL,
            window_end {double} NOT NULL,
            figures {text} NOT NULL,
            fired_at {double} NOT NULL,
            delivery {text} NOT NULL,
            http_status {integer},
            error {text} NOT NULL DEFAULT '',
            attempts {integer} NOT NULL,
            notify {text} NOT NULL DEFAULT '',
            PRIMARY KEY (project_id, tenant_id, policy, alert_key)
        )""",
        "CREATE INDEX policy_alerts_by_window ON policy_alerts (project_id, policy, window_start DESC, alert_key DESC)",
    )


def _v8(dialect: str) -> tuple[str, ...]:
    """Packs per project set through the API (CatalogService.SetProjectPacks and SetPackAllowlist, docs/packs.md):
    the enabled packs and the allowlist, each a JSON list or NULL (NULL: what evalsi.yaml says)."""
    pg = dialect == "postgres"
    key = 'text COLLATE "C"' if pg else "TEXT"
    text, double = ("text", "double precision") if pg else ("TEXT", "REAL")
    return (
        f"""CREATE TABLE project_packs (
            project_id {key} PRIMARY KEY,
            tenant_id {text} NOT NULL DEFAULT '',
            packs {text},
            allowed_packs {text},
            updated_at {double} NOT NULL,
            updated_by {text} NOT NULL DEFAULT ''
        )""",
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "runs, results, tasks, leases", sqlite=_v1("sqlite"), postgres=_v1("postgres")),
    Migration(2, "usage of each task", sqlite=_v2("sqlite"), postgres=_v2("postgres")),
    Migration(3, "online policies", sqlite=_v3("sqlite"), postgres=_v3("postgres")),
    Migration(4, "agent cases", sqlite=_v4("sqlite"), postgres=_v4("postgres")),
    Migration(5, "projects, API keys, roles, bindings, audit log", sqlite=_v5("sqlite"), postgres=_v5("postgres")),
    Migration(6, "agent case reports", sqlite=_v6("sqlite"), postgres=_v6("postgres")),
    Migration(7, "alerts fired by online policies", sqlite=_v7("sqlite"), postgres=_v7("postgres")),
    Migration(8, "packs per project", sqlite=_v8("sqlite"), postgres=_v8("postgres")),
)
LATEST_VERSION = MIGRATIONS[-1].version

_CREATE_TABLE = {
    "sqlite": """CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)""",
    "postgres": """CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())""",
}


def _pending(applied: set[int], where: str, migrations: tuple[Migration, ...]) -> list[Migration]:
    latest = max(m.version for m in migrations)
    if applied and max(applied) > latest:
        raise InfraError(
            f"{where}: the schema is at version {max(applied)}, newer than this evalsi knows "
            f"({latest}); upgrade evalsi before opening this database"
        )
    return [m for m in migrations if m.version not in applied]


def migrate_sqlite(
    conn: sqlite3.Connection, *, where: str, migrations: tuple[Migration, ...] = MIGRATIONS
) -> list[int]:
    """Apply the pending migrations in one transaction; returns the versions applied (none on a current schema).

    ``conn`` must be in autocommit mode (``isolation_level=None``) so the explicit transaction is the only one.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_CREATE_TABLE["sqlite"])
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        todo = _pending(applied, where, migrations)
        for migration in todo:
            for statement in migration.sqlite:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (migration.version, migration.name)
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return [m.version for m in todo]


async def migrate_postgres(
    conn: asyncpg.Connection, *, where: str, migrations: tuple[Migration, ...] = MIGRATIONS
) -> list[int]:
    """Apply the pending migrations, each in its own transaction, holding the migrations advisory lock."""
    await conn.execute("SELECT pg_advisory_lock($1)", ADVISORY_LOCK_KEY)
    try:
        await conn.execute(_CREATE_TABLE["postgres"])
        applied = {row[0] for row in await conn.fetch("SELECT version FROM schema_migrations")}
        todo = _pending(applied, where, migrations)
        for migration in todo:
            async with conn.transaction():
                for statement in migration.postgres:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", migration.version, migration.name
                )
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", ADVISORY_LOCK_KEY)
    return [m.version for m in todo]
