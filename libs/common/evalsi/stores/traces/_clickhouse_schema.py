"""The ClickHouse trace store's schema: its versioned migrations and the column layouts its writes use.

Written to what ClickHouse 18.16 accepts: neither TTL, DateTime64 nor LowCardinality (retention, when it comes, is
a scheduled ``ALTER TABLE ... DELETE``).
"""

from __future__ import annotations

import time
from typing import Any

from evalsi.errors import InfraError

from .query import FEEDBACK_COLUMNS, SCORE_COLUMNS, TRACE_COLUMNS

MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE IF NOT EXISTS spans (
            project_id String, tenant_id String, trace_id String, span_id String, parent_span_id String,
            name String, service_name String, session_id String, mapper String, scope String,
            start_ns UInt64, end_ns UInt64, start_time DateTime MATERIALIZED toDateTime(intDiv(start_ns, 1000000000)),
            error UInt8, step_type Int32, input_tokens UInt64, output_tokens UInt64, step String, resource String,
            received_at Float64, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        PARTITION BY toYYYYMMDD(start_time)
        ORDER BY (project_id, tenant_id, trace_id, span_id)""",
        """CREATE TABLE IF NOT EXISTS traces (
            project_id String, tenant_id String, trace_id String, root_span_id String, root_name String,
            service_name String, session_id String, start_ns UInt64, end_ns UInt64, span_count UInt64,
            error_count UInt64, input_tokens UInt64, output_tokens UInt64, revision UInt64, updated_at Float64,
            completed_at Nullable(Float64), completions UInt64, first_seen DateTime, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        PARTITION BY toYYYYMMDD(first_seen)
        ORDER BY (project_id, tenant_id, trace_id)""",
    )),
    (2, (
        # The newest trace revision wins FINAL: a re-evaluation after late spans replaces the trace's scores.
        """CREATE TABLE IF NOT EXISTS online_scores (
            project_id String, tenant_id String, trace_id String, policy String, metric String, revision UInt64,
            stage String, evaluator String, outcome String, value Nullable(Float64), passed Nullable(UInt8),
            label String, reason String, scored_at Float64
        ) ENGINE = ReplacingMergeTree(revision)
        ORDER BY (project_id, tenant_id, trace_id, policy, metric)""",
        """CREATE TABLE IF NOT EXISTS feedback (
            project_id String, tenant_id String, id String, trace_id String, session_id String, name String,
            value Nullable(Float64), label String, comment String, source String, negative UInt8,
            created_at Float64, version UInt64
        ) ENGINE = ReplacingMergeTree(version)
        ORDER BY (project_id, tenant_id, id)""",
    )),
    # A span's OTLP bytes beside its step (query.OTLP_COLUMN); empty in rows written before.
    (3, ("ALTER TABLE spans ADD COLUMN otlp String DEFAULT ''",)),
)
SCORE_ROW = ("project_id", "tenant_id", *SCORE_COLUMNS)
FEEDBACK_ROW = ("project_id", "tenant_id", *FEEDBACK_COLUMNS, "version")

SPAN_COLUMNS = ("project_id", "tenant_id", "trace_id", "span_id", "parent_span_id", "name", "service_name",
                "session_id", "mapper", "scope", "start_ns", "end_ns", "error", "step_type", "input_tokens",
                "output_tokens", "step", "resource", "received_at", "otlp", "version")
VERSION, TRACE_ID = SPAN_COLUMNS.index("version"), SPAN_COLUMNS.index("trace_id")
# The span columns a trace summary is made of, in the order ``summaries.sums`` reads its rows.
SUMMARY_SOURCE = tuple(SPAN_COLUMNS.index(name) for name in (
    "trace_id", "span_id", "parent_span_id", "name", "service_name", "session_id", "start_ns", "end_ns", "error",
    "input_tokens", "output_tokens"))
TRACE_ROW = ("project_id", "tenant_id", *TRACE_COLUMNS, "first_seen", "version")


def migrate(client: Any, where: str) -> None:
    """Bring the database ``client`` is on to the newest schema version; refuse one newer than this code knows."""
    client.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version UInt32, applied_at DateTime) "
                   "ENGINE = MergeTree ORDER BY version")
    current = client.execute("SELECT max(version) FROM schema_migrations")[0][0] or 0
    latest = MIGRATIONS[-1][0]
    if current > latest:
        raise InfraError(f"{where}: schema version {current} is newer than this evalsi knows ({latest}); upgrade")
    for version, statements in MIGRATIONS:
        if version > current:
            for sql in statements:
                client.execute(sql)
            client.execute("INSERT INTO schema_migrations (version, applied_at) VALUES",
                           [{"version": version, "applied_at": int(time.time())}], types_check=True)
