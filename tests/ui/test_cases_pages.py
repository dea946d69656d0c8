"""The cases pages in a real Chromium against a served stack holding real cases (`evalsi cases import` into the
stack's metadata store) and a real report (`evalsi cases run --server` against the scripted agent, with a
baseline): the list of reports and stored cases with the tenant filter, a report's outcomes, gate regressions,
outcome filter, checks and transcript with folded tool-call arguments, and a stored case's YAML; each checked
against what the API answers, keyboard use and axe-core."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from browser import assert_accessible, wait_for_page
from case_corpus import CASE_IDS, COUPON, EXPECTED_STATUS, cases_cli, run_report, write_corpus
from playwright.sync_api import Page

from evalsi.testing.stack import Stack

NAME = "golden on main"
TRIALS_NAME = "golden x2"
T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """The CLI runs its own event loop (asyncio.run), which cannot start on a thread where Playwright's runs."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args).result()


@dataclass(frozen=True)
class Served:
    stack: Stack
    report_id: str
    trials_id: str  # the same corpus with --trials 2 --mode both and no baseline

    @property
    def ui(self) -> str:
        return f"{self.stack.http}/ui/"

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.stack.http + path, timeout=10) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def served(ui_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ui-cases")
    corpus = write_corpus(tmp)
    code, output = in_thread(cases_cli, "import", "--source", str(corpus), "--metadata-url",
                             ui_stack.config.metadata_url)
    assert code == 0, output
    code, output, _ = in_thread(run_report, tmp, "--server", ui_stack.http, "--report-name", NAME)
    assert code == 3, output  # the gate found the regression; the report went up all the same
    code, output, _ = in_thread(lambda: run_report(tmp / "trials", "--server", ui_stack.http, "--report-name",
                                                   TRIALS_NAME, "--trials", "2", "--mode", "both", baseline=False))
    assert code == 3, output
    listed = json.loads(urllib.request.urlopen(ui_stack.http + "/v1alpha1/case-reports").read())["reports"]
    assert [r["name"] for r in listed] == [TRIALS_NAME, NAME]  # newest first
    yield Served(ui_stack, listed[1]["id"], listed[0]["id"])


def open_report(served: Served, page: Page) -> None:
    page.goto(served.ui + "#/cases")
    wait_for_page(page)
    rows = page.locator("section[aria-labelledby=cases-reports-heading] tbody tr")
    assert rows.count() == 2
    row = rows.filter(has_text=NAME)
    text = row.first.inner_text()
    assert NAME in text and "0.500 [0.095, 0.905]" in text and "shop" in text
    assert [row.first.locator(f".count[data-status={s}]").inner_text().split()[0] for s in
            ("pass", "fail", "judge_pending", "skipped")] == ["1", "1", "1", "1"]
    row.first.locator("a").click()
    page.wait_for_url(f"**#/cases/reports/{served.report_id}")
    page.locator("#report-facts").wait_for()


def test_the_list_shows_reports_and_stored_cases_per_tenant(served: Served, page: Page) -> None:
    page.goto(served.ui + "#/cases")
    wait_for_page(page)
    stored = page.locator("section[aria-labelledby=cases-stored-heading] tbody tr")
    assert [stored.nth(i).locator("th").inner_text() for i in range(stored.count())] == CASE_IDS
    assert "cart.yaml:8" in stored.nth(1).inner_text()  # greet: the second document of cart.yaml, at its ---
    reports = page.locator("section[aria-labelledby=cases-reports-heading] tbody tr")
    assert reports.filter(has_text=NAME).locator("td").nth(4).inner_text() == "1"
    assert reports.filter(has_text=TRIALS_NAME).locator("td").nth(4).inner_text() == "no baseline"
    assert_accessible(page)

    # The tenant filter goes through the hash: store-b's one case, and none of platform's reports.
    page.fill("#cases-tenant", "store-b")
    page.click("#cases-apply")
    page.wait_for_url("**#/cases?tenant=store-b")
    wait_for_page(page)
    assert page.locator("section[aria-labelledby=cases-stored-heading] tbody th").all_inner_texts() == ["secret"]
    assert "No report uploaded" in page.locator("section[aria-labelledby=cases-reports-heading] tbody").inner_text()
    api = served.get("/v1alpha1/case-reports?tenant=store-b")
    assert api.get("reports", []) == []

    # The agent filter: an agent with no case empties both tables; the link keeps it.
    page.goto(served.ui + "#/cases?agent=bank")
    wait_for_page(page)
    assert page.locator("#cases-agent").input_value() == "bank"
    assert "No case stored" in page.locator("section[aria-labelledby=cases-stored-heading] tbody").inner_text()
    assert "No report uploaded" in page.locator("section[aria-labelledby=cases-reports-heading] tbody").inner_text()


def test_a_report_shows_outcomes_regressions_checks_and_the_transcript(served: Served, page: Page) -> None:
    open_report(served, page)
    api = served.get(f"/v1alpha1/case-reports/{served.report_id}")
    assert {c["id"]: c["status"] for c in api["report"]["cases"]} == EXPECTED_STATUS
    facts = page.locator("#report-facts").inner_text()
    assert served.report_id in facts and "0.500 [0.095, 0.905]" in facts
    chart = page.locator("figure svg[role=img]")
    assert "pass rate: 0.500 (0.095 to 0.905)" in (chart.get_attribute("aria-label") or "")
    regressions = page.locator("#report-regressions tbody tr")
    assert regressions.count() == 1
    assert "cart" in regressions.first.inner_text() and "pass -> fail" in regressions.first.inner_text()
    assert "greet, track-order" in page.locator("#report-gate").inner_text()  # new cases never block
    cases = page.locator("section[aria-labelledby=report-cases-heading] tbody tr")
    assert cases.count() == 4
    assert_accessible(page)

    # The outcome filter is a link: only the failing case.
    page.click("#report-outcomes a[data-outcome=fail]")
    page.wait_for_url("**outcome=fail")
    wait_for_page(page)
    assert page.locator("section[aria-labelledby=report-cases-heading] tbody th").all_inner_texts() == ["cart"]
    assert page.locator("#report-outcomes a[aria-current=true]").inner_text() == "fail (1)"

    # Opening the case: its checks, and the transcript with the tool call's arguments folded away.
    page.locator("section[aria-labelledby=report-cases-heading] tbody a", has_text="cart").click()
    page.wait_for_url("**case=cart**")
    detail = page.locator("#case-detail")
    detail.wait_for()
    failed = detail.locator("tr[data-check=tools_called]").inner_text()
    assert "fail" in failed and "not called: add_to_cart (called: search_products)" in failed
    assert "the reply contains 'sorry'" in detail.locator("tr[data-check=reply_omits]").inner_text()
    assert "add the 70% bar" in detail.inner_text() and "Sorry, I could not add it." in detail.inner_text()
    arguments = detail.locator("li.tool-call[data-tool=search_products] details.tool-arguments")
    assert arguments.get_attribute("open") is None and not arguments.locator("pre").is_visible()
    arguments.locator("summary").click()
    assert json.loads(arguments.locator("pre").inner_text()) == {"query": "70% bar"}
    assert page.evaluate("document.activeElement && document.activeElement.tagName") == "SUMMARY"
    assert_accessible(page)


def test_a_case_opened_by_link_and_by_keyboard(served: Served, page: Page) -> None:
    page.goto(served.ui + f"#/cases/reports/{served.report_id}?case=coupon")
    detail = page.locator("#case-detail")
    detail.wait_for()
    assert "pass" in detail.locator("tr[data-check=reply_includes]").inner_text()
    call = detail.locator("li.tool-call[data-tool=search_voucher]")
    assert call.locator(".badge").inner_text() == "ok"
    summary = call.locator("summary")
    summary.focus()
    page.keyboard.press("Enter")  # a <details> opens from the keyboard
    assert json.loads(call.locator("pre").inner_text()) == {"active": True, "store": "centro"}
    # A case's own page, from the stored-cases table by keyboard: its YAML exactly as imported.
    page.goto(served.ui + "#/cases")
    wait_for_page(page)
    row = page.locator("section[aria-labelledby=cases-stored-heading] tbody tr", has_text="coupon")
    row.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**#/cases/coupon")
    page.locator("#case-yaml").wait_for()
    wait_for_page(page)  # "In recent reports" is drawn after the definition, once its reports are read
    assert page.locator("#case-yaml").text_content() == COUPON
    assert "coupon.yaml:1" in page.locator("dl.kv").inner_text()
    assert served.get("/v1alpha1/cases/coupon")["yaml"] == COUPON
    # Its outcome in the latest reports: twice in the trials report (newest), once in the gated one.
    recent = page.locator("#case-recent tbody tr")
    assert recent.count() == 3
    assert [row.locator("[data-status]").inner_text() for row in recent.all()] == ["pass"] * 3
    assert [row.locator("th").inner_text() for row in recent.all()] == [TRIALS_NAME, TRIALS_NAME, NAME]
    assert recent.first.locator("a").get_attribute("href") == (
        f"#/cases/reports/{served.trials_id}?case=coupon&trial=1")
    assert_accessible(page)


def test_a_part_left_out_is_not_written_as_null(served: Served, page: Page) -> None:
    """A case that loads has no problem line and a report may have no notices: the pages leave them out, where
    the DOM's own append wrote the text "null"."""
    for path in (f"#/cases/reports/{served.report_id}", f"#/cases/reports/{served.trials_id}", "#/cases/coupon"):
        page.goto(served.ui + path)
        wait_for_page(page)
        assert "null" not in page.locator("main").inner_text(), path


@pytest.mark.parametrize("allowed_errors", [["/v1alpha1/cases/secret", "404 (Not Found)"]])  # provoked on purpose
def test_another_tenants_case_reads_as_missing(served: Served, page: Page, allowed_errors: list[str]) -> None:
    page.goto(served.ui + "#/cases/secret")
    page.locator("#banner:not([hidden])").wait_for()
    banner = page.locator("#banner-text").inner_text()
    assert "case 'secret' not found in project 'default', tenant 'platform'" in banner
    page.goto(served.ui + "#/cases/secret?tenant=store-b")
    page.locator("#case-yaml").wait_for()
    assert "tenant: store-b" in page.locator("#case-yaml").inner_text()


def test_reading_the_report_through_the_page_is_what_the_cli_uploaded(served: Served, tmp_path: Path) -> None:
    """The stored document is the report the run wrote, canonical: the same file pushed again is the same id."""
    write_corpus(tmp_path)
    report_file = tmp_path / "again.json"
    stored = served.get(f"/v1alpha1/case-reports/{served.report_id}")["report"]
    report_file.write_text(json.dumps(stored), encoding="utf-8")
    code, output = in_thread(cases_cli, "reports", "push", str(report_file), "--server", served.stack.http)
    assert code == 0 and output.startswith(f"already stored: case report {served.report_id}"), output


def fmt(value: float) -> str:
    """The page's number format (dom.js fmtNumber): integers as integers, else three decimals."""
    return f"{value:,.0f}" if float(value).is_integer() and abs(value) >= 1 else f"{value:.3f}"


def test_a_report_with_trials_shows_pass_at_k_and_latency(served: Served, page: Page) -> None:
    body = served.get(f"/v1alpha1/case-reports/{served.trials_id}")["report"]
    page.goto(served.ui + f"#/cases/reports/{served.trials_id}")
    page.locator("#report-trials").wait_for()
    rows = page.locator("#report-trials-by-k tbody tr")
    assert rows.count() == len(body["trials"]["by_k"]) == 2
    for row, k in zip(rows.all(), body["trials"]["by_k"], strict=True):
        at_k = k["pass_at_k"]
        assert f"{fmt(at_k['mean'])} [{fmt(at_k['ci_low'])}, {fmt(at_k['ci_high'])}]" in row.inner_text()
    cart = page.locator("#report-trials-cases tbody tr", has_text="cart").inner_text()
    assert "0 / 2" in cart and cart.count("fail") == 2
    perf = body["perf"]
    assert f"p50 {perf['latency_ms']['p50']:.1f} ms" in page.locator("#report-perf").inner_text()
    cases = page.locator("section[aria-labelledby=report-cases-heading] tbody tr")
    assert cases.count() == 8  # four cases, two trials each
    assert "no baseline" not in page.inner_text("main") and page.locator("#report-gate").count() == 0
    cases.filter(has_text="coupon").nth(1).locator("a").click()
    page.wait_for_url("**case=coupon&trial=2")
    assert "trial 2" in page.locator("#case-detail-heading").inner_text()
    assert_accessible(page)
