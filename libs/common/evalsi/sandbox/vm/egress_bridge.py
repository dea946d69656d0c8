"""The host's end of a microVM's egress: the guest's proxy connections, multiplexed over one virtio-serial port, each
relayed to the sandbox's logging egress proxy (``egress.py``, on the host's loopback as ``attach_loopback`` starts it).

A guest has no network device (§13: egress is the proxy, over vsock where there is one; here a virtio-serial port,
``evalsi.egress``, as vsock is not usable under TCG). Inside the guest the agent's relay listens on
``127.0.0.1:3128`` and turns each accepted connection into a stream of this wire:

    frame = type (1 byte) | stream id (4 bytes, big-endian) | payload length (4 bytes, big-endian) | payload
    OPEN  (1, guest to host): a new stream, no payload; the host connects it to the proxy
    DATA  (2, either way):    bytes of the stream, at most MAX_PAYLOAD
    CLOSE (3, either way):    the stream is over (a full close: half-closes are not relayed), no payload

Both ends first write a 16-byte nonce of this session and discard what they read before the other's: bytes a
snapshot left in flight from an earlier host connection never desynchronize the framing. The host refuses a frame
over ``MAX_PAYLOAD``, an unknown type, a payload on OPEN/CLOSE or an OPEN of a stream in use: the bridge is then
broken (its streams closed, ``broken`` says why), and only this sandbox's egress stops. Streams open at once are
bounded (``max_streams``, the proxy's ``max_connections`` plus room for the proxy to see and log the excess); past it
an OPEN is answered with CLOSE. A stream's bytes toward the proxy are written with back-pressure (``drain``), so a
guest can make its own egress wait but never make the host buffer without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import struct
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CLOSE", "DATA", "GUEST_PROXY_PORT", "HEADER", "MAX_PAYLOAD", "OPEN", "EgressBridge", "frame",
           "stream_bound"]

OPEN, DATA, CLOSE = 1, 2, 3
HEADER = struct.Struct(">BII")
MAX_PAYLOAD = 32 * 1024
GUEST_PROXY_PORT = 3128  # where programs in the guest find the proxy: 127.0.0.1:3128 (HTTP_PROXY and the rest)
NONCE_BYTES = 16
_SYNC_LIMIT = 1 << 20  # stale bytes discarded before the guest's nonce, at most
_STREAM_ROOM = 16  # streams past the proxy's max_connections, so that the proxy refuses (and logs) the excess


class FrameError(ValueError):
    """The guest broke the wire's rules: the bridge stops."""


def frame(kind: int, stream: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, stream, len(payload)) + payload


def stream_bound(max_connections: int) -> int:
    return max_connections + _STREAM_ROOM


@dataclass
class _Stream:
    writer: asyncio.StreamWriter
    pump: asyncio.Task[None] | None = None
    closed: bool = field(default=False)


class EgressBridge:
    """One machine's egress port, relayed to the proxy at ``127.0.0.1:proxy_port``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy_port: int,
                 max_streams: int) -> None:
        self._reader, self._writer = reader, writer
        self.proxy_port, self.max_streams = proxy_port, max_streams
        self.nonce = secrets.token_bytes(NONCE_BYTES)
        self.broken = ""
        self.refused = 0  # OPENs past max_streams
        self._streams: dict[int, _Stream] = {}
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def connect(cls, socket_path: Path, proxy_port: int, max_connections: int) -> EgressBridge:
        """Connects to QEMU's chardev socket of the egress port; ``start`` once the guest's relay runs."""
        reader, writer = await asyncio.open_unix_connection(str(socket_path), limit=_SYNC_LIMIT)
        return cls(reader, writer, proxy_port, stream_bound(max_connections))

    async def start(self) -> None:
        """Sends this side's nonce and starts relaying. Only after the guest's refresh: a relay restored from a
        snapshot still runs until then, and would swallow the nonce meant for its successor."""
        self._writer.write(self.nonce)
        await self._writer.drain()
        self._task = asyncio.ensure_future(self._run())

    def guest_request(self) -> dict[str, object]:
        """What the guest agent's relay needs (part of the refresh request)."""
        return {"port": GUEST_PROXY_PORT, "nonce": self.nonce.hex(), "streams": self.max_streams}

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self._close_all()
        self._writer.close()

    async def _run(self) -> None:
        try:
            await self._sync()
            while True:
                header = await self._reader.readexactly(HEADER.size)
                kind, stream, size = HEADER.unpack(header)
                if size > MAX_PAYLOAD:
                    raise FrameError(f"a frame of {size} bytes, over the limit of {MAX_PAYLOAD}")
                payload = await self._reader.readexactly(size) if size else b""
                await self._handle(kind, stream, payload)
        except FrameError as exc:
            self.broken = f"the guest broke the egress wire: {exc}"
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.broken = f"the egress port closed: {type(exc).__name__}"
        finally:
            await self._close_all()
            self._writer.close()

    async def _sync(self) -> None:
        try:
            await self._reader.readuntil(self.nonce)
        except asyncio.LimitOverrunError:
            raise FrameError(f"no session nonce within {_SYNC_LIMIT} bytes") from None

    async def _handle(self, kind: int, stream: int, payload: bytes) -> None:
        if kind == OPEN:
            if payload or stream in self._streams:
                raise FrameError(f"OPEN of stream {stream} " + ("with a payload" if payload else "already open"))
            await self._open(stream)
        elif kind == DATA:
            entry = self._streams.get(stream)
            if entry is None or entry.closed:
                return  # a stream this side already closed: its CLOSE is on the way to the guest
            try:
                entry.writer.write(payload)
                await entry.writer.drain()
            except ConnectionError:
                await self._end(stream, tell_guest=True)
        elif kind == CLOSE:
            if payload:
                raise FrameError(f"CLOSE of stream {stream} with a payload")
            await self._end(stream, tell_guest=False)
        else:
            raise FrameError(f"unknown frame type {kind}")

    async def _open(self, stream: int) -> None:
        if len(self._streams) >= self.max_streams:
            self.refused += 1
            await self._send(frame(CLOSE, stream))
            return
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.proxy_port)
        except OSError:
            await self._send(frame(CLOSE, stream))
            return
        entry = _Stream(writer)
        self._streams[stream] = entry
        entry.pump = asyncio.ensure_future(self._pump(stream, reader))

    async def _pump(self, stream: int, reader: asyncio.StreamReader) -> None:
        """The proxy's bytes of one stream toward the guest, then its CLOSE."""
        try:
            while True:
                data = await reader.read(MAX_PAYLOAD)
                if not data:
                    break
                await self._send(frame(DATA, stream, data))
        except ConnectionError:
            pass
        entry = self._streams.get(stream)
        if entry is not None and entry.pump is asyncio.current_task():
            entry.pump = None  # ending itself: _end must not cancel this task
        await self._end(stream, tell_guest=True)

    async def _end(self, stream: int, *, tell_guest: bool) -> None:
        entry = self._streams.pop(stream, None)
        if entry is None:
            return
        entry.closed = True
        entry.writer.close()
        if entry.pump is not None:
            entry.pump.cancel()
        if tell_guest:
            with contextlib.suppress(ConnectionError):
                await self._send(frame(CLOSE, stream))

    async def _send(self, data: bytes) -> None:
        # One write per frame: frames of concurrent streams never interleave.
        self._writer.write(data)
        await self._writer.drain()

    async def _close_all(self) -> None:
        for stream in list(self._streams):
            entry = self._streams.pop(stream)
            entry.writer.close()
            if entry.pump is not None and entry.pump is not asyncio.current_task():
                entry.pump.cancel()
