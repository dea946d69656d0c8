"""The audit section of evalsi.yaml, and entries exported as evalsi.audit OTel log events once written."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from evalsi.audit import AuditEntry, AuditLog, OtelAuditEvents
from evalsi.audit.config import AuditConfig, load_audit_config, open_audit_log
from evalsi.errors import BadInputError
from evalsi.service.lifecycle import Lifecycle


async def test_written_entries_become_evalsi_audit_log_events() -> None:
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    written: list[AuditEntry] = []

    async def write(entries: Sequence[AuditEntry]) -> None:
        written.extend(entries)

    audit = AuditLog(write, exporter=OtelAuditEvents(provider))
    audit.record(AuditEntry(principal="corp/alice", principal_kind="user", action="access.manage",
                            project="support", decision="allow", deciding="role admin (binding group:corp/leads)",
                            resource="role reviewer", request_id="r-9", source="10.1.2.3",
                            method="evalsi.v1alpha1.AuthService/UpdateRole", time=1_700_000_000.5,
                            old_value={"permissions": ["runs.read"]}, new_value={"permissions": ["runs.*"]}))
    audit.record(AuditEntry(principal="apikey/viewer", principal_kind="apikey", action="runs.create",
                            project="support", decision="deny", deciding="default deny"))
    await audit.flush()
    records = [data.log_record for data in memory.get_finished_logs()]
    assert len(written) == 2 and len(records) == 2
    changed, denied = records
    assert changed.event_name == "evalsi.audit" and changed.timestamp == 1_700_000_000_500_000_000
    attributes = dict(changed.attributes or {})
    assert attributes["evalsi.audit.principal"] == "corp/alice"
    assert attributes["evalsi.audit.deciding"] == "role admin (binding group:corp/leads)"
    assert attributes["evalsi.audit.source"] == "10.1.2.3" and attributes["evalsi.project"] == "support"
    assert json.loads(str(attributes["evalsi.audit.old_value"])) == {"permissions": ["runs.read"]}
    assert (changed.severity_number, denied.severity_number) == (SeverityNumber.INFO, SeverityNumber.WARN)
    assert dict(denied.attributes or {})["evalsi.audit.decision"] == "deny"
    assert "evalsi.audit.old_value" not in dict(denied.attributes or {})


def test_the_audit_section_with_its_key_paths() -> None:
    assert load_audit_config(None) == AuditConfig()
    assert load_audit_config({"retention": "720h", "otlp_events": "http://collector:4318/v1/logs"}) == AuditConfig(
        720 * 3600.0, "http://collector:4318/v1/logs")
    with pytest.raises(BadInputError, match=r"^audit\.retain: unknown key; accepted: retention, otlp_events$"):
        load_audit_config({"retain": "1h"})
    with pytest.raises(BadInputError, match=r"^audit\.retention: '10m' is shorter than the 1h minimum$"):
        load_audit_config({"retention": "10m"})
    with pytest.raises(BadInputError, match=r"^audit\.otlp_events: 'collector:4318'; expected an OTLP/HTTP logs URL"):
        load_audit_config({"otlp_events": "collector:4318"})


async def test_a_service_purges_at_start_and_writes_what_is_buffered_when_it_stops() -> None:
    written: list[AuditEntry] = []
    cutoffs: list[float] = []

    async def write(entries: Sequence[AuditEntry]) -> None:
        await asyncio.sleep(0.05)  # slower than the stop: the entry is still buffered when stopping starts
        written.extend(entries)

    async def purge(before: float) -> int:
        cutoffs.append(before)
        return 0

    stop = asyncio.Event()
    entry = AuditEntry(principal="corp/al", principal_kind="user", action="runs.cancel", project="p",
                       decision="allow")

    async def assemble(life: Lifecycle) -> None:
        audit = await open_audit_log(AuditConfig(retention_s=7200.0), write, purge, life)
        audit.record(entry)
        stop.set()

    started = time.time()
    await Lifecycle("audit-test").run(assemble, stop=stop)
    assert written == [entry]
    assert len(cutoffs) == 1 and started - 7200.0 - 1 <= cutoffs[0] <= time.time() - 7200.0
