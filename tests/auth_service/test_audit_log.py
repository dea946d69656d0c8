"""AuditLog: record() never waits on the store; batches are written, kept through an outage, dropped past the bound."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import pytest

from evalsi.audit import AuditEntry, AuditLog, purge_expired
from evalsi.audit.export import event_attributes
from evalsi.auth.principal import Principal
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.errors import BadInputError


def _entry(n: int, decision: str = "allow") -> AuditEntry:
    return AuditEntry(principal=f"corp/u{n}", principal_kind="user", action="runs.create", project="support",
                      decision=decision)  # type: ignore[arg-type]


class FlakyStore:
    """A write path that fails while ``down`` and remembers the batches it took."""

    def __init__(self) -> None:
        self.down = False
        self.batches: list[list[AuditEntry]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def write(self, entries: Sequence[AuditEntry]) -> None:
        await self.release.wait()
        if self.down:
            raise ConnectionError("database unreachable")
        self.batches.append(list(entries))

    @property
    def written(self) -> list[AuditEntry]:
        return [e for batch in self.batches for e in batch]


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def test_entries_are_written_in_batches_in_order() -> None:
    store = FlakyStore()
    audit = AuditLog(store.write, batch_size=3)
    audit.start()
    try:
        for n in range(7):
            audit.record(_entry(n))
        await _until(lambda: len(store.written) == 7)
    finally:
        await audit.close()
    assert [e.principal for e in store.written] == [f"corp/u{n}" for n in range(7)]
    assert all(len(batch) <= 3 for batch in store.batches)
    assert audit.written == 7 and audit.dropped == 0


async def test_record_does_not_wait_for_a_slow_store() -> None:
    store = FlakyStore()
    store.release.clear()  # every write hangs
    audit = AuditLog(store.write)
    audit.start()
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n in range(1000):
            audit.record(_entry(n))
        assert loop.time() - started < 0.5
        assert audit.buffered == 1000
        store.release.set()
        await _until(lambda: audit.buffered == 0)
    finally:
        await audit.close()
    assert len(store.written) == 1000


async def test_an_outage_keeps_entries_and_retries_then_drops_only_beyond_the_bound() -> None:
    store = FlakyStore()
    store.down = True
    audit = AuditLog(store.write, max_buffered=5, retry_s=0.01, max_retry_s=0.02)
    audit.start()
    try:
        for n in range(8):
            audit.record(_entry(n))
        await asyncio.sleep(0.1)  # several failed attempts
        assert store.written == []
        assert audit.buffered == 5
        assert audit.dropped == 3
        assert audit.metrics.dropped._value.get() == 3
        store.down = False
        await _until(lambda: len(store.written) == 5)
    finally:
        await audit.close()
    # The entries kept are the first five: the ones recorded after the buffer filled were dropped.
    assert [e.principal for e in store.written] == [f"corp/u{n}" for n in range(5)]


async def test_close_flushes_what_is_buffered() -> None:
    store = FlakyStore()
    audit = AuditLog(store.write)  # never started: close() writes what is there
    audit.record(_entry(1, "deny"))
    await audit.close()
    assert [(e.principal, e.decision) for e in store.written] == [("corp/u1", "deny")]


class Recorder:
    def __init__(self) -> None:
        self.exported: list[AuditEntry] = []

    def export(self, entries: Sequence[AuditEntry]) -> None:
        self.exported.extend(entries)


async def test_written_entries_are_exported_and_attributes_name_the_decision() -> None:
    store, exporter = FlakyStore(), Recorder()
    audit = AuditLog(store.write, exporter=exporter)
    principal = Principal(kind="user", provider="corp", subject="alice")
    request = AccessRequest(principal=principal, action="roles.update", project="support",
                            method="evalsi.v1alpha1.AuthService/UpdateRole", source="10.0.0.7")
    entry = AuditEntry.of(request, Decision(False, "deny rule 1: request.action == 'roles.update'"), request_id="r-1",
                          resource="role reviewer", old_value={"permissions": ["runs.read"]},
                          new_value={"permissions": ["runs.read", "runs.create"]})
    audit.record(entry)
    await audit.flush()
    assert exporter.exported == [entry]
    attributes = event_attributes(entry)
    assert attributes["evalsi.audit.principal"] == "corp/alice"
    assert attributes["evalsi.audit.decision"] == "deny"
    assert attributes["evalsi.audit.deciding"].startswith("deny rule 1")
    assert attributes["evalsi.project"] == "support"
    assert json.loads(attributes["evalsi.audit.new_value"]) == {"permissions": ["runs.read", "runs.create"]}


async def test_purge_expired_passes_the_cutoff() -> None:
    seen: list[float] = []

    async def purge(cutoff: float) -> int:
        seen.append(cutoff)
        return 4

    assert await purge_expired(purge, 3600.0, now=10_000.0) == 4
    assert seen == [6400.0]


def test_retention_is_parsed_with_the_key_named() -> None:
    from evalsi.audit import parse_retention

    assert parse_retention("2160h") == 2160 * 3600
    assert parse_retention(None) == 2160 * 3600
    with pytest.raises(BadInputError, match=r"audit\.retention: .*shorter than the 1h minimum"):
        parse_retention("5m")
    with pytest.raises(BadInputError, match=r"audit\.retention: "):
        parse_retention("soon")


async def test_flush_while_the_writer_is_writing_writes_each_entry_once() -> None:
    store = FlakyStore()
    store.release.clear()
    audit = AuditLog(store.write, batch_size=2)
    audit.start()
    try:
        for n in range(5):
            audit.record(_entry(n))
        await asyncio.sleep(0.05)  # the writer holds the first batch
        flushing = asyncio.ensure_future(audit.flush())
        await asyncio.sleep(0.05)
        store.release.set()
        await flushing
    finally:
        await audit.close()
    assert [e.principal for e in store.written] == [f"corp/u{n}" for n in range(5)]
