"""The trace-store contract, run against SQLite and ClickHouse: idempotent span upserts, revisions, project
isolation, listing and paging, completion, reopening and URLs."""

from __future__ import annotations

import pytest
from ingest_helpers import make_span

from evalsi.errors import BadInputError
from evalsi.ingest import map_span
from evalsi.records import from_value
from evalsi.stores.traces import ClickHouseTraceStore, SqliteTraceStore, open_trace_store
from evalsi.v1alpha1.record_pb2 import Step

Store = SqliteTraceStore | ClickHouseTraceStore


def _spans(trace_byte: int, start: int, *, error: bool = False, service: str = "svc") -> list:
    trace_id = bytes([trace_byte]) * 16
    root = make_span({"gen_ai.operation.name": "invoke_agent", "session.id": f"s{trace_byte}"}, span_id=1,
                     trace_id=trace_id, start=start, end=start + 100, error="bad" if error else None)
    chat = make_span({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5,
                      "gen_ai.usage.output_tokens": 2}, span_id=2, parent=1, trace_id=trace_id, start=start + 1,
                     end=start + 50)
    return [map_span(s, {"service.name": service}) for s in (root, chat)]


async def test_consume_get_and_idempotent_retry(trace_store: Store) -> None:
    root, chat = _spans(1, 1000)
    await trace_store.consume("p", [chat])
    (summary,) = (await trace_store.list_traces("p")).traces
    assert (summary.root_span_id, summary.span_count, summary.revision) == ("", 1, 1)
    await trace_store.consume("p", [root, chat])  # the chat span again, as an OTLP retry would send it
    (summary,) = (await trace_store.list_traces("p")).traces
    assert (summary.root_span_id, summary.span_count, summary.revision) == ("0000000000000001", 2, 2)
    assert (summary.input_tokens, summary.output_tokens, summary.session_id) == (5, 2, "s1")
    record = await trace_store.get_trace("p", root.trace_id)
    assert record is not None and len(record.trajectory.steps) == 2
    assert record.usage.input_tokens == 5 and record.provenance.project == "p"
    assert await trace_store.get_trace("other", root.trace_id) is None
    assert (await trace_store.list_traces("other")).traces == []


async def test_list_filters_and_pages(trace_store: Store) -> None:
    for i in range(1, 6):
        await trace_store.consume("p", _spans(i, i * 1000, error=i == 3, service="a" if i % 2 else "b"))
    page = await trace_store.list_traces("p", limit=2)
    assert [t.start_ns for t in page.traces] == [5000, 4000] and page.next_page_token
    page2 = await trace_store.list_traces("p", limit=2, page_token=page.next_page_token)
    page3 = await trace_store.list_traces("p", limit=2, page_token=page2.next_page_token)
    assert [t.start_ns for t in page2.traces + page3.traces] == [3000, 2000, 1000] and page3.next_page_token == ""
    assert [t.start_ns for t in (await trace_store.list_traces("p", has_error=True)).traces] == [3000]
    assert len((await trace_store.list_traces("p", has_error=False)).traces) == 4
    assert [t.start_ns for t in (await trace_store.list_traces("p", service="b")).traces] == [4000, 2000]
    window = await trace_store.list_traces("p", since_ns=2000, until_ns=4000)
    assert [t.start_ns for t in window.traces] == [3000, 2000]
    assert [t.session_id for t in (await trace_store.list_traces("p", session_id="s2")).traces] == ["s2"]
    trace_id = page.traces[0].trace_id
    assert await trace_store.mark_completed("p", [trace_id, "ff" * 16]) == {trace_id: 2}  # span counts; unknown: none
    (done,) = (await trace_store.list_traces("p", completed=True)).traces
    assert done.trace_id == trace_id and done.completions == 1 and done.completed_at is not None
    assert len((await trace_store.list_traces("p", completed=False)).traces) == 4
    with pytest.raises(BadInputError, match="limit"):
        await trace_store.list_traces("p", limit=0)
    with pytest.raises(BadInputError, match="page_token"):
        await trace_store.list_traces("p", page_token="!!")


async def test_reopen_keeps_data_and_urls_are_checked(trace_store_url: str) -> None:
    url = trace_store_url
    store = await open_trace_store(url)
    await store.consume("p", _spans(1, 1))
    await store.close()
    store = await open_trace_store(url)
    assert len((await store.list_traces("p")).traces) == 1
    await store.close()
    for bad in ("clickhouse://x", "clickhouse://x:9000/", "clickhouse://x:port/db", "clickhouse://x/a-b",
                "sqlite:///", "sqlite:///a.db?mode=ro", "postgres://x/db"):
        with pytest.raises(BadInputError, match="trace store URL"):
            await open_trace_store(bad)


async def test_two_writers_of_one_new_trace_are_summed_at_completion(trace_store: Store, trace_store_url: str) -> None:
    # Two replicas each store one span of a trace neither has seen: each may summarize only what it wrote.
    # Completion re-sums the stored spans, so the completed trace's summary counts both.
    other = await open_trace_store(trace_store_url)
    try:
        root, chat = _spans(7, 7000)
        await trace_store.consume("p", [root])
        await other.consume("p", [chat])
        assert await trace_store.mark_completed("p", [root.trace_id]) == {root.trace_id: 2}
        summary = await trace_store.get_summary("p", root.trace_id)
        assert summary is not None and summary.completions == 1 and summary.completed_at is not None
        assert (summary.span_count, summary.root_span_id, summary.input_tokens) == (2, root.span_id, 5)
    finally:
        await other.close()


async def test_a_stored_span_reads_back_as_it_was_mapped(trace_store: Store) -> None:
    """The step is stored without the span's attributes, kind, events and links (they travel as its OTLP bytes):
    read back, the whole step is what mapping gave, every kind of value included."""
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "text": "é ✓", "count": 3, "ratio": 0.5,
             "flag": True, "big": 2**60, "list": [1, "two", [False]], "map": {"k": {"deep": "v"}}, "raw": b"\x00\xff"}
    span = make_span(attrs, span_id=3, events=[("gen_ai.choice", {"message": '{"content": "hi"}'})])
    span.links.add(trace_id=b"\x05" * 16, span_id=b"\x06" * 8, attributes=make_span({"why": "retry"}).attributes)
    mapped = map_span(span, {"service.name": "svc"})
    expected = Step()
    expected.CopyFrom(mapped.step)
    await trace_store.consume("p", [map_span(span, {"service.name": "svc"})])
    (stored,) = await trace_store.get_spans("p", mapped.trace_id)
    assert stored.step == expected
    assert stored == mapped
    assert from_value(expected.attributes["big"]) == str(2**60) and from_value(expected.attributes["list"]) == [
        1, "two", [False]]
    assert from_value(expected.attributes["otel.links"])[0]["attributes"] == {"why": "retry"}
    assert (expected.start_time.ToNanoseconds(), expected.duration.ToNanoseconds()) == (1_000, 1_000)
    assert from_value(expected.attributes["evalsi.mapper"]) == "genai@1"
    assert from_value(expected.attributes["otel.span.kind"]) == "SPAN_KIND_UNSPECIFIED"
