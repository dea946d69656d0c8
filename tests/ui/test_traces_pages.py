"""The traces pages in a real Chromium against a served stack holding traces sent over OTLP by the OpenTelemetry
SDK's exporter and scored by a real online policy: the list with its filters (each answered by ListTraces and kept
in the hash), paging, a trace's step tree with a tool call's arguments, its online scores, and feedback added from
the page and read back through the API."""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator

import pytest
from browser import assert_accessible, wait_for_page
from playwright.sync_api import Page
from watch_data import WatchData, served_watch

import evalsi


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WatchData]:
    with served_watch(tmp_path_factory.mktemp("ui-traces")) as data:
        yield data


def listed(page: Page) -> list[str]:
    """The trace ids of the list's rows, top to bottom."""
    return page.locator("table tbody tr th code").all_inner_texts()


def rows_become(page: Page, expected: Collection[str], timeout_s: float = 20.0) -> list[str]:
    """The list's trace ids once they are ``expected`` (in any order): a hash change redraws the page after the
    click or goto that made it returns."""
    deadline = time.monotonic() + timeout_s
    while True:
        wait_for_page(page)
        rows = listed(page)
        if sorted(rows) == sorted(expected) or time.monotonic() > deadline:
            assert sorted(rows) == sorted(expected)
            return rows
        time.sleep(0.1)


def show(page: Page, url: str, expected: Collection[str]) -> list[str]:
    page.goto(url)
    return rows_become(page, expected)


def search(page: Page, expected: Collection[str], **fields: str) -> list[str]:
    for name, value in fields.items():
        target = page.locator(f"#traces-{name}")
        if target.evaluate("el => el.tagName") == "SELECT":
            target.select_option(value)
        else:
            target.fill(value)
    page.locator("#traces-apply").click()
    return rows_become(page, expected)


def test_list_and_its_filters_are_answered_by_the_api_and_linkable(watch: WatchData, page: Page) -> None:
    ids = watch.traces
    rows = show(page, watch.ui + "#/traces", ids.values())  # all six on the first page
    assert rows[0] in (ids["later"], ids["later-curt"])  # newest first
    assert page.locator("h1").inner_text() == "Traces"
    assert_accessible(page)

    search(page, [ids["billing"]], service="billing")
    assert "service=billing" in page.url

    # The filters are in the hash: a fresh load of the link shows the same list, its form filled in.
    show(page, watch.ui + "#/traces?errors=true", [ids["refused"]])
    assert page.locator("#traces-errors").input_value() == "true"

    show(page, watch.ui + "#/traces", ids.values())
    search(page, [ids[n] for n in ("curt", "refused", "later-curt")], metric="polite", max="0.5")
    assert re.search(r"metric=polite.*max=0\.5", page.url)

    show(page, watch.ui + "#/traces", ids.values())
    search(page, [ids["curt"]], session="s-2")
    # A time range that ends before any trace started holds none.
    show(page, watch.ui + "#/traces?to=2001-01-01T00:00", [])
    assert "No trace matches" in page.locator("table tbody").inner_text()


def test_pages_follow_the_api_tokens(watch: WatchData, page: Page) -> None:
    page.goto(watch.ui + "#/traces?size=4")
    wait_for_page(page)
    first = listed(page)
    assert len(first) == 4 and page.locator("#traces-size").input_value() == "4"
    rest = set(watch.traces.values()) - set(first)
    page.locator("#traces-next").click()
    rows_become(page, rest)
    assert len(rest) == 2 and page.locator("#traces-next").count() == 0
    page.locator("#traces-previous").click()
    assert rows_become(page, first) == first


