"""The logging egress proxy (§13): the only way out of a sandbox whose network policy is an allowlist.

One proxy per sandbox, on asyncio, speaking the two forms HTTP clients use through ``HTTP_PROXY``/``HTTPS_PROXY``:
``CONNECT host:port`` (a tunnel, for TLS and anything else) and absolute-URI HTTP (``GET http://host:port/path``).
It admits a connection only when its ``host:port`` is on the allowlist (hosts compared exactly after lowercasing,
IP literals in canonical form and only when listed), and logs every attempt, admitted or not, as an
``EgressEvent``: the evidence safety evaluators read through sandboxd's Stats.

No DNS rebinding games: a name is resolved once, here, the connection goes to the address that resolution gave,
and both are logged. A name that resolves into loopback, link-local, private or otherwise non-public space is
refused unless that address itself is listed, so an allowed name cannot be pointed at the host's own services.

Bounded: connections open at once, the request head's size and the time to send it, and an idle timeout on every
tunnel; the log keeps ``max_events`` entries and counts the rest. With ``sandbox.egress.upstream`` every admitted
connection is chained through that HTTP proxy (which then does the resolving).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from evalsi.sandbox.checks import normalize_host
from evalsi.sandbox.egress_config import EgressSettings
from evalsi.sandbox.model import EgressEvent, Endpoint

__all__ = ["EgressProxy", "ProxyRefusal", "ProxyRequest", "admitted", "allow_set", "parse_head"]

_CHUNK = 65536
# Headers that belong to the hop between client and proxy, never forwarded.
_HOP_HEADERS = frozenset({"proxy-connection", "proxy-authorization", "connection", "keep-alive", "te", "trailer",
                          "upgrade"})


class ProxyRefusal(Exception):
    """A request the proxy answers with ``status`` and closes; ``host``/``port`` when they were parsed."""

    def __init__(self, status: int, reason: str, host: str = "", port: int = 0) -> None:
        super().__init__(reason)
        self.status, self.reason, self.host, self.port = status, reason, host, port


@dataclass(frozen=True)
class ProxyRequest:
    kind: str  # "connect" | "http"
    method: str
    host: str
    port: int
    path: str
    version: str
    headers: tuple[tuple[str, str], ...]


def allow_set(allow: Iterable[Endpoint]) -> frozenset[tuple[str, int]]:
    """The allowlist in the form requests are compared in (see ``normalize_host``)."""
    return frozenset((normalize_host(endpoint.host) or endpoint.host.lower(), endpoint.port) for endpoint in allow)


def admitted(allowed: frozenset[tuple[str, int]], host: str, port: int) -> bool:
    return (host, port) in allowed


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    if "@" in text:
        raise ProxyRefusal(400, "user information in the request target is not accepted")
    if text.startswith("["):
        host, bracket, rest = text.partition("]")
        host += bracket
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not port_text:
        if default_port is None:
            raise ProxyRefusal(400, f"{text[:100]!r}: CONNECT needs HOST:PORT")
        port_text = str(default_port)
    name = normalize_host(host)
    if name is None:
        raise ProxyRefusal(400, f"{host[:100]!r} is not a host name or IP address")
    if not port_text.isdigit() or len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
        raise ProxyRefusal(400, f"{port_text[:10]!r} is not a port from 1 to 65535", name)
    return name, int(port_text)


def parse_head(head: bytes) -> ProxyRequest:
    """A proxy request's line and headers (``head`` ends with the blank line). Refuses anything else with 400."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise ProxyRefusal(400, "the request head is not ASCII") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ProxyRefusal(400, "expected a request line: METHOD TARGET HTTP/1.x")
    method, target, version = parts
    if not method.isalpha() or not method.isupper():
        raise ProxyRefusal(400, f"{method[:20]!r} is not an HTTP method")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise ProxyRefusal(400, "a malformed header line (folded lines are not accepted)")
        headers.append((name, value.strip()))
    if method == "CONNECT":
        host, port = _authority(target, None)
        return ProxyRequest("connect", method, host, port, "", version, tuple(headers))
    scheme, separator, rest = target.partition("://")
    if not separator or scheme.lower() != "http":
        raise ProxyRefusal(400, "expected CONNECT HOST:PORT or an absolute http:// URI (https goes through CONNECT)")
    cut = min((index for index in (rest.find("/"), rest.find("?")) if index >= 0), default=len(rest))
    host, port = _authority(rest[:cut], 80)
    path = rest[cut:] or "/"
    if path.startswith("?"):
        path = "/" + path
    return ProxyRequest("http", method, host, port, path, version, tuple(headers))


