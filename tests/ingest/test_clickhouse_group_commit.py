"""Group commit in the ClickHouse trace store: ``consume`` calls made while a write runs share the next insert,
each returns only once its spans are written, and a failed shared write fails every caller. Summaries follow in
passes at most an interval apart, which reads through the same store wait for."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator

import pytest
from ingest_helpers import make_span

from evalsi.errors import InfraError
from evalsi.ingest import map_span
from evalsi.stores.traces import ClickHouseTraceStore
from evalsi.testing.services import ClickHouseServer
from evalsi.traces import MappedSpan

_databases = itertools.count(1)
TRACE = bytes([7]) * 16
OTHER = bytes([8]) * 16


@pytest.fixture
async def store(clickhouse_server: ClickHouseServer) -> AsyncIterator[ClickHouseTraceStore]:
    store = await ClickHouseTraceStore.open(clickhouse_server.url_for(f"group_commit_{next(_databases)}"))
    yield store
    await store.close()


def _span(trace_id: bytes, span_id: int, parent: int | None = None) -> MappedSpan:
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 1}
    return map_span(make_span(attrs, span_id=span_id, parent=parent, trace_id=trace_id, start=1000 + span_id,
                              end=2000), {"service.name": "svc"})


async def test_concurrent_consumes_share_one_write_and_all_become_readable(store: ClickHouseTraceStore) -> None:
    root = _span(TRACE, 1)
    children = [_span(TRACE, i, parent=1) for i in range(2, 5)]
    other = _span(OTHER, 1)
    # Every call is queued before the first write starts (gather runs them in turn up to their await), so they
    # are written together: one summary per trace, at revision 1, made from all the merged batches.
    await asyncio.gather(store.consume("p", [root]), *(store.consume("p", [child]) for child in children),
                         store.consume("q", [other]))
    summary = await store.get_summary("p", root.trace_id)
    assert summary is not None
    assert (summary.revision, summary.span_count, summary.root_span_id) == (1, 4, root.span_id)
    assert (summary.input_tokens, summary.output_tokens) == (12, 4)
    record = await store.get_trace("p", root.trace_id)
    assert record is not None and len(record.trajectory.steps) == 4
    other_summary = await store.get_summary("q", other.trace_id)
    assert other_summary is not None and (other_summary.revision, other_summary.span_count) == (1, 1)
    assert await store.get_summary("q", root.trace_id) is None  # each project summarized on its own

    await store.consume("p", [_span(TRACE, 5, parent=1)])  # alone: a write of its own, the next revision
    summary = await store.get_summary("p", root.trace_id)
    assert summary is not None and (summary.revision, summary.span_count) == (2, 5)


async def test_a_failed_shared_write_fails_every_caller(store: ClickHouseTraceStore) -> None:
    from clickhouse_driver import Client

    # A real server error, deterministically: the spans table is gone when the shared insert runs.
    admin = Client(store.host, port=store.port, database=store.database)
    try:
        admin.execute("DROP TABLE spans")
    finally:
        admin.disconnect()
    results = await asyncio.gather(*(store.consume("p", [_span(TRACE, i)]) for i in range(1, 4)),
                                   return_exceptions=True)
    assert len(results) == 3
    for result in results:
        assert isinstance(result, InfraError) and "spans" in str(result)
    with pytest.raises(InfraError):  # and the store goes on answering, a write at a time
        await store.consume("p", [_span(TRACE, 9)])


async def test_summaries_follow_within_the_interval_and_reads_here_see_them_at_once(
        clickhouse_server: ClickHouseServer) -> None:
    url = clickhouse_server.url_for(f"group_commit_{next(_databases)}")
    # No lingering, and an interval long enough on a loaded machine: the two writes and the first reads must
    # land within one summary interval.
    writer = await ClickHouseTraceStore.open(url, summary_interval_s=1.5, span_linger_s=0)
    reader = await ClickHouseTraceStore.open(url)
    try:
        root = _span(TRACE, 1)
        await writer.consume("p", [root])
        await writer.consume("p", [_span(TRACE, 2, parent=1)])
        assert await reader.get_trace("p", root.trace_id) is not None  # spans are readable once consume returns
        provisional = await reader.get_summary("p", root.trace_id)  # summed from the spans: no summary yet
        assert provisional is not None and (provisional.revision, provisional.span_count) == (0, 2)
        assert (await reader.list_traces("p")).traces == []  # listing waits for the next pass ...
        await asyncio.sleep(2.5)  # ... which runs by itself, with no more spans to carry it
        summary = await reader.get_summary("p", root.trace_id)
        assert summary is not None and (summary.revision, summary.span_count) == (1, 2)  # one pass, both batches
        assert [trace.trace_id for trace in (await reader.list_traces("p")).traces] == [root.trace_id]

        await writer.consume("p", [_span(TRACE, 3, parent=1)])
        mine = await writer.get_summary("p", root.trace_id)  # a read through the writer writes what is pending
        assert mine is not None and (mine.revision, mine.span_count) == (2, 3)
    finally:
        await reader.close()
        await writer.close()


async def test_a_span_write_is_answered_before_a_due_summary_pass_runs(clickhouse_server: ClickHouseServer) -> None:
    # The pass is always due (interval 0), yet consume returns once the span insert alone is written: the pass's
    # read and insert go after the answer (and ahead of the next insert), not inside the write the caller waits on.
    store = await ClickHouseTraceStore.open(clickhouse_server.url_for(f"group_commit_{next(_databases)}"),
                                            summary_interval_s=0, span_linger_s=0)
    try:
        root = _span(TRACE, 1)
        await store.consume("p", [root])
        assert (store.writes.span_inserts, store.writes.summary_inserts) == (1, 0)
        await store.consume("p", [_span(TRACE, 2, parent=1)])
        assert store.writes.span_inserts == 2
        for _ in range(600):  # the pass still runs by itself, no read needed to carry it
            if store.writes.summary_inserts and not store._summaries.pending:
                break
            await asyncio.sleep(0.05)
        assert store.writes.summary_inserts >= 1 and not store._summaries.pending
        summary = await store.get_summary("p", root.trace_id)
        assert summary is not None and summary.span_count == 2
    finally:
        await store.close()


async def test_a_span_write_does_not_queue_behind_a_summary_pass(clickhouse_server: ClickHouseServer) -> None:
    # Summary passes and completions have their own client and thread: with that thread held (a slow pass on a
    # busy server), spans are still written and answered; the summary follows once the thread is free.
    store = await ClickHouseTraceStore.open(clickhouse_server.url_for(f"group_commit_{next(_databases)}"),
                                            summary_interval_s=0, span_linger_s=0)
    held = threading.Event()
    try:
        store._summary_executor.submit(held.wait, 60)
        root = _span(TRACE, 1)
        await asyncio.wait_for(store.consume("p", [root]), 30)
        await asyncio.wait_for(store.consume("p", [_span(TRACE, 2, parent=1)]), 30)
        assert (store.writes.span_inserts, store.writes.summary_inserts) == (2, 0)
        held.set()
        summary = await store.get_summary("p", root.trace_id)  # the pass before the read sums both writes
        assert summary is not None and (summary.revision, summary.span_count) == (1, 2)
    finally:
        held.set()
        await store.close()


async def test_a_failed_summary_pass_keeps_its_traces_for_the_next(clickhouse_server: ClickHouseServer) -> None:
    from clickhouse_driver import Client

    from evalsi.stores.traces.clickhouse import MIGRATIONS

    url = clickhouse_server.url_for(f"group_commit_{next(_databases)}")
    store = await ClickHouseTraceStore.open(url, summary_interval_s=60)
    admin = Client(store.host, port=store.port, database=store.database)
    try:
        admin.execute("DROP TABLE traces")
        root = _span(TRACE, 1)
        await store.consume("p", [root, _span(TRACE, 2, parent=1)])  # the spans are stored
        with pytest.raises(InfraError):  # the pass before the read fails: no traces table
            await store.get_summary("p", root.trace_id)
        admin.execute(next(sql for version, statements in MIGRATIONS for sql in statements
                           if "CREATE TABLE IF NOT EXISTS traces" in sql))
        summary = await store.get_summary("p", root.trace_id)
        assert summary is not None and summary.span_count == 2
    finally:
        admin.disconnect()
        await store.close()


async def test_a_pass_over_more_traces_than_one_query_can_name(store: ClickHouseTraceStore) -> None:
    # 8,000 trace ids are over 256 KiB of query text: the server's max_query_size, were they named in one IN list.
    traces = [(n + 1).to_bytes(16, "big") for n in range(8_000)]
    await store.consume("p", [_span(trace_id, 1) for trace_id in traces])
    ids = [trace_id.hex() for trace_id in traces]
    last = await store.get_summary("p", ids[-1])
    assert last is not None and last.span_count == 1
    counts = await store.mark_completed("p", ids)
    assert len(counts) == 8_000 and set(counts.values()) == {1}
    completed = await store.get_summary("p", ids[0])
    assert completed is not None and completed.completed_at is not None


async def test_a_completion_and_the_pending_summaries_go_in_one_insert(clickhouse_server: ClickHouseServer) -> None:
    url = clickhouse_server.url_for(f"group_commit_{next(_databases)}")
    store = await ClickHouseTraceStore.open(url, summary_interval_s=60, span_linger_s=0)
    try:
        root = _span(TRACE, 1)
        await store.consume("p", [root, _span(TRACE, 2, parent=1)])
        await store.consume("p", [_span(OTHER, 1)])
        assert store.writes.summary_inserts == 0  # no pass due yet
        counts = await store.mark_completed("p", [root.trace_id])
        assert counts == {root.trace_id: 2}
        assert store.writes.summary_inserts == 1  # the pending pass and the completion together
        completed = await store.get_summary("p", root.trace_id)
        assert completed is not None
        assert (completed.revision, completed.span_count, completed.completions) == (1, 2, 1)
        assert completed.completed_at is not None
        other = await store.get_summary("p", OTHER.hex())  # summarized in that pass, not completed
        assert other is not None and (other.revision, other.completed_at, other.completions) == (1, None, 0)

        await store.consume("p", [_span(TRACE, 3, parent=1)])  # a late span, completed again
        assert await store.mark_completed("p", [root.trace_id]) == {root.trace_id: 3}
        again = await store.get_summary("p", root.trace_id)
        assert again is not None and (again.revision, again.span_count, again.completions) == (2, 3, 2)
        assert await store.mark_completed("p", [bytes([9] * 16).hex()]) == {}  # nothing stored: no count
    finally:
        await store.close()


async def test_traces_whose_spans_it_wrote_itself_are_completed_without_reading_spans_back(
        clickhouse_server: ClickHouseServer) -> None:
    url = clickhouse_server.url_for(f"group_commit_{next(_databases)}")
    store = await ClickHouseTraceStore.open(url, summary_interval_s=60, span_linger_s=0)
    other = await ClickHouseTraceStore.open(url, summary_interval_s=60, span_linger_s=0)  # another process
    try:
        root = _span(TRACE, 1)
        await store.consume("p", [root, _span(TRACE, 2, parent=1)])
        await store._summaries_written()
        await store.consume("p", [_span(TRACE, 3, parent=1)])  # seen before: summed from what it knows
        assert await store.mark_completed("p", [root.trace_id], local=[root.trace_id]) == {root.trace_id: 3}
        assert store.writes.traces_read_back == 0

        # Another process stores a span of it and says so: not local, so read back, and the count has it.
        await other.consume("p", [_span(TRACE, 4, parent=1)])
        assert await store.mark_completed("p", [root.trace_id]) == {root.trace_id: 4}
        assert store.writes.traces_read_back == 1

        # Another process summarizes it after this one did: its row is the newest, so this store's rows are not
        # trusted even where the caller says local.
        await other.consume("p", [_span(TRACE, 5, parent=1)])
        await other._summaries_written()
        assert await store.mark_completed("p", [root.trace_id], local=[root.trace_id]) == {root.trace_id: 5}
        assert store.writes.traces_read_back == 2
        summary = await store.get_summary("p", root.trace_id)
        assert summary is not None and (summary.span_count, summary.completions) == (5, 3)
        assert (summary.input_tokens, summary.output_tokens) == (15, 5)
    finally:
        await other.close()
        await store.close()
