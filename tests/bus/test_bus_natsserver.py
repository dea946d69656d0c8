"""NatsServer: the bundled nats-server with JetStream, on free ports, ready when /healthz says so."""

from __future__ import annotations

import json
import os
import socket
import urllib.request
from pathlib import Path

import nats
import pytest

from evalsi.bus.natsserver import NatsServer, find_nats_server


def test_finds_the_bundled_binary() -> None:
    assert os.access(find_nats_server(), os.X_OK)


def test_start_serves_jetstream_and_stop_removes_its_temp_dir() -> None:
    server = NatsServer()
    assert server.url.startswith("nats://127.0.0.1:")  # known before start, so clients may connect early
    with server:
        assert server.running
        with urllib.request.urlopen(f"{server.monitor_url}/healthz?js-enabled-only=true") as resp:
            assert json.load(resp)["status"] == "ok"
        with urllib.request.urlopen(f"{server.monitor_url}/varz") as resp:
            assert json.load(resp)["port"] == server.port
        store = Path(server.store_dir)
        assert store.is_dir()
    assert not server.running
    assert not store.exists()


def test_a_given_store_dir_is_kept(tmp_path: Path) -> None:
    store = tmp_path / "js"
    with NatsServer(store_dir=str(store)) as server:
        assert server.store_dir == str(store)
    assert store.is_dir()


async def test_restart_keeps_jetstream_data() -> None:
    with NatsServer() as server:
        nc = await nats.connect(server.url)
        js = nc.jetstream()
        await js.add_stream(name="KEEP", subjects=["keep.>"])
        await js.publish("keep.a", b"survives")
        await nc.close()

        server.restart()

        nc = await nats.connect(server.url)
        js = nc.jetstream()
        msg = await js.get_msg("KEEP", 1)
        assert msg.data == b"survives"
        await nc.close()


def test_a_server_that_cannot_start_raises_with_its_log() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = NatsServer(port=port)
        with pytest.raises(RuntimeError, match="exited with code") as info:
            server.start()
    assert "log tail" in str(info.value)
    assert "address already in use" in str(info.value).lower()
    assert not server.running


def test_a_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="cannot run nats-server"):
        NatsServer(binary="/nonexistent/nats-server").start()
