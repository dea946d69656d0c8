"""One ingest replica as several processes: ``evalsi-ingest --processes N``.

Mapping and redaction are Python, so one process keeps one core busy at most. ``run_processes`` forks N
receivers that share the OTLP/HTTP and OTLP/gRPC ports (SO_REUSEPORT: the kernel spreads connections over them),
each with its own store writer. Trace completion stays exact: process i is partition i of N (``Partitioning``,
crc32 of the trace id), so only it completes its traces; spans of another partition are stored where they
arrive and their owner is told over a local socket, with the same ``TracesObserved`` notices replicas send over
the bus. A trace is therefore completed once, by one process, whichever processes its spans reached. Where the
store takes summary rows (ClickHouse: ``SummaryRows``), a notice carries the spans' summary rows too, so the owner
alone sums and summarizes its traces and never reads them back.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import marshal
import multiprocessing
import signal
import socket
import struct
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from typing import Any

from evalsi.bus.v1alpha1.bus_pb2 import ObservedTrace, TracesObserved
from evalsi.errors import BadInputError, InfraError
from evalsi.stores.traces import open_trace_store
from evalsi.stores.traces.protocol import SummaryRows
from evalsi.stores.traces.summaries import SpanRow

from .completion import TraceAssembler
from .pipeline import Partitioning

log = logging.getLogger("evalsi.ingest")
_FRAME = struct.Struct(">IB")  # payload size, kind
# A TracesObserved; or marshal's (project, [(trace id, has root)], [summary rows]): five times cheaper than JSON
# both ways (0.3 µs a row), and loading it runs no code. The links join forks of one interpreter, nothing else.
_NOTICE, _ROWS = 0, 1
READY_TIMEOUT_S = 120.0


class ProcessMember:
    """Process ``index`` of ``count``: its partition, and its links to the others (a ``NoticeSender``)."""

    def __init__(self, index: int, count: int, links: dict[int, socket.socket],
                 report: Callable[[dict[str, Any]], None] | None = None, *,
                 http_socket: socket.socket | None = None) -> None:
        self.partitioning = Partitioning(index, count)
        self.http_socket = http_socket  # the OTLP/HTTP listener all processes accept from
        self._links = links
        self._report = report
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._readers: list[asyncio.Task[None]] = []

    async def start(self, assembler: TraceAssembler, rows_store: SummaryRows | None = None) -> None:
        """Open the links; notices from the other processes feed ``assembler`` (and their summary rows
        ``rows_store``, this process's store) until ``stop``."""
        for peer, sock in self._links.items():
            reader, writer = await asyncio.open_unix_connection(sock=sock)
            self._writers[peer] = writer
            self._readers.append(asyncio.create_task(self._receive(reader, assembler, rows_store),
                                                     name=f"notices-from-{peer}"))

    async def send(self, partition: int, traces: Sequence[ObservedTrace]) -> None:
        await self._send(partition, _NOTICE, TracesObserved(traces=traces).SerializeToString())

    async def send_rows(self, partition: int, project: str, traces: dict[str, bool],
                        rows: Sequence[SpanRow]) -> None:
        """A notice of ``traces`` (id → has its root) with their spans' summary rows (``RowNoticeSender``)."""
        await self._send(partition, _ROWS, marshal.dumps((project, list(traces.items()), list(rows))))

    async def _send(self, partition: int, kind: int, payload: bytes) -> None:
        writer = self._writers.get(partition)
        if writer is None or writer.is_closing():
            raise InfraError(f"ingest process {partition} is gone; its traces cannot be completed")
        writer.write(_FRAME.pack(len(payload), kind) + payload)
        try:
            await writer.drain()
        except (ConnectionError, OSError) as exc:
            raise InfraError(f"ingest process {partition}: {exc}") from exc

    @staticmethod
    async def _receive(reader: asyncio.StreamReader, assembler: TraceAssembler,
                       rows_store: SummaryRows | None) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size, kind = _FRAME.unpack(await reader.readexactly(_FRAME.size))
                payload = await reader.readexactly(size)
                if kind == _NOTICE:
                    for trace in TracesObserved.FromString(payload).traces:
                        assembler.note(trace.project, trace.trace_id, has_root=trace.has_root, foreign=True)
                    continue
                project, traces, rows = marshal.loads(payload)
                # The rows reach the store before the assembler hears of the traces, so a completion that
                # follows sums them. Without a store that takes them, the owner reads the spans back instead.
                if rows_store is not None:
                    await rows_store.add_span_rows(project, rows)
                for trace_id, has_root in traces:
                    assembler.note(project, trace_id, has_root=has_root, foreign=rows_store is None)

    def listening(self, event: dict[str, Any]) -> None:
        """Tell the parent this process accepts spans (it prints one line for all of them)."""
        if self._report is not None:
            self._report(event)

    async def stop(self, drain_s: float = 1.0) -> None:
        """Close the links: our side first (a half-close), then, once the others have closed theirs or after
        ``drain_s``, the rest, so the notices they already sent are still read."""
        for writer in self._writers.values():
            with contextlib.suppress(OSError):
                writer.write_eof()
        if self._readers:
            _, late = await asyncio.wait(self._readers, timeout=drain_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*self._readers, return_exceptions=True)
        for writer in self._writers.values():
            writer.close()


def _reserve(host: str, port: int, flag: str) -> socket.socket:
    """Bind (not listen) a SO_REUSEPORT socket, so every child binds the same port, 0 included."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise BadInputError(f"{flag} {port}: cannot listen on {host}: {exc.strerror or exc}") from None
    return sock


Serve = Callable[..., Coroutine[Any, Any, None]]  # each child runs it with asyncio.run


def _listen(host: str, port: int, flag: str) -> socket.socket:
    """A listening socket every child accepts from: a busy process stops accepting, so an idle one takes the next
    connection (with SO_REUSEPORT the kernel would hash connections to processes whether they are busy or not)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise BadInputError(f"{flag} {port}: cannot listen on {host}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def _child(serve: Serve, settings: Any, index: int, count: int, links: dict[int, socket.socket],
           ready: Connection, http_socket: socket.socket) -> None:
    member = ProcessMember(index, count, links, ready.send, http_socket=http_socket)
    try:
        asyncio.run(serve(settings, member=member))
    except BadInputError as exc:
        print(f"evalsi-ingest: {exc}", file=sys.stderr)
        sys.exit(2)
    except InfraError as exc:
        print(f"evalsi-ingest (process {index}): {exc}", file=sys.stderr)
        sys.exit(1)


async def _migrate(traces_url: str) -> None:
    store = await open_trace_store(traces_url)
    await store.close()


def run_processes(settings: Any, serve: Serve, count: int) -> int:
    """Run ``count`` ingest processes (``serve(settings, member=...)`` each) until SIGTERM; the exit code.

    ``settings`` is the service's settings dataclass (``host``, ``http_port`` and ``grpc_port`` are read here).
    """
    # gRPC binds its own listener (SO_REUSEPORT); OTLP/HTTP, the bulk of the traffic, shares one socket.
    http_socket = _listen(settings.host, settings.http_port, "--http-port")
    reserved = [http_socket, _reserve(settings.host, settings.grpc_port, "--grpc-port")]
    http_port, grpc_port = (sock.getsockname()[1] for sock in reserved)
    settings = replace(settings, http_port=http_port, grpc_port=grpc_port)
    try:  # migrated once here: N processes migrating one new database at once would trip over each other
        asyncio.run(_migrate(settings.traces_url))
    except (BadInputError, InfraError):
        for sock in reserved:
            sock.close()
        raise
    # Fork before any event loop or gRPC thread exists here; each child starts its own.
    context = multiprocessing.get_context("fork")
    pairs = {(i, j): socket.socketpair() for i in range(count) for j in range(i + 1, count)}
    ready_reader, ready_writer = context.Pipe(duplex=False)
    children = []
    for index in range(count):
        links = {j: pairs[(min(index, j), max(index, j))][0 if index < j else 1] for j in range(count) if j != index}
        child = context.Process(target=_child, args=(serve, settings, index, count, links, ready_writer,
                                                     http_socket),
                                name=f"evalsi-ingest-{index}")
        child.start()
        children.append(child)
    for pair in pairs.values():
        for sock in pair:
            sock.close()
    ready_writer.close()

    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.is_alive():
                child.terminate()  # SIGTERM: each child drains, completes its traces and closes its store

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    events: list[dict[str, Any]] = []
    try:
        sentinels = [child.sentinel for child in children]
        while len(events) < count and not stopping:
            ready = wait([ready_reader, *sentinels], timeout=READY_TIMEOUT_S)
            if ready_reader not in ready:
                break  # a child stopped before listening, or they took too long
            try:
                events.append(ready_reader.recv())
            except EOFError:
                break
        for sock in reserved:
            sock.close()
        if len(events) == count:
            event = {key: value for key, value in events[0].items() if key != "replica"}
            print(json.dumps({**event, "processes": count}), flush=True)
        elif not stopping:
            log.error("not every ingest process started; stopping the others")
            stop(signal.SIGTERM, None)
        # One process gone leaves a partition nobody completes: stop the others rather than limp on.
        while alive := [child for child in children if child.is_alive()]:
            wait([child.sentinel for child in alive])
            if not stopping:
                log.error("an ingest process stopped; stopping the others")
                stop(signal.SIGTERM, None)
        for child in children:
            child.join()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for sock in reserved:
            sock.close()
    failed = [child.exitcode for child in children if child.exitcode]
    if 2 in failed:
        return 2
    return 1 if failed or len(events) < count else 0
