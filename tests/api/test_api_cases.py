"""CaseService over both transports against a real SQLite metadata store: stored cases (imported as `evalsi cases
import` does) and a real report (from `evalsi cases run` against the scripted agent) uploaded, listed and read
back; tenants that never see each other's; refusals that name the field or the limit."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from api_doubles import Api
from case_corpus import CASE_IDS, COUPON, EXPECTED_STATUS, run_report, write_corpus
from google.protobuf import json_format

from evalsi.api import CaseHandlers, build_table
from evalsi.cases.store import import_corpus, read_corpus
from evalsi.cases.uploaded_report import MAX_REPORT_BYTES, canonical_json, whole_numbers
from evalsi.client import Client
from evalsi.errors import BadInputError
from evalsi.stores import SqlMetadataStore, StoredCase, open_metadata_store


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlMetadataStore]:
    opened = await open_metadata_store(f"sqlite:///{tmp_path / 'evalsi.db'}")
    assert isinstance(opened, SqlMetadataStore)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def served(api: Api, store: SqlMetadataStore, tmp_path: Path) -> AsyncIterator[Api]:
    corpus = read_corpus(write_corpus(tmp_path / "data"))
    for project in ("over-http", "over-grpc"):
        await import_corpus(store, project, corpus, keep_existing=False)
    api.table = build_table(evaluation=api.evaluation, runs=api.runs, catalog=api.catalog, monitor=api.monitor,
                            cases=CaseHandlers(store))
    await api.start()
    yield api


@pytest.fixture
async def report(tmp_path: Path) -> dict[str, Any]:
    code, output, path = await asyncio.to_thread(run_report, tmp_path / "run")
    assert code == 3, output  # the baseline's regression
    return json.loads(path.read_text(encoding="utf-8"))


def urls(api: Api) -> list[str]:
    assert api.server is not None
    return [api.http, f"grpc://{api.grpc_target}"]


async def test_cases_and_reports_over_both_transports(served: Api, report: dict[str, Any]) -> None:
    def calls(url: str, project: str) -> None:
        with Client(url, project=project) as client:
            cases = list(client.cases.list(page_size=3))  # two pages
            assert [c.id for c in cases] == CASE_IDS
            coupon = client.cases.get("coupon")
            assert (coupon.yaml, coupon.path, coupon.line, coupon.tenant) == (COUPON, "coupon.yaml", 1, "platform")
            assert coupon.project == project and coupon.problem == "" and len(coupon.yaml_hash) == 64
            assert [c.id for c in client.cases.list(agent="nobody")] == []
            # Another tenant's case reads exactly as a missing one, unless that tenant is named.
            with pytest.raises(BadInputError, match=r"case 'secret' not found in project .*, tenant 'platform'"):
                client.cases.get("secret")
            assert client.cases.get("secret", tenant="store-b").tenant == "store-b"

            uploaded = client.cases.upload_report(report, name="nightly")
            assert uploaded.created and len(uploaded.id) == 32 and uploaded.tenant == "platform"
            counts = uploaded.counts
            assert (getattr(counts, "pass"), counts.fail, counts.judge_pending, counts.skipped) == (1, 1, 1, 1)
            assert uploaded.pass_rate == 0.5 and uploaded.regressions == 1 and list(uploaded.agents) == ["shop"]
            assert uploaded.ci_low == pytest.approx(report["summary"]["ci_low"])
            again = client.cases.upload_report(report, name="again")
            assert (again.id, again.created, again.name) == (uploaded.id, False, "nightly")

            listed = list(client.cases.reports())
            assert [r.id for r in listed] == [uploaded.id] and not listed[0].HasField("report")
            got = client.cases.report(uploaded.id)
            document = whole_numbers(json_format.MessageToDict(got.report))
            assert canonical_json(document) == canonical_json(report)  # the report as the run wrote it
            assert {c["id"]: c["status"] for c in document["cases"]} == EXPECTED_STATUS
            assert document["gate"]["regressions"][0]["case"] == "cart"
            turn = next(c for c in document["cases"] if c["id"] == "coupon")["transcript"]["turns"][0]
            assert turn["tool_calls"][0]["arguments"] == {"active": True, "store": "centro"}
            assert list(client.cases.reports(tenant="store-b")) == []
            with pytest.raises(BadInputError, match=r"not found in project .*, tenant 'store-b'"):
                client.cases.report(uploaded.id, tenant="store-b")
        with Client(url, project=f"{project}-else") as client:
            assert list(client.cases.list()) == [] and list(client.cases.reports()) == []

    for url, project in zip(urls(served), ("over-http", "over-grpc"), strict=True):
        await asyncio.to_thread(calls, url, project)


def post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, method="POST", headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_uploads_are_checked_before_anything_is_stored(served: Api, report: dict[str, Any],
                                                             store: SqlMetadataStore) -> None:
    url = f"{served.http}/v1alpha1/case-reports"

    def refused(document: dict[str, Any]) -> str:
        status, body = post(url, json.dumps({"report": document}).encode())
        assert status == 400, body
        return str(body["message"])

    def calls() -> None:
        assert refused({**report, "kind": "evalsi.run/v1"}) == (
            "report.kind: expected 'evalsi.cases.report/v1' (the JSON `evalsi cases run --output` writes), got "
            "'evalsi.run/v1'")
        bad_status = json.loads(json.dumps(report))
        bad_status["cases"][2]["status"] = "passed"
        assert refused(bad_status).startswith("report.cases[2].status: 'passed'; accepted: pass, fail")
        bad_check = json.loads(json.dumps(report))
        bad_check["cases"][0]["checks"][1]["status"] = "ok"
        assert refused(bad_check).startswith("report.cases[0].checks[1].status: 'ok'; accepted: pass")
        mixed = json.loads(json.dumps(report))
        mixed["cases"][3]["tenant"] = "store-b"
        assert refused(mixed) == ("report.cases[3].tenant: 'store-b' differs from 'platform'; a report holds one "
                                  "tenant's cases (run with --tenant)")
        huge = json.loads(json.dumps(report))
        huge["cases"][0]["transcript"]["turns"][0]["reply"] = "x" * MAX_REPORT_BYTES
        assert refused(huge).endswith(f"exceeds the limit of {MAX_REPORT_BYTES} bytes (8 MiB); split the suite "
                                      "into smaller runs")
        status, body = post(url, b'{"report": {"kind": "evalsi.cases.report/v1", "cases": []}, "nmae": "x"}')
        assert status == 400 and "nmae" in body["message"]
        status, body = post(url, json.dumps({"report": report, "name": "n" * 201}).encode())
        assert status == 400 and body["message"] == "name: 201 characters exceed the limit of 200"
        nul = json.loads(json.dumps(report))
        nul["cases"][1]["agent"] = "sh\u0000op"
        assert refused(nul).startswith("report.cases[1].agent: contains a NUL character")
        for path in ("/v1alpha1/cases?agent=a%00b", "/v1alpha1/case-reports/x%00y"):
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(served.http + path)
            assert caught.value.code == 400 and "NUL" in json.loads(caught.value.read())["message"]

    await asyncio.to_thread(calls)
    assert await store.list_case_reports("default", "platform") == ([], "")


async def test_without_a_store_the_service_says_so(api: Api) -> None:
    await api.start()  # the table's CaseService has no store

    def call() -> None:
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{api.http}/v1alpha1/cases")
        body = json.loads(caught.value.read())
        assert caught.value.code == 400, body  # FAILED_PRECONDITION
        assert body["message"].startswith("no case store is configured")

    await asyncio.to_thread(call)


async def test_a_stored_case_that_no_longer_loads_says_why(served: Api, store: SqlMetadataStore) -> None:
    text = "id: old\nagent: shop\nturns:\n  - user: hi\nretired: true\n"  # a key the format dropped
    await store.put_cases("default", [StoredCase("platform", "old", "shop", "old.yaml", 0, 1, text)])

    def call() -> None:
        with Client(served.http) as client:
            old = client.cases.get("old")
            assert old.yaml == text and old.problem.startswith("store:old.yaml:5: retired: unknown key")
            assert [c.id for c in client.cases.list() if c.problem] == ["old"]

    await asyncio.to_thread(call)
