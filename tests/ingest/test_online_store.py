"""Online scores and late signals in the trace store, run against SQLite and ClickHouse: keys, revisions,
filters and project isolation."""

from __future__ import annotations

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.errors import BadInputError
from evalsi.ingest import map_span
from evalsi.stores.traces import ClickHouseTraceStore, SqliteTraceStore
from evalsi.traces import Feedback, OnlineScore

Store = SqliteTraceStore | ClickHouseTraceStore
T1, T2 = "ab" * 16, "cd" * 16


def _score(trace: str, revision: int, metric: str, value: float | None, at: float, *, policy: str = "support",
           outcome: str = "scored", reason: str = "", passed: bool | None = None) -> OnlineScore:
    return OnlineScore(trace_id=trace, revision=revision, policy=policy, stage=metric.split(".")[0], metric=metric,
                       evaluator=f"builtin/{metric}@1.0.0", outcome=outcome, value=value, passed=passed,
                       reason=reason, scored_at=at)


async def test_scores_upsert_by_trace_policy_metric_and_newest_revision_wins(trace_store: Store) -> None:
    await trace_store.put_scores("p", [
        _score(T1, 1, "exact-match", 1.0, 10.0, passed=True),
        _score(T1, 1, "length", 42.0, 10.0),
        _score(T2, 3, "exact-match", None, 11.0, outcome="skipped", reason="no content: the trace has no output"),
    ])
    # A redelivery of the same revision, then a re-evaluation after a late span (revision 2), then a stale
    # revision arriving last: one row per (trace, policy, metric), the newest revision's.
    await trace_store.put_scores("p", [_score(T1, 1, "exact-match", 1.0, 10.0, passed=True)])
    await trace_store.put_scores("p", [_score(T1, 2, "exact-match", 0.0, 20.0, passed=False)])
    await trace_store.put_scores("p", [_score(T1, 1, "exact-match", 1.0, 30.0, passed=True)])
    scores = await trace_store.list_scores("p")
    assert [(s.trace_id, s.metric, s.revision, s.value, s.passed) for s in scores] == [
        (T1, "length", 1, 42.0, None), (T2, "exact-match", 3, None, None), (T1, "exact-match", 2, 0.0, False),
    ]
    skipped = next(s for s in scores if s.outcome == "skipped")
    assert skipped.reason.startswith("no content") and skipped.evaluator == "builtin/exact-match@1.0.0"
    assert [s.metric for s in await trace_store.list_scores("p", trace_id=T1.upper())] == ["length", "exact-match"]
    assert [s.trace_id for s in await trace_store.list_scores("p", since=10.5, until=15.0)] == [T2]
    assert await trace_store.list_scores("p", policy="other") == []
    assert await trace_store.list_scores("q") == []


async def test_feedback_joins_by_trace_or_session(trace_store: Store) -> None:
    items = [
        Feedback(id="f1", trace_id=T1, session_id="", name="thumbs", value=-1, negative=True, created_at=1.0),
        Feedback(id="f2", trace_id="", session_id="s-9", name="label", label="refund", source="support",
                 created_at=2.0),
        Feedback(id="f3", trace_id=T2, session_id="", name="rating", value=4, created_at=3.0),
    ]
    await trace_store.put_feedback("p", items)
    await trace_store.put_feedback("p", [Feedback(id="f1", trace_id=T1, session_id="", name="thumbs", value=1,
                                                  comment="changed my mind", created_at=4.0)])
    joined = await trace_store.list_feedback("p", trace_id=T1, session_id="s-9")
    assert [(f.id, f.value, f.negative, f.label) for f in joined] == [("f2", None, False, "refund"),
                                                                     ("f1", 1.0, False, "")]
    assert [f.id for f in await trace_store.list_feedback("p", trace_id=T2)] == ["f3"]
    assert await trace_store.list_feedback("other", trace_id=T1) == []


def test_feedback_check_names_the_field() -> None:
    with pytest.raises(BadInputError, match="trace_id or a session_id"):
        Feedback(id="", trace_id="", session_id="", name="thumbs", value=1).check()
    with pytest.raises(BadInputError, match=r"feedback\.trace_id 'xyz'"):
        Feedback(id="", trace_id="xyz", session_id="", name="thumbs", value=1).check()
    with pytest.raises(BadInputError, match="a value"):
        Feedback(id="", trace_id=T1, session_id="", name="thumbs").check()
    with pytest.raises(ValueError, match="outcome"):
        _score(T1, 1, "m", 1.0, 1.0, outcome="great")


async def test_list_traces_filters_on_score_thresholds(trace_store: Store) -> None:
    for byte in (1, 2, 3):
        span = Span(trace_id=bytes([byte]) * 16, span_id=b"\x00" * 7 + b"\x01", name="root",
                    start_time_unix_nano=byte * 1000, end_time_unix_nano=byte * 1000 + 10)
        await trace_store.consume("p", [map_span(span, {})])
    await trace_store.put_scores("p", [
        _score("01" * 16, 1, "judge", 0.2, 1.0), _score("02" * 16, 1, "judge", 0.9, 1.0),
        _score("03" * 16, 1, "judge", None, 1.0, outcome="skipped", reason="no content"),
        _score("03" * 16, 1, "other", 0.1, 1.0),
    ])
    low = await trace_store.list_traces("p", score_metric="judge", max_score=0.5)
    assert [t.trace_id for t in low.traces] == ["01" * 16]
    scored = await trace_store.list_traces("p", score_metric="judge")
    assert [t.trace_id for t in scored.traces] == ["02" * 16, "01" * 16]
    assert (await trace_store.list_traces("p", score_metric="judge", min_score=0.95)).traces == []
