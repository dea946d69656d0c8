"""Trace labels in both stores (SQLite and ClickHouse): read from the spans' resources (``evalsi.label.<key>``),
merged over a trace's resources, and filtered on exactly (no prefix, suffix or substring of a key or value)."""

from __future__ import annotations

from ingest_helpers import make_span

from evalsi.ingest import map_span
from evalsi.stores.traces import ClickHouseTraceStore, SqliteTraceStore

Store = SqliteTraceStore | ClickHouseTraceStore


def _trace(trace_byte: int, start: int, resource: dict[str, object]) -> list:
    trace_id = bytes([trace_byte]) * 16
    root = make_span({"gen_ai.operation.name": "invoke_agent"}, span_id=1, trace_id=trace_id, start=start,
                     end=start + 100)
    return [map_span(root, {"service.name": "shop", **resource})]


async def test_labels_are_read_from_resources_and_filtered_exactly(trace_store: Store) -> None:
    await trace_store.consume("p", _trace(1, 1000, {"evalsi.label.app": "checkout", "evalsi.label.tier": "gold"}))
    await trace_store.consume("p", _trace(2, 2000, {"evalsi.label.app": "checkout2"}))
    await trace_store.consume("p", _trace(3, 3000, {"my.evalsi.label.app": "checkout", "note": "app: checkout"}))
    await trace_store.consume("p", _trace(4, 4000, {"evalsi.label.app": "search", "evalsi.label.n": 3}))
    # A second resource of trace 4 adds a label (spans of one trace from two processes).
    second = make_span({"gen_ai.operation.name": "chat"}, span_id=2, parent=1, trace_id=bytes([4]) * 16,
                       start=4001, end=4050)
    await trace_store.consume("p", [map_span(second, {"service.name": "shop", "evalsi.label.team": "a"})])
    await trace_store.consume("other", _trace(5, 5000, {"evalsi.label.app": "checkout"}))

    ids = {i: (bytes([i]) * 16).hex() for i in range(1, 6)}
    labels = await trace_store.trace_labels("p", list(ids.values()))
    assert labels == {ids[1]: {"app": "checkout", "tier": "gold"}, ids[2]: {"app": "checkout2"},
                      ids[4]: {"app": "search", "team": "a"}}  # a non-string value under the prefix is no label

    async def traces(labels: dict[str, str]) -> list[str]:
        return [t.trace_id for t in (await trace_store.list_traces("p", labels=labels)).traces]

    assert await traces({"app": "checkout"}) == [ids[1]]
    assert await traces({"app": "checkout", "tier": "gold"}) == [ids[1]]
    assert await traces({"app": "checkout", "tier": "silver"}) == []
    assert await traces({"app": "search", "team": "a"}) == [ids[4]]  # labels of two resources of one trace
    assert await traces({"n": "3"}) == []
    assert await traces({}) == [ids[4], ids[3], ids[2], ids[1]]
    # Combined with the other filters and paging.
    first = await trace_store.list_traces("p", labels={"app": "checkout"}, since_ns=500, limit=1)
    assert [t.trace_id for t in first.traces] == [ids[1]] and first.next_page_token == ""
