"""How the ClickHouse trace store names traces in its reads: hex trace ids are written into the ``IN`` list as they
are (no per-id escaping), in chunks under the server's query-size limit; any other id goes through the driver's
escaping, so an id that is not hex can neither break the query nor match another trace."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from ingest_helpers import make_span

from evalsi.ingest import map_span
from evalsi.stores.traces import ClickHouseTraceStore
from evalsi.testing.services import ClickHouseServer

_databases = itertools.count(1)
TRACES = 2_500  # more than one read's chunk of ids (2,000)


@pytest.fixture
async def store(clickhouse_server: ClickHouseServer) -> AsyncIterator[ClickHouseTraceStore]:
    store = await ClickHouseTraceStore.open(clickhouse_server.url_for(f"trace_ids_{next(_databases)}"))
    yield store
    await store.close()


async def test_summaries_of_more_traces_than_one_read_holds_and_ids_that_are_not_hex(
        store: ClickHouseTraceStore) -> None:
    spans = [map_span(make_span({"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": n},
                                trace_id=(n + 1).to_bytes(16, "big"), span_id=1), {"service.name": "svc"})
             for n in range(TRACES)]
    await store.consume("p", spans)
    # Completing them all reads their summaries back in two chunks (the hex path) and writes each once more.
    counts = await store.mark_completed("p", [span.trace_id for span in spans])
    assert len(counts) == TRACES and set(counts.values()) == {1}
    last = await store.get_summary("p", spans[-1].trace_id)
    assert last is not None and last.input_tokens == TRACES - 1 and last.completions == 1
    # Not hex: escaped by the driver, found nowhere, and no error.
    for hostile in ("x') OR ('1'='1", "zz", spans[0].trace_id + "'"):
        assert await store.get_summary("p", hostile) is None
    page = await store.list_traces("p", limit=5)
    assert len(page.traces) == 5 and all(summary.completions == 1 for summary in page.traces)
