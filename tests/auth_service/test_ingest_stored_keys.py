"""evalsi-ingest with the metadata store: a key created through AuthService exports spans into its project, a
revoked one stops at once, refusals go to the audit log; `evalsi serve` hands ingest the api's metadata store."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import aiohttp
import yaml
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.ports import free_port
from evalsi.service.config import Config
from evalsi.service.supervisor import plan_children
from evalsi.stores import SqlMetadataStore, open_metadata_store
from evalsi.stores.audit import AuditQuery
from evalsi.stores.identity import StoredApiKey
from evalsi.stores.traces import open_trace_store

ROOT = Path(__file__).resolve().parents[2]
try:
    from evalsi_ingest import main as ingest_main
except ImportError:  # until the package path is in the installed distribution
    sys.path.insert(0, str(ROOT / "services" / "ingest"))
    from evalsi_ingest import main as ingest_main

PROTOBUF = {"content-type": "application/x-protobuf"}


def _spans(trace_id: bytes) -> bytes:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    attribute = resource_spans.resource.attributes.add()
    attribute.key, attribute.value.string_value = "service.name", "shop"
    span = resource_spans.scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = trace_id, b"\x02" * 8, "checkout"
    span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    return request.SerializeToString()


async def _stored_key(store: SqlMetadataStore, name: str, role: str) -> str:
    secret = new_api_key()
    await store.create_api_key(StoredApiKey(project="support", name=name, key_hash=hash_api_key(secret),
                                            prefix=secret[:12], roles=(role,), created_at=time.time()))
    return secret


async def test_stored_keys_export_spans_and_refusals_are_audited(tmp_path: Path) -> None:
    metadata_url = f"sqlite:///{tmp_path / 'evalsi.db'}"
    store = await open_metadata_store(metadata_url)
    assert isinstance(store, SqlMetadataStore)
    collector = await _stored_key(store, "collector", "ingest")
    viewer = await _stored_key(store, "dashboards", "viewer")
    config = tmp_path / "evalsi.yaml"
    config.write_text(yaml.safe_dump({"auth": {"api_keys": {"keys": []}}}))
    http_port = free_port()
    settings = ingest_main.settings_from_args([
        "--config", str(config), "--metadata-url", metadata_url, "--traces-url", f"sqlite:///{tmp_path / 't.db'}",
        "--http-port", str(http_port), "--grpc-port", str(free_port()), "--grace", "0.1",
    ], environ={})  # fmt: skip
    stop = asyncio.Event()
    serving = asyncio.create_task(ingest_main.serve(settings, stop=stop))
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(400):
                assert not serving.done(), serving.result()
                try:
                    async with http.post(url, data=_spans(b"\x01" * 16), headers=PROTOBUF) as answer:
                        if answer.status == 401:
                            break
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)
            with_key = {**PROTOBUF, "authorization": f"Bearer {collector}"}
            async with http.post(url, data=_spans(b"\x07" * 16), headers=with_key) as answer:
                assert answer.status == 200, await answer.text()
            async with http.post(url, data=_spans(b"\x08" * 16),
                                 headers={**PROTOBUF, "authorization": f"Bearer {viewer}"}) as answer:
                assert answer.status == 403
            await store.revoke_api_key("support", "collector", time.time())
            async with http.post(url, data=_spans(b"\x09" * 16), headers=with_key) as answer:
                assert answer.status == 401
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)
    traces = await open_trace_store(f"sqlite:///{tmp_path / 't.db'}")
    try:
        page = await traces.list_traces("support")
        assert [t.trace_id for t in page.traces] == ["07" * 16]  # the stored key's project, from the credential
    finally:
        await traces.close()
    denied, _ = await store.list_audit(AuditQuery(decision="deny"))
    by_principal = {e.principal: e for e in denied}
    assert by_principal["apikey/support/dashboards"].action == "traces.write"
    assert by_principal["apikey/support/dashboards"].deciding.startswith("default deny")
    assert any(e.principal == "anonymous" and e.deciding.startswith("unauthenticated") for e in denied)
    await store.close()


def test_evalsi_serve_hands_ingest_the_metadata_store(tmp_path: Path) -> None:
    children = {c.name: c for c in plan_children(Config.from_mapping({}), "nats://x", tmp_path)}
    assert children["ingest"].env["EVALSI_METADATA_URL"] == children["api"].env["EVALSI_METADATA_URL"]
