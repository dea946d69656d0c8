"""Trace labels through a real ingest (OTLP/HTTP) and a real api (gRPC) behind one gate, on one SQLite trace store:
an ingest key with labels {app: checkout} stores them on its traces over what the resource says; an export labelled
outside the principal's ``traces.write`` condition is refused (403) and stores nothing; a role conditioned on
``resource.labels.app == "checkout"`` lists and reads only checkout traces."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.api import (
    ApiServer,
    CatalogHandlers,
    EvaluationHandlers,
    RunHandlers,
    ServerConfig,
    TraceHandlers,
    build_table,
)
from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.evaluators import Registry
from evalsi.gate.exposure import AccessSettings
from evalsi.ingest import ExportHandler, OtlpHttpReceiver, start_http_receiver
from evalsi.stores import open_metadata_store
from evalsi.stores.traces import SqliteTraceStore
from evalsi.v1alpha1.trace_service_pb2 import AddFeedbackRequest, GetTraceRequest, ListTracesRequest, TraceFeedback
from evalsi.v1alpha1.trace_service_pb2_grpc import TraceServiceStub

CHECKOUT = 'resource.labels.app == "checkout"'
# name: (roles in project p, the key's own labels)
KEYS: dict[str, tuple[list[str], dict[str, str]]] = {
    "checkout-ingest": (["ingest"], {"app": "checkout"}),  # labels forced onto whatever it sends
    "scoped-ingest": (["checkout-writer"], {}),  # may send only traces labelled app=checkout
    "collector": (["ingest"], {}),  # unconditioned: sends any label
    "checkout-reader": (["checkout-viewer"], {}),
    "lead": (["viewer"], {}),
}
RBAC = {"roles": [
    {"name": "checkout-writer", "permissions": ["traces.write"], "condition": CHECKOUT},
    {"name": "checkout-viewer", "permissions": ["traces.read"], "condition": CHECKOUT},
]}


@dataclass
class Served:
    api: ApiServer
    otlp_http: str
    traces: SqliteTraceStore
    secrets: dict[str, str]

    async def export(self, key: str, trace_byte: int, labels: dict[str, str] | None = None,
                     session: str = "") -> int:
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        for name, value in {"service.name": "shop", **{f"evalsi.label.{k}": v for k, v in (labels or {}).items()}
                            }.items():
            attribute = resource_spans.resource.attributes.add()
            attribute.key, attribute.value.string_value = name, value
        span = resource_spans.scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = bytes([trace_byte]) * 16, b"\x02" * 8, "buy"
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + trace_byte
        span.end_time_unix_nano = span.start_time_unix_nano + 1_000
        if session:
            attribute = span.attributes.add()
            attribute.key, attribute.value.string_value = "session.id", session
        headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {self.secrets[key]}",
                   "x-evalsi-project": "p"}
        async with aiohttp.ClientSession() as session, session.post(
                f"{self.otlp_http}/v1/traces", data=request.SerializeToString(), headers=headers) as response:
            return response.status

    async def call(self, method: str, request: Any, key: str) -> Any:
        metadata = [("x-evalsi-project", "p"), ("authorization", f"Bearer {self.secrets[key]}")]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{self.api.grpc_port}") as channel:
            return await getattr(TraceServiceStub(channel), method)(request, metadata=metadata, timeout=10)


def trace_id(trace_byte: int) -> str:
    return (bytes([trace_byte]) * 16).hex()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    secrets = {name: new_api_key() for name in KEYS}
    document = {"auth": {"api_keys": {"keys": [
        {"name": name, "key": hash_api_key(secrets[name]), "roles": {"p": roles}, "labels": labels}
        for name, (roles, labels) in KEYS.items()]}}, "rbac": RBAC}
    gate = AccessSettings.from_document(document).gate()
    assert gate is not None
    registry = Registry.from_entry_points()
    metadata = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    traces = await SqliteTraceStore.open(tmp_path / "traces.db")

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not used here")

    runs = RunHandlers(store=metadata, objects=None, control=refuse, watch=refuse,  # type: ignore[arg-type]
                       validate_run=lambda run: None, load_records=refuse)  # type: ignore[arg-type]
    table = build_table(evaluation=EvaluationHandlers(refuse, registry=registry), runs=runs,
                        catalog=CatalogHandlers(registry), traces=TraceHandlers(traces))
    api = ApiServer(table, ServerConfig(host="127.0.0.1", http_port=0, grpc_port=0), gate=gate)
    await api.start()
    runner, port = await start_http_receiver(OtlpHttpReceiver(ExportHandler(traces), gate=gate), "127.0.0.1", 0)
    try:
        yield Served(api, f"http://127.0.0.1:{port}", traces, secrets)
    finally:
        await runner.cleanup()
        await api.stop()
        await traces.close()
        await metadata.close()


async def test_an_ingest_keys_labels_are_stored_over_the_resources(served: Served) -> None:
    assert await served.export("checkout-ingest", 1, {"app": "search", "team": "a"}) == 200
    assert await served.traces.trace_labels("p", [trace_id(1)]) == {trace_id(1): {"app": "checkout", "team": "a"}}
    got = await served.call("GetTrace", GetTraceRequest(trace_id=trace_id(1)), "lead")
    assert dict(got.summary.labels) == {"app": "checkout", "team": "a"}


async def test_an_export_labelled_outside_the_writers_condition_is_refused(served: Served) -> None:
    assert await served.export("scoped-ingest", 2, {"app": "search"}) == 403
    assert await served.export("scoped-ingest", 3) == 403  # no label: the condition cannot hold
    assert await served.export("scoped-ingest", 4, {"app": "checkout"}) == 200
    assert (await served.traces.list_traces("p")).traces[0].trace_id == trace_id(4)
    assert len((await served.traces.list_traces("p")).traces) == 1


async def test_a_label_conditioned_reader_lists_and_gets_only_its_traces(served: Served) -> None:
    for trace_byte, labels in ((5, {"app": "checkout"}), (6, {"app": "search"}), (7, {})):
        assert await served.export("collector", trace_byte, labels) == 200
    everything = await served.call("ListTraces", ListTracesRequest(), "lead")
    assert [t.trace_id for t in everything.traces] == [trace_id(7), trace_id(6), trace_id(5)]
    assert dict(everything.traces[1].labels) == {"app": "search"}
    mine = await served.call("ListTraces", ListTracesRequest(), "checkout-reader")
    assert [t.trace_id for t in mine.traces] == [trace_id(5)]
    filtered = await served.call("ListTraces", ListTracesRequest(labels=["app=search"]), "lead")
    assert [t.trace_id for t in filtered.traces] == [trace_id(6)]
    got = await served.call("GetTrace", GetTraceRequest(trace_id=trace_id(5)), "checkout-reader")
    assert got.summary.labels["app"] == "checkout"
    for other in (6, 7):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await served.call("GetTrace", GetTraceRequest(trace_id=trace_id(other)), "checkout-reader")
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await served.call("ListTraces", ListTracesRequest(labels=["app"]), "lead")
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "labels[0]" in (bad.value.details() or "")


async def test_feedback_is_decided_on_the_labels_of_the_trace_it_names(served: Served) -> None:
    assert await served.export("collector", 8, {"app": "checkout"}) == 200
    assert await served.export("collector", 9, {"app": "search"}) == 200
    sent = await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
        trace_id=trace_id(8), name="thumbs", value=1)), "scoped-ingest")
    assert sent.trace_id == trace_id(8)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
            trace_id=trace_id(9), name="thumbs", value=-1)), "scoped-ingest")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert [f.trace_id for f in await served.traces.list_feedback("p")] == [trace_id(8)]


async def test_feedback_naming_a_session_needs_write_on_every_trace_of_the_session(served: Served) -> None:
    assert await served.export("collector", 10, {"app": "checkout"}, session="s-mine") == 200
    assert await served.export("collector", 11, {"app": "checkout"}, session="s-mixed") == 200
    assert await served.export("collector", 12, {"app": "search"}, session="s-mixed") == 200
    sent = await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
        session_id="s-mine", name="thumbs", value=1)), "scoped-ingest")
    assert sent.session_id == "s-mine"
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # one of the session's traces is outside the condition
        await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
            session_id="s-mixed", name="thumbs", value=-1)), "scoped-ingest")
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert [f.session_id for f in await served.traces.list_feedback("p")] == ["s-mine"]
    # an unconditioned writer may; a session with nothing stored yet is decided without labels
    await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
        session_id="s-mixed", name="thumbs", value=-1)), "collector")
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await served.call("AddFeedback", AddFeedbackRequest(feedback=TraceFeedback(
            session_id="s-later", name="thumbs", value=1)), "scoped-ingest")
    assert unknown.value.code() == grpc.StatusCode.PERMISSION_DENIED  # no labels: the condition cannot hold
    assert sorted(f.session_id for f in await served.traces.list_feedback("p")) == ["s-mine", "s-mixed"]