def _forward_head(request: ProxyRequest, absolute: bool) -> bytes:
    """The request as the next hop gets it: origin-form to a server, absolute-form to an upstream proxy; hop
    headers dropped and the connection closed after one exchange, so one connection is one logged request."""
    target = f"http://{_host_text(request.host)}:{request.port}{request.path}" if absolute else request.path
    lines = [f"{request.method} {target} {request.version}"]
    lines += [f"{name}: {value}" for name, value in request.headers if name.lower() not in _HOP_HEADERS]
    if not any(name.lower() == "host" for name, _ in request.headers):
        lines.append(f"Host: {_host_text(request.host)}:{request.port}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _response(status: int, reason: str) -> bytes:
    # 403's phrase is our own, so a program's report of it ("HTTP Error 403: Egress Denied") reads as the policy.
    phrases = {400: "Bad Request", 403: "Egress Denied", 408: "Request Timeout", 431: "Request Header Fields Too Large",
               502: "Bad Gateway", 503: "Service Unavailable"}
    body = f"evalsi egress proxy: {reason}\n".encode("ascii", "replace")
    return (f"HTTP/1.1 {status} {phrases.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("ascii") + body


class _Connection:
    """One client connection's tally for its log entry."""

    def __init__(self, when: float) -> None:
        self.when, self.started = when, time.monotonic()
        self.host, self.port, self.address = "", 0, ""
        self.allowed, self.reason = False, ""
        self.sent, self.received = 0, 0
        self.last = self.started


def _event(connection: _Connection, reason: str) -> EgressEvent:
    return EgressEvent(time=connection.when, host=connection.host, port=connection.port, allowed=connection.allowed,
                       bytes_sent=connection.sent, bytes_received=connection.received, address=connection.address,
                       duration_s=round(time.monotonic() - connection.started, 6), reason=reason)


class EgressProxy:
    """The proxy of one sandbox. ``start`` serves on a listening socket the caller made (in the proxy's network
    namespace, or on loopback for the confined rung); ``egress_log`` is what the sandbox reached or tried to."""

    def __init__(self, allow: Iterable[Endpoint], settings: EgressSettings | None = None, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.allowed = allow_set(allow)
        self.settings = settings or EgressSettings()
        self.clock = clock
        self._events: list[EgressEvent] = []
        self.dropped_events = 0
        self._open = 0
        self._live: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, listener: socket.socket) -> None:
        listener.setblocking(False)
        # The reader's limit bounds the request head: readuntil past it raises LimitOverrunError.
        self._server = await asyncio.start_server(self._accept, sock=listener, limit=self.settings.max_head_bytes)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def egress_log(self) -> tuple[EgressEvent, ...]:
        """Ended connections, then those still open (their bytes so far, reason "open"), oldest first."""
        live = sorted(self._live, key=lambda connection: connection.started)
        return (*self._events, *(_event(connection, "open") for connection in live if connection.host))

    def _record(self, connection: _Connection) -> None:
        self._live.discard(connection)
        if len(self._events) >= self.settings.max_events:
            self.dropped_events += 1
            return
        self._events.append(_event(connection, connection.reason))

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        connection = _Connection(self.clock())
        self._live.add(connection)
        try:
            if self._open >= self.settings.max_connections:
                connection.reason = f"over the limit of {self.settings.max_connections} open connections"
                await self._refuse(writer, 503, connection.reason)
                return
            self._open += 1
            try:
                await self._handle(reader, writer, connection)
            finally:
                self._open -= 1
        except ProxyRefusal as refusal:
            connection.host = connection.host or refusal.host
            connection.port = connection.port or refusal.port
            connection.reason = refusal.reason
            await self._refuse(writer, refusal.status, refusal.reason)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            connection.reason = connection.reason or f"connection ended: {type(exc).__name__}"
        except asyncio.CancelledError:  # close(): the sandbox is going away; the entry is still recorded
            connection.reason = connection.reason or "closed with the sandbox"
        finally:
            self._tasks.discard(task)
            self._record(connection)
            writer.close()

    async def _refuse(self, writer: asyncio.StreamWriter, status: int, reason: str) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            writer.write(_response(status, reason))
            await asyncio.wait_for(writer.drain(), timeout=2.0)

    async def _read_head(self, reader: asyncio.StreamReader) -> bytes:
        limit = self.settings.max_head_bytes
        try:
            return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=self.settings.head_timeout_s)
        except asyncio.LimitOverrunError:
            raise ProxyRefusal(431, f"request head over the limit of {limit} bytes") from None
        except asyncio.IncompleteReadError as exc:
            if len(exc.partial) >= limit:
                raise ProxyRefusal(431, f"request head over the limit of {limit} bytes") from None
            raise ProxyRefusal(400, "the connection ended before the request head did") from None
        except TimeoutError:
            raise ProxyRefusal(408, f"no complete request head within {self.settings.head_timeout_s:g}s") from None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      connection: _Connection) -> None:
        request = parse_head(await self._read_head(reader))
        connection.host, connection.port = request.host, request.port
        if not admitted(self.allowed, request.host, request.port):
            raise ProxyRefusal(403, f"{_host_text(request.host)}:{request.port} is not on the sandbox's allowlist")
        upstream_reader, upstream_writer = await self._open_upstream(request, connection)
        try:
            if request.kind == "connect":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                head = _forward_head(request, absolute=self.settings.upstream is not None)
                upstream_writer.write(head)
                connection.sent += len(head)
            await self._splice(reader, writer, upstream_reader, upstream_writer, connection)
        finally:
            upstream_writer.close()

    async def _open_upstream(self, request: ProxyRequest,
                             connection: _Connection) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        settings = self.settings
        if settings.upstream is not None:
            connection.address = f"via {_host_text(settings.upstream.host)}:{settings.upstream.port}"
            connection.allowed = True
            reader, writer = await self._connect(settings.upstream.host, settings.upstream.port)
            if request.kind == "connect":
                await self._upstream_tunnel(reader, writer, request)
            return reader, writer
        address = await self._resolve(request)
        connection.address, connection.allowed = address, True
        return await self._connect(address, request.port)

    async def _resolve(self, request: ProxyRequest) -> str:
        """One resolution, whose address is what the connection goes to (never a second lookup)."""
        try:
            ipaddress.ip_address(request.host)
            return request.host
        except ValueError:
            pass
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(request.host, request.port, type=socket.SOCK_STREAM,
                                                            proto=socket.IPPROTO_TCP),
                                           timeout=self.settings.connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ProxyRefusal(502, f"cannot resolve {request.host}: {exc}", request.host, request.port) from None
        if not infos:
            raise ProxyRefusal(502, f"cannot resolve {request.host}", request.host, request.port)
        address = ipaddress.ip_address(str(infos[0][4][0]).split("%")[0])
        if not address.is_global and (address.compressed, request.port) not in self.allowed:
            raise ProxyRefusal(403, f"{request.host} resolves to {address.compressed}, a non-public address; list "
                                    f"{_host_text(address.compressed)}:{request.port} to allow it",
                               request.host, request.port)
        return address.compressed

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.wait_for(asyncio.open_connection(host, port),
                                          timeout=self.settings.connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ProxyRefusal(502, f"cannot connect to {_host_text(host)}:{port}: "
                                    f"{exc.strerror if isinstance(exc, OSError) and exc.strerror else 'timed out'}") \
                from None

    async def _upstream_tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                               request: ProxyRequest) -> None:
        authority = f"{_host_text(request.host)}:{request.port}"
        writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode("ascii"))
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=self.settings.connect_timeout_s)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            writer.close()
            raise ProxyRefusal(502, "the upstream proxy did not answer CONNECT") from None
        line = head.split(b"\r\n", 1)[0]
        status = line.split(b" ")
        if len(status) < 2 or status[1] != b"200":
            writer.close()
            raise ProxyRefusal(502, f"the upstream proxy refused CONNECT {authority}: "
                                    f"{line[:100].decode('ascii', 'replace')}")

    async def _splice(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                      server_reader: asyncio.StreamReader, server_writer: asyncio.StreamWriter,
                      connection: _Connection) -> None:
        """Bytes both ways until both sides are done, or neither moved a byte for the idle timeout."""
        pumps = {asyncio.ensure_future(self._pump(client_reader, server_writer, connection, "sent")),
                 asyncio.ensure_future(self._pump(server_reader, client_writer, connection, "received"))}
        idle = self.settings.idle_timeout_s
        try:
            while pumps:
                remaining = idle - (time.monotonic() - connection.last)
                if remaining <= 0:
                    connection.reason = f"closed after {idle:g}s idle"
                    break
                done, pumps = await asyncio.wait(pumps, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    if not finished.cancelled() and finished.exception() is not None:
                        return
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, connection: _Connection,
                    direction: str) -> None:
        while data := await source.read(_CHUNK):
            connection.last = time.monotonic()
            sink.write(data)
            await sink.drain()
            if direction == "sent":
                connection.sent += len(data)
            else:
                connection.received += len(data)
        if sink.can_write_eof():
            with contextlib.suppress(OSError, RuntimeError):
                sink.write_eof()
