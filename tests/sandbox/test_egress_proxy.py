"""The logging egress proxy over real sockets: a local HTTP server on the host stands for the internet.

Admitted and refused attempts are both logged; bounds (request head, open connections, idle tunnels) are refused
with the status naming the limit; a name is resolved once, and a name resolving to a non-public address is refused
unless that address is listed; chaining through an upstream proxy."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from internet_server import BODY

from evalsi.errors import BadInputError
from evalsi.sandbox.config import load_sandbox_config
from evalsi.sandbox.egress import EgressProxy, ProxyRefusal, parse_head
from evalsi.sandbox.egress_config import EgressSettings
from evalsi.sandbox.model import Endpoint


async def _proxy(allow: list[Endpoint], settings: EgressSettings | None = None) -> tuple[EgressProxy, int]:
    listener = socket.create_server(("127.0.0.1", 0))
    proxy = EgressProxy(allow, settings)
    await proxy.start(listener)
    return proxy, listener.getsockname()[1]


@pytest.fixture
async def proxies() -> AsyncIterator[list[EgressProxy]]:
    started: list[EgressProxy] = []
    yield started
    for proxy in started:
        await proxy.close()


async def _exchange(port: int, request: bytes, *, read_all: bool = True) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read() if read_all else reader.readuntil(b"\r\n\r\n"), timeout=10)
    writer.close()
    return data


async def test_an_allowed_connect_tunnel_reaches_the_server_and_is_logged(internet: int,
                                                                         proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("127.0.0.1", internet)])
    proxies.append(proxy)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT 127.0.0.1:{internet} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    request = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    writer.write(request)
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert answer.endswith(BODY)
    await asyncio.sleep(0.05)
    [event] = proxy.egress_log()
    assert (event.host, event.port, event.allowed, event.address) == ("127.0.0.1", internet, True, "127.0.0.1")
    assert event.bytes_sent == len(request) and event.bytes_received == len(answer) and event.duration_s > 0


async def test_absolute_uri_http_is_forwarded_in_origin_form(internet: int, proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("127.0.0.1", internet)])
    proxies.append(proxy)
    answer = await _exchange(port, f"GET http://127.0.0.1:{internet}/x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   "Proxy-Connection: keep-alive\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.0 200") and answer.endswith(BODY)
    await asyncio.sleep(0.05)
    assert [(e.allowed, e.bytes_received) for e in proxy.egress_log()] == [(True, len(answer))]


async def test_hosts_and_ports_off_the_list_are_refused_and_logged(internet: int, proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("Example.COM", 443), Endpoint("127.0.0.1", internet)])
    proxies.append(proxy)
    for target in (f"127.0.0.1:{internet + 1 if internet < 65535 else 1}", "evil.example:443", "example.com:80",
                   "127.1:443", "[::1]:443", "example.com.:443"):
        answer = await _exchange(port, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 403") and b"not on the sandbox's allowlist" in answer, (target, answer)
    log = proxy.egress_log()
    assert len(log) == 6 and not any(event.allowed for event in log)
    assert [event.host for event in log][1:3] == ["evil.example", "example.com"]
    assert all("allowlist" in event.reason and event.bytes_sent == 0 for event in log)


async def test_a_huge_connect_line_is_refused_naming_the_limit(proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("example.com", 443)], EgressSettings(max_head_bytes=4096))
    proxies.append(proxy)
    answer = await _exchange(port, b"CONNECT " + b"a" * 100_000 + b".example:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431") and b"over the limit of 4096 bytes" in answer
    answer = await _exchange(port, b"GET /relative HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400")
    log = proxy.egress_log()
    assert [event.allowed for event in log] == [False, False]
    assert "over the limit of 4096 bytes" in log[0].reason


async def test_a_name_resolving_to_a_private_address_needs_that_address_listed(internet: int,
                                                                              proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("localhost", internet)])
    proxies.append(proxy)
    answer = await _exchange(port, f"GET http://localhost:{internet}/ HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 403") and b"non-public address" in answer
    proxy2, port2 = await _proxy([Endpoint("localhost", internet), Endpoint("127.0.0.1", internet)])
    proxies.append(proxy2)
    answer = await _exchange(port2, f"GET http://localhost:{internet}/ HTTP/1.1\r\n\r\n".encode())
    assert answer.endswith(BODY)
    await asyncio.sleep(0.05)
    [event] = proxy2.egress_log()
    assert (event.host, event.address, event.allowed) == ("localhost", "127.0.0.1", True)


async def test_connections_over_the_limit_are_refused(internet: int, proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("127.0.0.1", internet)], EgressSettings(max_connections=1))
    proxies.append(proxy)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT 127.0.0.1:{internet} HTTP/1.1\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    answer = await _exchange(port, f"CONNECT 127.0.0.1:{internet} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 503") and b"over the limit of 1 open connections" in answer
    writer.close()


async def test_an_idle_tunnel_is_closed(internet: int, proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([Endpoint("127.0.0.1", internet)], EgressSettings(idle_timeout_s=0.3))
    proxies.append(proxy)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT 127.0.0.1:{internet} HTTP/1.1\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    assert await asyncio.wait_for(reader.read(), timeout=5) == b""  # closed by the proxy, not by us
    writer.close()
    await asyncio.sleep(0.05)
    [event] = proxy.egress_log()
    assert event.allowed and "idle" in event.reason


async def test_a_slow_request_head_is_cut_off(proxies: list[EgressProxy]) -> None:
    proxy, port = await _proxy([], replace(EgressSettings(), head_timeout_s=0.3))
    proxies.append(proxy)
    answer = await _exchange(port, b"CONNECT example.com:443 HTTP/1.1\r\n")
    assert answer.startswith(b"HTTP/1.1 408")


async def test_chained_through_an_upstream_proxy(internet: int, proxies: list[EgressProxy]) -> None:
    upstream, upstream_port = await _proxy([Endpoint("127.0.0.1", internet)])
    proxies.append(upstream)
    settings = EgressSettings(upstream=Endpoint("127.0.0.1", upstream_port))
    proxy, port = await _proxy([Endpoint("127.0.0.1", internet)], settings)
    proxies.append(proxy)
    answer = await _exchange(port, f"GET http://127.0.0.1:{internet}/ HTTP/1.1\r\n\r\n".encode())
    assert answer.endswith(BODY)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT 127.0.0.1:{internet} HTTP/1.1\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await asyncio.wait_for(reader.read(), timeout=10)).endswith(BODY)
    writer.close()
    await asyncio.sleep(0.05)
    assert [event.address for event in proxy.egress_log()] == [f"via 127.0.0.1:{upstream_port}"] * 2
    assert [event.allowed for event in upstream.egress_log()] == [True, True]


def test_request_heads_are_parsed_strictly() -> None:
    assert parse_head(b"CONNECT Example.COM:443 HTTP/1.1\r\n\r\n").host == "example.com"
    request = parse_head(b"GET http://[0:0::1]:8080?q HTTP/1.1\r\nHost: h\r\n\r\n")
    assert (request.host, request.port, request.path) == ("::1", 8080, "/?q")
    for bad in (b"GET http://allowed.example@evil.example/ HTTP/1.1\r\n\r\n", b"CONNECT host HTTP/1.1\r\n\r\n",
                b"GET https://x/ HTTP/1.1\r\n\r\n", b"CONNECT x:99999 HTTP/1.1\r\n\r\n",
                b"CONNECT x:1 HTTP/1.1\r\n folded\r\n\r\n", b"CONNECT bad_host!:1 HTTP/1.1\r\n\r\n"):
        with pytest.raises(ProxyRefusal):
            parse_head(bad)


def test_the_egress_section_of_evalsi_yaml() -> None:
    config = load_sandbox_config({"egress": {"upstream": "http://Proxy.internal:3128", "idle_timeout": "5s",
                                             "max_connections": 8}})
    assert config.egress.upstream == Endpoint("proxy.internal", 3128)
    assert (config.egress.idle_timeout_s, config.egress.max_connections) == (5.0, 8)
    for raw, message in (({"upstream": "http://user:secret@p:1"}, "sandbox.egress.upstream: credentials"),
                         ({"upstream": "socks5://p:1"}, "sandbox.egress.upstream"),
                         ({"max_connections": 0}, "sandbox.egress.max_connections: 0 is out of range"),
                         ({"bogus": 1}, "sandbox.egress.bogus: unknown key")):
        with pytest.raises(BadInputError, match=message):
            load_sandbox_config({"egress": raw})
