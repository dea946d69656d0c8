"""Case reports in the metadata store, on SQLite and a real Postgres: an upload stored once by its content id,
newest-first pages, the agent filter, and tenants and projects that never see each other's reports."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from evalsi.errors import BadInputError
from evalsi.stores import SqlMetadataStore, StoredCaseReport


def report(report_id: str, *, tenant: str = "platform", agents: tuple[str, ...] = ("shop",),
           regressions: int | None = None) -> StoredCaseReport:
    return StoredCaseReport(
        tenant=tenant, report_id=report_id, name=f"suite {report_id}", agents=agents,
        counts={"pass": 2, "fail": 1, "judge_pending": 0, "skipped": 1, "broken": 0, "error": 0},
        pass_rate=2 / 3, ci_low=0.2077, ci_high=0.9385, regressions=regressions, simulated=False,
        uploaded_by="user:corp/alice", size_bytes=17, document=f'{{"id":"{report_id}"}}',
    )


async def test_a_report_is_stored_once_and_read_back_whole(metadata_store: SqlMetadataStore) -> None:
    stored, created = await metadata_store.put_case_report("p", report("r1", regressions=1))
    assert created and stored.upload_us > 0 and stored.project == "p"
    assert replace(stored, upload_us=0) == report("r1", regressions=1)
    # The same id again (two uploads of one report): nothing new, the first one's time and name kept.
    again, created = await metadata_store.put_case_report("p", replace(report("r1"), name="renamed"))
    assert not created and again == stored
    got = await metadata_store.get_case_report("p", "platform", "r1")
    assert got == stored and got.document == '{"id":"r1"}' and got.regressions == 1
    no_gate = (await metadata_store.put_case_report("p", report("r2")))[0]
    assert no_gate.regressions is None and no_gate.pass_rate == pytest.approx(2 / 3)


async def test_tenants_and_projects_do_not_see_each_other(metadata_store: SqlMetadataStore) -> None:
    await metadata_store.put_case_report("p", report("r1"))
    await metadata_store.put_case_report("p", report("r2", tenant="store-b"))
    assert await metadata_store.get_case_report("p", "store-b", "r1") is None
    assert await metadata_store.get_case_report("other", "platform", "r1") is None
    assert [r.report_id for r in (await metadata_store.list_case_reports("p", "platform"))[0]] == ["r1"]
    assert [r.report_id for r in (await metadata_store.list_case_reports("p", "store-b"))[0]] == ["r2"]
    assert (await metadata_store.list_case_reports("other", "platform"))[0] == []


async def test_pages_newest_first_and_the_agent_filter(metadata_store: SqlMetadataStore) -> None:
    for i in range(5):
        await metadata_store.put_case_report("p", report(f"r{i}", agents=("shop", "bank") if i % 2 else ("shop",)))
        await asyncio.sleep(0.002)  # distinct upload times
    seen: list[str] = []
    token = ""
    while True:
        page, token = await metadata_store.list_case_reports("p", "platform", page_size=2, page_token=token)
        assert len(page) <= 2 and all(r.document == "" for r in page)  # lists carry no documents
        seen += [r.report_id for r in page]
        if not token:
            break
    assert seen == ["r4", "r3", "r2", "r1", "r0"]
    banks, token = await metadata_store.list_case_reports("p", "platform", agent="bank")
    assert [r.report_id for r in banks] == ["r3", "r1"] and token == ""
    assert banks[0].agents == ("shop", "bank")
    _, token = await metadata_store.list_case_reports("p", "platform", page_size=1)
    with pytest.raises(BadInputError, match="belongs to a different query"):
        await metadata_store.list_case_reports("p", "platform", agent="bank", page_token=token)
