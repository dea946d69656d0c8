"""The vm rung's egress allowlist: a guest without a network device reaches the host's logging egress proxy over a
virtio-serial port (vm/egress_bridge.py on the host, the agent's relay on 127.0.0.1:3128 in the guest).

One driver and one allowlisted guest serve the module (restored from the template the vm tests share, so a boot
is paid once per machine); HTTP servers on the host's loopback play the outside world, one listed and one not.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import pytest_asyncio
from vm_cache import CACHE

from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.egress_attach import attach_loopback
from evalsi.sandbox.egress_config import EgressSettings
from evalsi.sandbox.model import Endpoint, Level, NetworkPolicy, Resources, SandboxSpec
from evalsi.sandbox.vm.driver import VmDriver, VmOptions
from evalsi.sandbox.vm.egress_bridge import CLOSE, DATA, HEADER, MAX_PAYLOAD, OPEN, EgressBridge, frame
from evalsi.sandbox.vm.session import VmSession

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESOURCES = Resources(timeout_s=30.0, memory_bytes=128 << 20, pids=32, output_bytes=64 * 1024,
                      disk_bytes=16 << 20)
SPEC = SandboxSpec(min_isolation=Level.VM, resources=RESOURCES)
MAX_CONNECTIONS = 3
FETCH = ("import sys, urllib.request\n"
         "try:\n"
         "    print(urllib.request.urlopen(sys.argv[1], timeout=15).read().decode())\n"
         "except Exception as exc:\n"
         "    print('failed:', exc)\n")


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello from {self.server.server_port}".encode()  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[int, int]]:
    """Two HTTP servers on the host's loopback: (listed, unlisted) ports."""
    started = [ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    threads = [threading.Thread(target=server.serve_forever, daemon=True) for server in started]
    for thread in threads:
        thread.start()
    yield started[0].server_address[1], started[1].server_address[1]
    for server in started:
        server.shutdown()
        server.server_close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def driver() -> AsyncIterator[VmDriver]:
    config = SandboxConfig(cache_dir=CACHE, egress=EgressSettings(max_connections=MAX_CONNECTIONS))
    driver = VmDriver(config, options=VmOptions(warm=0, boot_timeout_s=60))
    yield driver
    await driver.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(driver: VmDriver, servers: tuple[int, int]) -> AsyncIterator[VmSession]:
    spec = replace(SPEC, network=NetworkPolicy((Endpoint("127.0.0.1", servers[0]),)))
    session = await driver.create(spec)
    yield session
    await session.destroy()


async def _fetch(session: VmSession, url: str) -> str:
    result = await session.exec(["python3", "-c", FETCH, url])
    assert result.outcome.kind == "exit", result
    return result.stdout.decode().strip()


async def test_a_listed_host_is_reached_through_the_proxy_and_logged(session: VmSession,
                                                                     servers: tuple[int, int]) -> None:
    listed = servers[0]
    assert session.isolation.bounds["network"].startswith("allowlist via egress proxy (virtio-serial)")
    assert await _fetch(session, f"http://127.0.0.1:{listed}/a") == f"hello from {listed}"
    wget = await session.exec(["wget", "-q", "-O", "-", f"http://127.0.0.1:{listed}/b"])
    assert wget.stdout == f"hello from {listed}".encode(), wget
    env = await session.exec(["env"])
    assert b"HTTPS_PROXY=http://127.0.0.1:3128" in env.stdout and b"all_proxy=http://127.0.0.1:3128" in env.stdout
    reached = [event for event in session.egress_log() if event.port == listed]
    assert len(reached) >= 2 and all(event.allowed and event.host == "127.0.0.1" for event in reached), reached
    assert reached[0].bytes_received > 0


async def test_an_unlisted_host_is_refused_by_the_proxy_and_logged(session: VmSession,
                                                                   servers: tuple[int, int]) -> None:
    unlisted = servers[1]
    answer = await _fetch(session, f"http://127.0.0.1:{unlisted}/")
    assert answer.startswith("failed:") and "403" in answer, answer
    refused = [event for event in session.egress_log() if event.port == unlisted]
    assert refused and not refused[-1].allowed and "allowlist" in refused[-1].reason, refused


async def test_nothing_but_the_proxy_is_reachable_from_the_guest(session: VmSession,
                                                                 servers: tuple[int, int]) -> None:
    # No network device: no route anywhere; the guest's loopback has the relay and nothing of the host's.
    probe = ("import socket, sys\n"
             "for host, port in [('10.0.2.2', 80), ('192.0.2.1', 443), ('127.0.0.1', int(sys.argv[1]))]:\n"
             "    try:\n"
             "        socket.create_connection((host, port), timeout=5)\n"
             "        print(host, 'connected')\n"
             "    except OSError as exc:\n"
             "        print(host, exc.errno)\n")
    result = await session.exec(["python3", "-c", probe, str(servers[0])])
    assert b"connected" not in result.stdout and len(result.stdout.splitlines()) == 3, result


async def test_without_an_allowlist_the_guest_has_no_route_and_no_proxy(driver: VmDriver,
                                                                        session: VmSession) -> None:
    # Restored from the same template after an allowlisted guest ran: the template stays without network.
    plain = await driver.create(SPEC)
    try:
        assert plain.isolation.bounds["network"] == "no network device" and plain.bridge is None
        probe = ("import socket\n"
                 "for port in (3128, 80):\n"
                 "    try:\n"
                 "        socket.create_connection(('127.0.0.1', port), timeout=5)\n"
                 "        print('connected')\n"
                 "    except OSError as exc:\n"
                 "        print(exc.errno)\n")
        result = await plain.exec(["python3", "-c", probe])
        assert b"connected" not in result.stdout and len(result.stdout.splitlines()) == 2, result
        env = await plain.exec(["env"])
        assert b"PROXY" not in env.stdout.upper() and plain.egress_log() == ()
    finally:
        await plain.destroy()


async def test_connections_past_the_bound_are_refused_and_a_flood_leaves_the_host_responsive(
        session: VmSession, servers: tuple[int, int]) -> None:
    listed = servers[0]
    hold = ("import socket, sys\n"
            "conns, answers = [], []\n"
            "for _ in range(int(sys.argv[2])):\n"
            "    c = socket.create_connection(('127.0.0.1', 3128), timeout=15)\n"
            "    c.sendall(('CONNECT 127.0.0.1:%s HTTP/1.1\\r\\n\\r\\n' % sys.argv[1]).encode())\n"
            "    answers.append(c.recv(100).split(b' ')[1].decode())\n"
            "    conns.append(c)\n"
            "print(' '.join(answers))\n")
    result = await session.exec(["python3", "-c", hold, str(listed), str(MAX_CONNECTIONS + 2)])
    assert result.stdout.split() == [b"200"] * MAX_CONNECTIONS + [b"503"] * 2, result
    over = [event for event in session.egress_log() if "over the limit" in event.reason]
    assert len(over) >= 2, session.egress_log()
    # 8 MiB that never finish a request head: the proxy cuts the stream at its head bound; the bridge and the
    # guest go on.
    flood = ("import socket\n"
             "c = socket.create_connection(('127.0.0.1', 3128), timeout=15)\n"
             "sent = 0\n"
             "try:\n"
             "    while sent < 8 << 20:\n"
             "        sent += c.send(b'x' * 65536)\n"
             "    print('sent all', c.recv(100))\n"
             "except OSError as exc:\n"
             "    print('cut after', sent)\n")
    flooded = await session.exec(["python3", "-c", flood])
    assert flooded.outcome.kind == "exit", flooded
    assert b"431" in flooded.stdout or b"cut after" in flooded.stdout, flooded
    assert any("request head over the limit" in event.reason for event in session.egress_log())
    assert session.bridge is not None and not session.bridge.broken
    assert await _fetch(session, f"http://127.0.0.1:{listed}/after") == f"hello from {listed}"


async def test_a_restored_snapshot_gets_its_own_bridge_and_keeps_the_log(driver: VmDriver, session: VmSession,
                                                                         servers: tuple[int, int]) -> None:
    listed = servers[0]
    before = len(session.egress_log())
    old_bridge = session.bridge
    state = await session.save_state()
    await session.load_state(state)
    assert session.bridge is not None and session.bridge is not old_bridge
    assert await _fetch(session, f"http://127.0.0.1:{listed}/restored") == f"hello from {listed}"
    assert len(session.egress_log()) > before  # one proxy for the session's life: the log spans the restore
    # The same state loaded where there is no allowlist: the relay it carried is stopped, nothing listens.
    plain = await driver.create(SPEC)
    try:
        await plain.load_state(state)
        probe = ("import socket\n"
                 "try:\n"
                 "    socket.create_connection(('127.0.0.1', 3128), timeout=5)\n"
                 "    print('connected')\n"
                 "except OSError as exc:\n"
                 "    print('refused', exc.errno)\n")
        result = await plain.exec(["python3", "-c", probe])
        assert result.stdout.startswith(b"refused"), result
    finally:
        await plain.destroy()


async def _bridge_pair(max_connections: int) -> tuple[EgressBridge, socket.socket, object]:
    """A bridge whose guest end is a socket this test drives, relaying to a real proxy."""
    proxy = await attach_loopback([Endpoint("127.0.0.1", 9)], EgressSettings())
    host_end, guest_end = socket.socketpair()
    reader, writer = await asyncio.open_unix_connection(sock=host_end)
    bridge = EgressBridge(reader, writer, proxy.port, max_connections)
    await bridge.start()
    guest_end.setblocking(False)
    return bridge, guest_end, proxy


async def _read_exactly(sock: socket.socket, n: int) -> bytes:
    loop = asyncio.get_running_loop()
    data = b""
    while len(data) < n:
        chunk = await asyncio.wait_for(loop.sock_recv(sock, n - len(data)), 10)
        assert chunk, "the bridge closed"
        data += chunk
    return data


async def test_the_bridge_refuses_streams_past_its_bound_and_breaks_on_an_oversized_frame() -> None:
    bridge, guest, proxy = await _bridge_pair(max_connections=1)
    loop = asyncio.get_running_loop()
    try:
        assert await _read_exactly(guest, 16) == bridge.nonce
        await loop.sock_sendall(guest, b"stale bytes of an earlier connection" + bridge.nonce)
        await loop.sock_sendall(guest, frame(OPEN, 1) + frame(OPEN, 2))
        # Stream 2 is past the bound: CLOSE at once. Stream 1 reaches the proxy, which refuses an unlisted target.
        assert HEADER.unpack(await _read_exactly(guest, HEADER.size)) == (CLOSE, 2, 0)
        await loop.sock_sendall(guest, frame(DATA, 1, b"GET http://127.0.0.1:10/ HTTP/1.1\r\n\r\n"))
        kind, stream, size = HEADER.unpack(await _read_exactly(guest, HEADER.size))
        assert (kind, stream) == (DATA, 1)
        assert b" 403 " in await _read_exactly(guest, size)
        assert bridge.refused == 1
        await loop.sock_sendall(guest, HEADER.pack(DATA, 1, MAX_PAYLOAD + 1))
        for _ in range(100):
            if bridge.broken:
                break
            await asyncio.sleep(0.05)
        assert f"over the limit of {MAX_PAYLOAD}" in bridge.broken and bridge.open_streams == 0
    finally:
        await bridge.close()
        guest.close()
        await proxy.close()  # type: ignore[attr-defined]
