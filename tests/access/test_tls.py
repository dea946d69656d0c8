"""TLS on the listeners (auth.tls): the api's gRPC and HTTP ports and the OTLP receivers speak TLS with a
certificate made in the test, real clients verify it against the CA, a rotated certificate is served without a
restart, and with a client CA a verified client certificate is the caller's identity (mutual TLS)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import grpc
import pytest
from access_stack import Stack, grpc_unary, span_batch, start_stack
from auth_helpers import IdentityProvider, SigningKey
from certificates import Authority

from evalsi.evaluators import Registry
from evalsi.gate.exposure import AccessSettings
from evalsi.gate.tls import ServerTls, TlsFiles
from evalsi.ingest import ExportHandler, OtlpHttpReceiver, start_grpc_receiver, start_http_receiver
from evalsi.stores.traces import open_trace_store
from evalsi.v1alpha1.catalog_service_pb2 import ListEvaluatorsRequest

LIST_EVALUATORS = "/evalsi.v1alpha1.CatalogService/ListEvaluators"
OTLP_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.from_entry_points()


@pytest.fixture
def authority() -> Authority:
    return Authority.create()


@pytest.fixture
async def tls_stack(tmp_path: Path, registry: Registry, authority: Authority) -> AsyncIterator[tuple[Stack, ServerTls]]:
    cert_file, key_file = authority.write_server(tmp_path, "first")
    tls = ServerTls(TlsFiles(str(cert_file), str(key_file)), reload_interval_s=0.1)
    idp = await IdentityProvider(keys=[SigningKey.generate("RS256", "k1")]).start()
    served = await start_stack(tmp_path, idp, registry, tls=tls)
    try:
        yield served, tls
    finally:
        await served.close()
        await idp.stop()


def client_context(authority: Authority, *, certificate: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=authority.pem.decode())
    if certificate is not None:
        context.load_cert_chain(*certificate)
    return context


async def served_name(port: int, context: ssl.SSLContext) -> str:
    """The common name of the certificate a new TLS connection to ``port`` is shown."""
    context.set_alpn_protocols(["h2", "http/1.1"])
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
    try:
        subject = dict(item[0] for item in writer.get_extra_info("peercert")["subject"])
        return str(subject["commonName"])
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):  # grpc's HTTP/2 greeting may still be in flight
            await writer.wait_closed()


async def test_the_api_serves_tls_on_both_ports_and_reloads_a_rotated_certificate(
        tls_stack: tuple[Stack, ServerTls], authority: Authority, tmp_path: Path) -> None:
    stack, tls = tls_stack
    assert stack.api.addresses["http"].startswith("https://") and stack.api.addresses["grpc"].startswith("grpcs://")
    trusted = client_context(authority)
    root = (("authorization", f"Bearer {stack.token('root')}"),)
    request = ListEvaluatorsRequest().SerializeToString()
    credentials = grpc.ssl_channel_credentials(root_certificates=authority.pem)
    async with grpc.aio.secure_channel(stack.grpc_target, credentials) as channel:
        assert await grpc_unary(channel, LIST_EVALUATORS)(request, metadata=root, timeout=10)
    base = f"https://127.0.0.1:{stack.api.http_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/v1alpha1/evaluators", ssl=trusted, headers=dict(root)) as answer:
            assert answer.status == 200
        with pytest.raises(aiohttp.ClientError):  # plaintext to a TLS port
            async with http.get(f"http://127.0.0.1:{stack.api.http_port}/healthz"):
                pass
    assert await served_name(stack.api.http_port, client_context(authority)) == "first"
    assert await served_name(stack.api.grpc_port, client_context(authority)) == "first"

    authority.write_server(tmp_path, "second")  # rotated on disk, as cert-manager does
    later = os.stat(tmp_path / "tls.crt").st_mtime_ns + 1_000_000
    os.utime(tmp_path / "tls.crt", ns=(later, later))  # a distinct mtime even on a coarse clock
    deadline = asyncio.get_running_loop().time() + 10
    while await served_name(stack.api.http_port, client_context(authority)) != "second":
        assert asyncio.get_running_loop().time() < deadline, "the HTTP port never served the new certificate"
        await asyncio.sleep(0.1)
    while await served_name(stack.api.grpc_port, client_context(authority)) != "second":
        assert asyncio.get_running_loop().time() < deadline, "the gRPC port never served the new certificate"
        await asyncio.sleep(0.1)
    assert tls.reloads == 1
    async with grpc.aio.secure_channel(stack.grpc_target, credentials) as channel:  # a new connection, new pair
        assert await grpc_unary(channel, LIST_EVALUATORS)(request, metadata=root, timeout=10)


async def test_a_half_written_rotation_keeps_the_last_good_pair(tmp_path: Path, authority: Authority) -> None:
    cert_file, key_file = authority.write_server(tmp_path, "first")
    tls = ServerTls(TlsFiles(str(cert_file), str(key_file)), reload_interval_s=0)
    certificate, _ = authority.issue("second")
    cert_file.write_bytes(certificate)  # the new certificate beside the old key
    later = os.stat(cert_file).st_mtime_ns + 1_000_000
    os.utime(cert_file, ns=(later, later))
    assert tls.refresh() is False and tls.reloads == 0


async def test_mutual_tls_makes_the_client_certificate_the_ingest_identity(
        tmp_path: Path, authority: Authority) -> None:
    cert_file, key_file = authority.write_server(tmp_path, "ingest")
    (tmp_path / "ca.crt").write_bytes(authority.pem)
    spiffe = "spiffe://cluster.local/ns/evals/sa/collector"
    client_cert, client_key = authority.issue("collector", server=False, uris=(spiffe,))
    (tmp_path / "client.crt").write_bytes(client_cert)
    (tmp_path / "client.key").write_bytes(client_key)
    settings = AccessSettings.from_document({"auth": {
        "tls": {"cert_file": str(cert_file), "key_file": str(key_file), "client_ca": str(tmp_path / "ca.crt")},
        "mtls": {"mode": "strict", "identities": [{"subject": spiffe, "roles": {"a": ["ingest"]}}]},
    }})
    gate, tls = settings.gate(), settings.tls()
    assert gate is not None and tls is not None and tls.mutual
    traces = await open_trace_store(f"sqlite:///{tmp_path / 'traces.db'}")
    handler = ExportHandler(traces)
    runner, http_port = await start_http_receiver(OtlpHttpReceiver(handler, gate=gate), "127.0.0.1", 0,
                                                  ssl_context=tls.ssl_context())
    server, grpc_port = await start_grpc_receiver(handler, "127.0.0.1", 0, gate=gate, tls=tls)
    try:
        with_certificate = client_context(authority, certificate=(tmp_path / "client.crt", tmp_path / "client.key"))
        async with aiohttp.ClientSession() as http:
            async with http.post(f"https://127.0.0.1:{http_port}/v1/traces", data=span_batch(), ssl=with_certificate,
                                 headers={"Content-Type": "application/x-protobuf"}) as answer:
                assert answer.status == 200, await answer.read()
            async with http.post(f"https://127.0.0.1:{http_port}/v1/traces", data=span_batch(project="b"),
                                 ssl=with_certificate, headers={"Content-Type": "application/x-protobuf"}) as answer:
                assert answer.status == 403
            with pytest.raises(aiohttp.ClientError):  # no client certificate: the handshake itself fails
                async with http.post(f"https://127.0.0.1:{http_port}/v1/traces", data=span_batch(),
                                     ssl=client_context(authority)):
                    pass
        credentials = grpc.ssl_channel_credentials(root_certificates=authority.pem, private_key=client_key,
                                                   certificate_chain=client_cert)
        async with grpc.aio.secure_channel(f"127.0.0.1:{grpc_port}", credentials) as channel:
            await grpc_unary(channel, OTLP_EXPORT)(span_batch(trace_id=b"\x09" * 16), timeout=10)
        assert len((await traces.list_traces("a")).traces) == 2
    finally:
        await runner.cleanup()
        await server.stop(0)
        await traces.close()
