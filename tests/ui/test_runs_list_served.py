"""The runs page in a real Chromium against a served stack, over runs in more than one project: the date filter
goes to ListRuns (createdAfter, createdBefore), so every page the API's token leads to holds only runs of those
days; All projects lists every project's runs and each opens in its own project; an empty project says where
runs may be; a cancelled run's page, with nothing scored, says there is nothing to draw.

The runs are written into the stack's own SQLite store with the creation times the test needs (CreateRun stamps
the time of the call), before the page reads them through the public API."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

import pytest
from browser import assert_accessible, wait_for_page
from playwright.sync_api import Page, Request, expect

from evalsi.stores import open_metadata_store
from evalsi.testing.stack import Stack
from evalsi.v1alpha1.run_pb2 import RUN_STATE_CANCELLED, RUN_STATE_FAILED, RUN_STATE_SUCCEEDED, Run
from evalsi.v1alpha1.score_pb2 import OUTCOME_CANCELLED, EvaluationResult

START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
STEP = dt.timedelta(hours=6)
RUNS = 40  # 2026-11-01 00:00 to 2026-11-10 18:00, four a day


def _created(index: int) -> dt.datetime:
    return START + index * STEP


async def _store_runs(metadata_url: str) -> None:
    store = await open_metadata_store(metadata_url)
    try:
        for index in range(RUNS):
            run = Run(id=f"run-dated-{index:02d}", project="default", name=f"dated {index:02d}",
                      state=RUN_STATE_SUCCEEDED)
            run.create_time.FromDatetime(_created(index))
            await store.create_run(run)
        # The newest run of all, in another project (as the quickstart's runs are in "quickstart").
        elsewhere = Run(id="run-elsewhere", project="quickstart", name="qa elsewhere", state=RUN_STATE_FAILED,
                        message="every target call failed (8)")
        elsewhere.create_time.FromDatetime(START + RUNS * STEP)
        await store.create_run(elsewhere)
        # Older than every dated run: cancelled before anything was scored.
        cancelled = Run(id="run-cancelled", project="default", name="qa cancelled", state=RUN_STATE_CANCELLED,
                        message="cancelled; 3 evaluations did not run, the figures are partial")
        cancelled.create_time.FromDatetime(START - dt.timedelta(days=1))
        cancelled.spec.evaluators.add(ref="builtin/exact-match")
        cancelled.summaries.add(metric="exact-match", evaluator="exact-match", cancelled=3)
        await store.create_run(cancelled)
        await store.upsert_results("default", "run-cancelled", [
            EvaluationResult(record_id=f"q{i}", evaluator="exact-match", evaluator_ref="builtin/exact-match@1.0.0",
                             outcome=OUTCOME_CANCELLED) for i in range(3)])
    finally:
        await store.close()


@pytest.fixture(scope="module")
def dated_stack(ui_stack: Stack) -> Iterator[Stack]:
    asyncio.run(_store_runs(ui_stack.config.metadata_url))
    yield ui_stack


def _names(page: Page) -> list[str]:
    return page.locator("tbody th").all_inner_texts()


def test_a_date_range_pages_through_matching_runs_only(dated_stack: Stack, page: Page) -> None:
    # 2026-11-03 to 2026-11-09, both days whole: runs 8 (the 3rd, 00:00) to 35 (the 9th, 18:00), 28 of them.
    wanted = [f"dated {index:02d}" for index in range(35, 7, -1)]
    asked: list[str] = []

    def on_request(request: Request) -> None:
        if "/v1alpha1/runs?" in request.url:
            asked.append(request.url)

    page.on("request", on_request)
    page.goto(dated_stack.http + "/ui/#/runs")
    wait_for_page(page)
    page.locator("#runs-from").fill("2026-11-03")
    page.locator("#runs-to").fill("2026-11-09")
    page.locator("#runs-apply").click()
    page.wait_for_url("**#/runs?from=2026-11-03&to=2026-11-09")
    wait_for_page(page)
    assert "created_after=2026-11-03T00%3A00%3A00Z&created_before=2026-11-10T00%3A00%3A00Z" in asked[-1]
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(25)  # a full page: the API filtered before it paged
    first = _names(page)
    assert page.locator("caption").inner_text() == "Runs of project default, created 2026-11-03 to 2026-11-09 (UTC)"

    page.locator("#runs-next").click()
    wait_for_page(page)
    expect(rows).to_have_count(3)
    assert first + _names(page) == wanted
    assert "Last page." in page.locator("main").inner_text()
    # The next page's link kept the dates, so the API continued the same query.
    assert "from=2026-11-03" in page.url and "to=2026-11-09" in page.url
    assert_accessible(page)


def test_one_day_and_an_inverted_range(dated_stack: Stack, page: Page) -> None:
    page.goto(dated_stack.http + "/ui/#/runs?from=2026-11-10&to=2026-11-10")
    wait_for_page(page)
    assert _names(page) == ["dated 39", "dated 38", "dated 37", "dated 36"]
    assert page.locator("#runs-from").input_value() == "2026-11-10"

    page.goto(dated_stack.http + "/ui/#/runs?from=2026-11-05&to=2026-11-04")
    wait_for_page(page)
    assert page.locator("#runs-dates-wrong").inner_text() == (
        '"Created to" (2026-11-04) is before "Created from" (2026-11-05): no run can match. Change one of them.')
    assert page.locator("table").count() == 0
    assert page.locator("#runs-to").input_value() == "2026-11-04"  # the form stays to correct it


@pytest.mark.parametrize("allowed_errors", [["created_after=soon"]])  # provoked on purpose
def test_a_date_the_api_refuses_keeps_the_form(dated_stack: Stack, page: Page, allowed_errors: list[str]) -> None:
    page.goto(dated_stack.http + "/ui/#/runs?from=soon")
    wait_for_page(page)
    banner = page.locator("#banner-text")
    expect(banner).to_contain_text("created_after: expected an RFC 3339 timestamp")
    expect(banner).to_contain_text("(HTTP 400)")
    assert page.locator("#runs-apply").is_visible()


# Switching the picker away on the run's page reads the run in "default", which answers 404 on purpose.
@pytest.mark.parametrize("allowed_errors", [["/v1alpha1/runs/run-elsewhere", "404 (Not Found)"]])
def test_all_projects_lists_every_project_and_opens_each_run_in_its_own(
    dated_stack: Stack, page: Page, allowed_errors: list[str]
) -> None:
    page.goto(dated_stack.http + "/ui/#/runs")
    wait_for_page(page)
    assert "qa elsewhere" not in _names(page)
    page.locator("#runs-all").check()
    page.locator("#runs-apply").click()
    page.wait_for_url("**#/runs?all=1")
    wait_for_page(page)
    # The call names no project, which ListRuns' allProjects requires: no 400 in the banner, every project's runs.
    assert page.locator("#banner").is_hidden()
    assert _names(page)[0] == "qa elsewhere"
    link = page.locator("tbody th a", has_text="qa elsewhere")
    assert link.get_attribute("href") == "#/runs/run-elsewhere?project=quickstart"
    dated = page.locator("tbody th a", has_text="dated 39")
    assert dated.get_attribute("href") == "#/runs/run-dated-39?project=default"
    link.click()
    wait_for_page(page)
    assert page.locator("main h1").inner_text().startswith("qa elsewhere")
    assert page.locator("#project-input").input_value() == "quickstart"
    assert page.url.endswith("#/runs/run-elsewhere")  # the picker holds the project now, not the address
    # Choosing another project in the picker is not undone by the link the page was opened with.
    page.locator("#project-input").fill("default")
    page.locator("#project-input").press("Enter")
    wait_for_page(page)
    assert page.locator("#project-input").input_value() == "default"
    expect(page.locator("#banner-text")).to_contain_text(
        "not found in project 'default'; it is in project 'quickstart'")


def test_an_empty_project_says_where_runs_may_be(dated_stack: Stack, page: Page) -> None:
    page.goto(dated_stack.http + "/ui/#/runs")
    wait_for_page(page)
    page.locator("#project-input").fill("nothing-here")
    page.locator("#project-input").press("Enter")
    wait_for_page(page)
    assert page.locator("tbody").inner_text() == (
        'No runs in project nothing-here. A run in another project (the quickstart\'s is in "quickstart") shows '
        "when you choose that project in the Project box above, or tick All projects.")
    page.goto(dated_stack.http + "/ui/#/runs?name=no-such-run")
    wait_for_page(page)
    assert page.locator("tbody").inner_text() == "No runs match these filters."


def test_a_run_with_nothing_scored_says_there_is_nothing_to_draw(dated_stack: Stack, page: Page) -> None:
    page.goto(dated_stack.http + "/ui/#/runs/run-cancelled")
    wait_for_page(page)
    expect(page.locator("#records tbody tr")).to_have_count(3)
    assert page.locator("#records tbody").inner_text().count("cancelled") == 3
    assert page.locator("#distributions-empty").inner_text() == (
        "No record was scored: errors, skips and cancellations carry no value to draw.")
    page.emulate_media(color_scheme="dark")
    assert_accessible(page)
