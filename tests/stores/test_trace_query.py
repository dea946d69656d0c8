"""The trace stores' shared SQL (``stores/traces/query.py``): one statement per read, the same for SQLite and
ClickHouse but for the parameter style and ``FINAL``; the contract tests in tests/ingest run it on both servers."""

from __future__ import annotations

import itertools
import re

import pytest

from evalsi.errors import BadInputError
from evalsi.stores.traces.query import (
    CLICKHOUSE,
    MAX_PAGE,
    SQLITE,
    Query,
    TraceFilters,
    decode_token,
    encode_token,
    feedback_query,
    list_traces_query,
    scores_query,
)

SOME = TraceFilters(service="shop", session_id="s1", since_ns=-5, until_ns=10, has_error=True, completed=False,
                    score_metric="faithfulness", min_score=0.5, max_score=0.9)
FIELDS = ("service", "session_id", "since_ns", "until_ns", "has_error", "completed", "score_metric", "min_score",
          "max_score")


def as_sqlite(query: Query) -> tuple[str, tuple[object, ...]]:
    """A ClickHouse statement rewritten to ``?`` marks in placeholder order, without ``FINAL``."""
    bound = query.bound()
    assert isinstance(bound, dict)
    names = re.findall(r"%\((p\d+)\)s", query.sql)
    return re.sub(r"%\(p\d+\)s", "?", query.sql).replace(" FINAL", ""), tuple(bound[name] for name in names)


@pytest.mark.parametrize("chosen", [c for n in range(len(FIELDS) + 1) for c in itertools.combinations(FIELDS, n)
                                    if n <= 2 or n == len(FIELDS)])
@pytest.mark.parametrize("token", ["", encode_token(1_000, "ab" * 16)])
def test_both_dialects_bind_every_mark_to_the_same_value(chosen: tuple[str, ...], token: str) -> None:
    filters = TraceFilters(**{name: getattr(SOME, name) for name in chosen})
    sqlite = list_traces_query(SQLITE, "p", 20, token, filters)
    clickhouse = list_traces_query(CLICKHOUSE, "p", 20, token, filters)
    assert sqlite.sql.count("?") == len(sqlite.values)  # positional marks: a value used twice is bound twice
    if "score_metric" not in chosen:
        assert as_sqlite(clickhouse) == (sqlite.sql, sqlite.bound())
    else:  # SQLite probes each trace's scores (EXISTS); ClickHouse, without correlated subqueries, builds a set
        assert "EXISTS (SELECT 1 FROM online_scores s WHERE s.project_id = traces.project_id" in sqlite.sql
        assert "trace_id IN (SELECT trace_id FROM online_scores FINAL WHERE project_id = " in clickhouse.sql
        assert sorted(map(repr, as_sqlite(clickhouse)[1])) == sorted(map(repr, (*sqlite.bound(), "p", "")))
    assert "traces FINAL" in clickhouse.sql and "FINAL" not in sqlite.sql
    assert sqlite.bound()[-1] == 21  # one row more than the page, to know whether a next page exists


def test_times_below_the_epoch_bind_as_zero_and_filters_are_anded() -> None:
    query = list_traces_query(SQLITE, "p", 5, "", SOME)
    assert query.bound()[:2] == ("p", "")  # project and the reserved tenant first
    assert -5 not in query.bound() and 0 in query.bound()
    where = query.sql.split(" WHERE ", 1)[1].split(" ORDER BY ")[0]
    assert "error_count > 0" in where and "completed_at IS NULL" in where
    assert "online_scores" in where and "value >= ?" in where and "value <= ?" in where
    assert query.sql.endswith("ORDER BY start_ns DESC, trace_id LIMIT ?")


def test_page_tokens_round_trip_and_a_foreign_one_is_refused() -> None:
    assert decode_token(encode_token(123, "f" * 32)) == (123, "f" * 32)
    with pytest.raises(BadInputError, match="page_token"):
        list_traces_query(SQLITE, "p", 5, "not-a-token", TraceFilters())


@pytest.mark.parametrize("limit", [0, MAX_PAGE + 1])
def test_a_page_size_out_of_range_is_refused(limit: int) -> None:
    with pytest.raises(BadInputError, match=f"limit {limit}"):
        list_traces_query(CLICKHOUSE, "p", limit, "", TraceFilters())


def test_scores_and_feedback_filter_as_documented() -> None:
    scores = scores_query(SQLITE, "p", trace_id="AB" * 16, policy="pii", since=1.0, until=None)
    assert scores.bound() == ("p", "", "ab" * 16, "pii", 1.0)  # trace ids are matched lower-case
    assert "scored_at < ?" not in scores.sql
    either = feedback_query(SQLITE, "p", trace_id="ab" * 16, session_id="s1")
    assert "(trace_id = ? OR session_id = ?)" in either.sql
    assert " OR " not in feedback_query(SQLITE, "p", trace_id=None, session_id="s1").sql
