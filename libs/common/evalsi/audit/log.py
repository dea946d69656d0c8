"""The audit log's writer: ``record`` never blocks a request; a background task writes entries in batches.

Entries wait in a bounded buffer. While the store is unreachable they stay there and the write is retried with
backoff; only when the buffer is full is a new entry dropped, counted in ``evalsi_audit_entries_dropped_total``
(and ``dropped``), so an outage costs memory up to the bound and never a request's latency.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from itertools import islice
from typing import Protocol

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from evalsi.audit.entry import AuditEntry

log = structlog.get_logger("evalsi.audit")

# Writes one batch to the store (``AuditStore.append_audit``); raises while the store is unreachable.
WriteBatch = Callable[[Sequence[AuditEntry]], Awaitable[None]]


class AuditExporter(Protocol):
    """Where written entries also go (``evalsi.audit.export.OtelAuditEvents``); must not block."""

    def export(self, entries: Sequence[AuditEntry]) -> None: ...


class AuditMetrics:
    """Owns its registry unless given one (no process-global state)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.written = Counter("evalsi_audit_entries_written", "Audit entries written to the store.",
                               registry=self.registry)
        self.dropped = Counter("evalsi_audit_entries_dropped",
                               "Audit entries dropped because the buffer was full while the store was unreachable.",
                               registry=self.registry)
        self.buffered = Gauge("evalsi_audit_entries_buffered", "Audit entries waiting to be written.",
                              registry=self.registry)


class AuditLog:
    """Buffered, batched writes of audit entries; ``start`` the writer, ``close`` to flush what is left."""

    def __init__(
        self,
        write: WriteBatch,
        *,
        exporter: AuditExporter | None = None,
        metrics: AuditMetrics | None = None,
        max_buffered: int = 10_000,
        batch_size: int = 500,
        retry_s: float = 0.5,
        max_retry_s: float = 30.0,
    ) -> None:
        if max_buffered < 1 or batch_size < 1:
            raise ValueError("max_buffered and batch_size must be at least 1")
        self._write = write
        self._exporter = exporter
        self.metrics = metrics or AuditMetrics()
        self._max_buffered = max_buffered
        self._batch_size = batch_size
        self._retry_s = retry_s
        self._max_retry_s = max_retry_s
        self._buffer: deque[AuditEntry] = deque()
        self._pending = asyncio.Event()
        # One batch in flight at a time: flush() and the background writer both take the buffer's head.
        self._writing = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.written = 0

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def record(self, entry: AuditEntry) -> None:
        """Queue ``entry`` for writing; returns at once. Beyond the bound the entry is dropped and counted."""
        if len(self._buffer) >= self._max_buffered:
            self.dropped += 1
            self.metrics.dropped.inc()
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.error("audit buffer full, entry dropped", dropped=self.dropped, action=entry.action,
                          principal=entry.principal)
            return
        self._buffer.append(entry)
        self.metrics.buffered.set(len(self._buffer))
        self._pending.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="audit-writer")

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop the writer, then write what is buffered within ``timeout_s``; what still is not written is logged."""
        if self._task is not None:
            task, self._task = self._task, None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await asyncio.wait_for(self._drain(), timeout_s)
        except Exception as exc:  # closing: report what is lost, never raise
            log.error("audit entries not written at close", left=len(self._buffer),
                      error=str(exc) or type(exc).__name__)

    async def flush(self) -> None:
        """Write everything buffered now (raises when the store does); tests and close use it."""
        await self._drain()

    async def _drain(self) -> None:
        while self._buffer:
            await self._write_one_batch()

    async def _write_one_batch(self) -> None:
        async with self._writing:
            batch = list(islice(self._buffer, self._batch_size))
            if not batch:
                return
            await self._write(batch)
            # record() only appends and no other batch is in flight, so the batch is still the buffer's head.
            for _ in batch:
                self._buffer.popleft()
        self.written += len(batch)
        self.metrics.written.inc(len(batch))
        self.metrics.buffered.set(len(self._buffer))
        if self._exporter is not None:
            try:
                self._exporter.export(batch)
            except Exception as exc:  # the export is best effort; the store has the entries
                log.warning("audit export failed", error=str(exc))

    async def _run(self) -> None:
        failures = 0
        while True:
            await self._pending.wait()
            self._pending.clear()
            while self._buffer:
                try:
                    await self._write_one_batch()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the store is down: keep the entries, retry later
                    failures += 1
                    delay = min(self._retry_s * 2 ** min(failures - 1, 16), self._max_retry_s)
                    if failures == 1:
                        log.warning("audit store unreachable, keeping entries", buffered=len(self._buffer),
                                    error=str(exc), retry_s=delay)
                    await asyncio.sleep(delay)
                    continue
                if failures:
                    log.info("audit store reachable again", failed_attempts=failures)
                    failures = 0
