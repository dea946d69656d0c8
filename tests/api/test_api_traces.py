"""TraceService over both transports on a real SQLite trace store, the client's ``traces`` and ``evalsi traces``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_doubles import Api
from click.testing import CliRunner
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

from evalsi.api import ApiServer, ServerConfig, TraceHandlers, build_table
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError
from evalsi.api.trace_handlers import span_tree
from evalsi.cli.main import cli
from evalsi.cli.traces_cmd import parse_since
from evalsi.client import Client
from evalsi.errors import BadInputError
from evalsi.ingest import ExportHandler
from evalsi.stores.traces import SqliteTraceStore
from evalsi.v1alpha1.record_pb2 import Record, Step
from evalsi.v1alpha1.trace_service_pb2 import GetTraceRequest, ListTracesRequest

BASE_NS = 1_700_000_000 * 1_000_000_000


def _kv(attrs: dict) -> list[KeyValue]:
    out = []
    for key, value in attrs.items():
        any_value = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        out.append(KeyValue(key=key, value=any_value))
    return out


def _span(trace: int, span: int, parent: int | None, name: str, start_s: int, attrs: dict, error: bool = False) -> Span:
    result = Span(
        trace_id=bytes([trace]) * 16, span_id=span.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"", name=name,
        start_time_unix_nano=BASE_NS + start_s * 1_000_000_000,
        end_time_unix_nano=BASE_NS + (start_s + 2) * 1_000_000_000,
        attributes=_kv(attrs),
    )
    if error:
        result.status.code = Status.STATUS_CODE_ERROR
        result.status.message = "tool exploded"
    return result


def _trace(trace: int, start_s: int, service: str, *, error: bool = False, app: str = "") -> ResourceSpans:
    rs = ResourceSpans()
    rs.resource.attributes.extend(_kv({"service.name": service, **({"evalsi.label.app": app} if app else {})}))
    scope = rs.scope_spans.add()
    scope.spans.extend([
        _span(trace, 1, None, "agent", start_s, {"gen_ai.operation.name": "invoke_agent"}),
        _span(trace, 2, 1, "chat gpt-4o", start_s, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 12, "gen_ai.usage.output_tokens": 5}),
        _span(trace, 3, 1, "execute_tool search", start_s, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}, error=error),
        _span(trace, 4, 3, "http get", start_s, {"http.method": "GET"}),
    ])
    return rs


def trace_id(n: int) -> str:
    return (bytes([n]) * 16).hex()


@pytest.fixture
async def traces_api(api: Api, tmp_path: Path) -> AsyncIterator[tuple[Api, ApiServer]]:
    store = await SqliteTraceStore.open(tmp_path / "traces.db")
    handler = ExportHandler(store)
    await handler.export(ExportTraceServiceRequest(resource_spans=[
        _trace(1, 0, "shop", app="checkout"), _trace(2, 60, "shop", error=True), _trace(3, 120, "blog", app="blog"),
    ]))
    await handler.export(ExportTraceServiceRequest(resource_spans=[_trace(4, 10, "shop")]), "other")
    table = build_table(evaluation=api.evaluation, runs=api.runs, catalog=api.catalog, traces=TraceHandlers(store))
    server = ApiServer(table, ServerConfig(http_port=0, grpc_port=0, grace_period_s=1.0), readiness=api.readiness,
                       metrics=api.metrics)
    await server.start()
    yield api, server
    await server.stop()
    await store.close()


def _urls(server: ApiServer) -> list[str]:
    return [f"http://127.0.0.1:{server.http_port}", f"grpc://127.0.0.1:{server.grpc_port}"]


async def test_list_and_get_over_both_transports(traces_api: tuple[Api, ApiServer]) -> None:
    _, server = traces_api

    def calls(url: str) -> None:
        with Client(url) as client:
            assert [t.trace_id for t in client.traces.list(page_size=2)] == [trace_id(3), trace_id(2), trace_id(1)]
            assert [t.trace_id for t in client.traces.list(has_error=True)] == [trace_id(2)]
            assert [t.trace_id for t in client.traces.list(has_error=False)] == [trace_id(3), trace_id(1)]
            assert [t.trace_id for t in client.traces.list(service="blog")] == [trace_id(3)]
            assert [t.trace_id for t in client.traces.list(labels=["app=checkout"])] == [trace_id(1)]
            with pytest.raises(BadInputError, match=r"labels\[1\]: label 'app' is given twice"):
                list(client.traces.list(labels=["app=blog", "app=checkout"]))
            since = datetime.fromtimestamp(BASE_NS / 1e9 + 30, UTC)
            until = datetime.fromtimestamp(BASE_NS / 1e9 + 100, UTC)
            assert [t.trace_id for t in client.traces.list(since=since, until=until)] == [trace_id(2)]
            (summary,) = [t for t in client.traces.list() if t.trace_id == trace_id(1)]
            assert (summary.project, summary.root_name, summary.span_count, summary.input_tokens) == (
                "default", "agent", 4, 12)
            assert summary.duration.ToSeconds() == 2
            trace = client.traces.get(trace_id(2).upper())
            assert trace.summary.error_count == 1 and len(trace.record.trajectory.steps) == 4
            steps = trace.record.trajectory.steps
            shape = [(n.depth, steps[n.step_index].name) for n in trace.tree]
            assert shape[0] == (0, "agent") and (2, "http get") in shape
            assert shape.index((2, "http get")) == shape.index((1, "execute_tool search")) + 1
            with pytest.raises(BadInputError, match="not found in project 'default'"):
                client.traces.get(trace_id(4))  # another project's trace
            with pytest.raises(BadInputError, match="trace_id"):
                client.traces.get("nope")
        with Client(url, project="other") as client:
            assert [t.trace_id for t in client.traces.list()] == [trace_id(4)]

    for url in _urls(server):
        await asyncio.to_thread(calls, url)


async def test_score_filters_reserved_and_no_store_precondition(traces_api: tuple[Api, ApiServer]) -> None:
    _, server = traces_api
    store_handlers = TraceHandlers(None)
    ctx = CallContext(method="ListTraces", request_id="r")
    with pytest.raises(ApiError, match="no trace store is configured") as caught:
        await store_handlers.list_traces(ListTracesRequest(), ctx)
    assert caught.value.code.name == "FAILED_PRECONDITION"
    with pytest.raises(ApiError, match="--traces-url"):
        await store_handlers.get_trace(GetTraceRequest(trace_id=trace_id(1)), ctx)

    def bad(url: str) -> None:
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as http_error:
            urllib.request.urlopen(f"{url}/v1alpha1/traces?min_score=0.5")
        assert http_error.value.code == 400 and b"min_score" in http_error.value.read()

    await asyncio.to_thread(bad, _urls(server)[0])


async def test_without_a_store_trace_service_says_so(api: Api) -> None:
    await api.start()

    def call() -> None:
        import urllib.error
        import urllib.request

        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{api.http}/v1alpha1/traces")
        body = json.loads(caught.value.read())
        assert caught.value.code == 400 and "no trace store is configured" in body["message"]
        with Client(f"grpc://{api.grpc_target}") as client, pytest.raises(BadInputError, match="--traces-url"):
            client.traces.get(trace_id(1))

    await asyncio.to_thread(call)


def test_span_tree_orphans_and_order() -> None:
    record = Record()
    steps = record.trajectory.steps
    steps.append(Step(span_id="a", name="root"))
    steps.append(Step(span_id="b", parent_id="a", name="child"))
    steps.append(Step(span_id="c", parent_id="zz", name="orphan"))
    steps.append(Step(span_id="d", parent_id="b", name="grandchild"))
    steps.append(Step(span_id="e", parent_id="a", name="second child"))
    nodes = span_tree(record)
    assert [(n.span_id, n.depth) for n in nodes] == [("a", 0), ("b", 1), ("d", 2), ("e", 1), ("c", 0)]
    assert nodes[-1].orphan and nodes[0].child_count == 2


async def test_cli_traces_list_and_get(traces_api: tuple[Api, ApiServer]) -> None:
    _, server = traces_api
    url = _urls(server)[0]
    runner = CliRunner()

    def invoke(*args: str):  # type: ignore[no-untyped-def]
        return runner.invoke(cli, list(args), catch_exceptions=False)

    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--format", "json", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert [t["traceId"] for t in json.loads(result.output)] == [trace_id(3), trace_id(2)]
    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--errors-only", "--service", "shop")
    assert result.exit_code == 0 and trace_id(2) in result.output and trace_id(1) not in result.output
    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--label", "app=blog",
                                     "--format", "json")
    assert result.exit_code == 0 and [t["traceId"] for t in json.loads(result.output)] == [trace_id(3)]
    assert json.loads(result.output)[0]["labels"] == {"app": "blog"}
    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--label", "app")
    assert result.exit_code == 2 and "labels[0]" in result.output
    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--since", "2023-11-14T22:14:00Z")
    assert result.exit_code == 0 and trace_id(3) in result.output and trace_id(1) not in result.output
    result = await asyncio.to_thread(invoke, "traces", "get", trace_id(2), "--server", url)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"trace {trace_id(2)}")
    assert any(line.startswith("agent") for line in lines)
    assert any("llm" in line and "model=gpt-4o" in line and "tokens=12/5" in line for line in lines)
    assert any("tool=search" in line and "[error]" in line for line in lines)
    assert any(line.startswith("    └─ generic") and "http get" in line for line in lines)
    result = await asyncio.to_thread(invoke, "traces", "get", trace_id(2), "--server", url, "--format", "json")
    assert json.loads(result.output)["summary"]["traceId"] == trace_id(2)
    result = await asyncio.to_thread(invoke, "traces", "get", trace_id(9), "--server", url)
    assert result.exit_code == 2 and "not found" in result.output
    assert "hint: choose the project with --project NAME or EVALSI_PROJECT=NAME" in result.output
    result = await asyncio.to_thread(invoke, "traces", "list", "--server", url, "--since", "yesterday")
    assert result.exit_code == 2 and "--since" in result.output


def test_parse_since() -> None:
    now = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
    assert parse_since("2h", now) == datetime(2025, 1, 31, 10, 0, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2025, 1, 24, 12, 0, tzinfo=UTC)
    assert parse_since("2025-01-30T08:00") == datetime(2025, 1, 30, 8, 0, tzinfo=UTC)


def test_api_settings_take_traces_url(tmp_path: Path) -> None:
    from evalsi_api.main import parse_settings

    assert parse_settings([], environ={}).traces_url == ""
    settings = parse_settings(["--traces-url", f"sqlite:///{tmp_path}/t.db"], environ={})
    assert settings.traces_url.endswith("t.db")
    assert parse_settings([], environ={"EVALSI_TRACES_URL": "sqlite:///x.db"}).traces_url == "sqlite:///x.db"
    bad = parse_settings(["--traces-url", "clickhouse://h", "--datasets-dir", str(tmp_path)], environ={})
    with pytest.raises(BadInputError, match="--traces-url"):
        bad.validate()