def test_a_trace_is_a_tree_of_steps_with_the_tool_call_and_scores(watch: WatchData, page: Page) -> None:
    trace_id = watch.traces["refused"]
    show(page, watch.ui + "#/traces?errors=true", [trace_id])
    page.locator(f"a[href='#/traces/{trace_id}']").click()
    page.wait_for_url(f"**#/traces/{trace_id}")
    page.locator("#trace-summary").wait_for()
    assert trace_id in page.locator("h1").inner_text()
    summary = page.locator("#trace-summary").inner_text()
    assert "support-agent" in summary and "s-3" in summary and "7 in / 3 out" in summary

    # The agent span at the top, its tool call and chat spans nested under it.
    tree = page.locator("ul.step-tree")
    assert tree.locator("li.step").count() == 3
    assert tree.locator(":scope > li.step").count() == 1
    children = tree.locator(":scope > li.step > details > ul > li.step")
    assert children.count() == 2
    assert "invoke_agent support-agent" in tree.locator(":scope > li.step > details > summary").inner_text()
    assert tree.locator(".tool-call").count() == 1
    tool = tree.locator("li.step[data-depth='1']", has=page.locator(".tool-call"))
    assert tool.count() == 1
    assert "error" in tool.locator("summary").first.inner_text()
    arguments = tool.locator(".tool-arguments pre")
    assert arguments.is_visible()
    assert '"order_id": "B-4"' in arguments.inner_text()
    assert "order service unavailable" in tool.locator(".tool-call").inner_text()
    # Timing bars: one SVG per step, each with its bar.
    assert tree.locator("svg.timing rect.bar").count() == 3

    scores = page.locator("section[aria-labelledby=trace-scores] table tbody tr")
    assert scores.count() == 1
    row = scores.first.inner_text()
    assert "polite" in row and "support" in row and "fail" in row and "none found of: 'thanks'" in row
    assert_accessible(page)


def test_a_trace_costs_the_sum_of_its_priced_steps_and_unknown_without_one(watch: WatchData, page: Page) -> None:
    page.goto(watch.ui + f"#/traces/{watch.traces['later']}")
    wait_for_page(page)
    summary = page.locator("#trace-summary").inner_text()
    assert re.search(r"Cost\s+\$0\.0042", summary)
    assert "12 in / 4 out" in summary  # the priced moderation call's tokens beside the chat's
    priced = page.locator("li.step[data-depth='1']", has=page.locator("summary .step-name", has_text="moderation"))
    assert "$0.0042" in priced.locator("summary").first.inner_text()

    page.goto(watch.ui + f"#/traces/{watch.traces['later-curt']}")
    wait_for_page(page)
    assert re.search(r"Cost\s+unknown \(no step reported a cost\)", page.locator("#trace-summary").inner_text())


def test_feedback_added_from_the_page_is_stored_and_shown(watch: WatchData, page: Page) -> None:
    trace_id = watch.traces["shipped"]
    page.goto(watch.ui + f"#/traces/{trace_id}")
    page.locator("#feedback-table").wait_for()
    assert "No feedback yet" in page.locator("#feedback-table").inner_text()
    page.locator("#feedback-value").fill("-1")
    page.locator("#feedback-comment").fill("wrong order number")
    page.locator("#feedback-submit").click()
    page.wait_for_function("() => document.getElementById('feedback-status').textContent.startsWith('Stored')")
    assert "policies look at the trace again" in page.locator("#feedback-status").inner_text()
    row = page.locator("#feedback-table tbody tr").first
    page.wait_for_function("() => !document.querySelector('#feedback-table tbody td.empty')")
    assert "thumbs" in row.inner_text() and "wrong order number" in row.inner_text()

    with evalsi.Client(watch.stack.http) as client:
        (stored,) = client.traces.get(trace_id).feedback
    assert (stored.name, stored.value, stored.comment, stored.source, stored.negative) == (
        "thumbs", -1.0, "wrong order number", "ui", True)
    # Loaded afresh, the page shows what the store holds.
    page.reload()
    page.locator("#feedback-table").wait_for()
    assert "wrong order number" in page.locator("#feedback-table").inner_text()
    assert_accessible(page)


@pytest.mark.parametrize("allowed_errors", [["HTTP 400 for GET", "400 (Bad Request)"]])  # provoked on purpose
def test_a_filter_the_api_refuses_is_said_and_the_form_stays(watch: WatchData, page: Page) -> None:
    page.goto(watch.ui + "#/traces?min=0.5")
    page.locator("#banner").wait_for()
    assert "score_metric: required with min_score" in page.locator("#banner-text").inner_text()
    assert page.locator("#traces-min").input_value() == "0.5"
    search(page, [watch.traces["shipped"], watch.traces["later"]], metric="polite")  # corrected: 0.5 <= polite
    assert page.locator("#banner").is_hidden()
