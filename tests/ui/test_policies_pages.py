"""The policies pages in a real Chromium against a served stack where a real online policy scored traces sent over
OTLP by the OpenTelemetry SDK's exporter in two windows, fired an alert to a webhook and promoted the failing traces:
the list, a policy's window statistics drawn with their interval band, the alerts evalsi-policy recorded as it fired
them (with the webhook's answer) and the promotions, each checked against what the API answers."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from browser import assert_accessible, wait_for_page
from playwright.sync_api import Page
from watch_data import DATASET, POLICY, WatchData, eventually, served_watch

import evalsi


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WatchData]:
    with served_watch(tmp_path_factory.mktemp("ui-policies")) as data:
        yield data


def api_get(watch: WatchData, path: str) -> Any:
    with urllib.request.urlopen(watch.stack.http + path, timeout=10) as response:
        return json.loads(response.read())


def shown_number(value: float) -> str:
    """A figure as the page writes it with 4 digits (dom.js fmtNumber): an integer without decimals."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}"


def open_policy(watch: WatchData, page: Page) -> None:
    page.goto(watch.ui + "#/policies")
    wait_for_page(page)
    row = page.locator("table tbody tr", has=page.locator(f"a[href='#/policies/{POLICY}']")).inner_text()
    assert "polite" in row and f"datasets/{DATASET}" in row and "every trace" not in row
    assert_accessible(page)
    page.locator(f"a[href='#/policies/{POLICY}']").click()
    page.wait_for_url(f"**#/policies/{POLICY}")
    page.locator("#policy-promotions-table").wait_for()


def test_a_policy_shows_its_windows_as_a_chart_with_its_band(watch: WatchData, page: Page) -> None:
    open_policy(watch, page)
    stats = api_get(watch, f"/v1alpha1/policies/{POLICY}/stats?perWindow=true&lastWindows=48")
    windows = stats["windows"]
    assert len(windows) >= 2  # the fixture scored its second batch in a later window

    chart = page.locator("figure.metric-chart[data-metric=polite] svg")
    assert chart.count() == 1
    # One path per series: the interval band and the line of means, a point per window.
    assert chart.locator("path.band").count() == 1 and chart.locator("path.line").count() == 1
    assert chart.locator("circle.point").count() == len(windows)
    band = chart.locator("path.band").get_attribute("d") or ""
    assert band.startswith("M") and band.endswith("Z") and band.count("L") == 2 * len(windows) - 1
    label = chart.get_attribute("aria-label") or ""
    last = windows[-1]["metrics"][0]
    assert f"{len(windows)} points" in label and f"latest {last['mean']:.3f}" in label

    overall = page.locator("section[aria-labelledby=policy-stats] table").first.locator("tbody tr").first.inner_text()
    (metric,) = stats["metrics"]
    assert "polite" in overall and f"{metric['mean']:.3f} [{metric['ciLow']:.3f}, {metric['ciHigh']:.3f}]" in overall
    assert f"{stats['tracesEvaluated']} traces evaluated in {len(windows)} windows" in page.locator(
        "#policy-range-text").inner_text()
    assert_accessible(page)

    # From a pass/fail metric to the traces that failed it.
    page.get_by_role("link", name="failed").click()
    page.wait_for_url("**#/traces?metric=polite&max=0")
    failed = sorted(watch.traces[name] for name in ("curt", "refused", "later-curt"))
    rows = "main table tbody tr th code"
    page.wait_for_function("([css, n]) => document.querySelectorAll(css).length === n", arg=[rows, len(failed)])
    assert sorted(page.locator(rows).all_inner_texts()) == failed


def test_alerts_fired_and_promotions_are_listed(watch: WatchData, page: Page) -> None:
    # The alerts evalsi-policy recorded as it fired them: one per alert the webhook received (each recorded just
    # after its answer), delivered.
    def every_alert_recorded() -> list[dict[str, Any]]:
        found = api_get(watch, f"/v1alpha1/policies/{POLICY}/alerts")["alerts"]
        assert found and len(found) == len(watch.alerts)
        return found

    recorded = eventually(every_alert_recorded, timeout_s=20)
    open_policy(watch, page)
    # Every window, so the page and the API read the same ones however long the tests before took.
    page.goto(watch.ui + f"#/policies/{POLICY}?windows=0")
    page.wait_for_function("() => document.getElementById('policy-range-text')?.textContent.startsWith('Every stored')")
    page.locator("#policy-promotions-table").wait_for()
    alerts = page.locator("#policy-alerts-table tbody tr")
    assert alerts.count() == len(recorded)
    for row, alert in zip(alerts.all(), recorded, strict=True):  # newest window first, as the API lists them
        text = row.inner_text()
        assert "mean('polite') < 0.5" in text and alert["delivery"] == "ALERT_DELIVERY_DELIVERED"
        assert "delivered HTTP 204" in text
        mean = alert["values"]["mean('polite')"]
        assert f"mean('polite') = {shown_number(mean)}" in text
        assert set(alert["values"]) == {"mean('polite')"}  # only the figures the rule read
    sent = json.loads(watch.alerts[0])
    assert sent["key"] in {alert["key"] for alert in recorded}  # the record is the alert the webhook got
    assert "mean('polite') < 0.5" in page.locator("#policy-alert-rules").inner_text()

    versions = api_get(watch, f"/v1alpha1/datasets/{DATASET}")["versions"]
    promotions = page.locator("#policy-promotions-table tbody tr")
    assert promotions.count() == len(versions) >= 2
    newest = promotions.first.inner_text()
    assert versions[-1]["version"][:12] in newest and versions[-1]["ref"] in newest
    assert str(versions[-1]["records"]) in newest


def test_the_range_of_windows_is_in_the_hash(watch: WatchData, page: Page) -> None:
    open_policy(watch, page)
    page.locator("#policy-windows").fill("0")
    page.locator("#policy-range button[type=submit]").click()
    page.wait_for_url(f"**#/policies/{POLICY}?windows=0")
    page.wait_for_function("() => document.getElementById('policy-range-text')?.textContent.startsWith('Every stored')")
    assert page.locator("#policy-windows").input_value() == "0"
    everything = api_get(watch, f"/v1alpha1/policies/{POLICY}/stats?perWindow=true")
    points = page.locator("figure.metric-chart[data-metric=polite] svg circle.point")
    assert points.count() == len(everything["windows"])


@pytest.mark.parametrize("allowed_errors", [["HTTP 404 for GET", "404 (Not Found)"]])  # provoked on purpose
def test_a_missing_policy_is_the_apis_404_in_the_banner(watch: WatchData, page: Page) -> None:
    page.goto(watch.ui + "#/policies/missing")
    page.locator("#banner").wait_for()
    assert "policy 'missing' not found" in page.locator("#banner-text").inner_text()
    assert page.locator("main h1").inner_text() == "This page could not be shown"


def test_a_policy_with_nothing_scored_yet_says_so(watch: WatchData, page: Page) -> None:
    quiet = {
        "apiVersion": "evals.si/v1alpha1", "kind": "OnlineEvalPolicy", "metadata": {"name": "quiet"},
        "spec": {"sampling": {"rate": 0.5}, "cascade": [{"ref": "builtin/contains", "params": {"values": ["x"]}}],
                 "promote": {"when": "score('contains') < 0.5", "dataset": "datasets/never"}},
    }
    with evalsi.Client(watch.stack.http) as client:
        client.policies.apply(quiet)
    page.goto(watch.ui + "#/policies")
    row = page.locator("table tbody tr", has=page.locator("a[href='#/policies/quiet']"))
    assert "every trace" in row.inner_text() and "0.500" in row.inner_text()
    row.locator("a").click()
    page.locator("#policy-promotions-table").wait_for()
    assert "No scored values in these windows." in page.locator("section[aria-labelledby=policy-stats]").inner_text()
    assert "This policy has no alert rules." in page.locator("section[aria-labelledby=policy-alerts]").inner_text()
    assert "No trace promoted yet." in page.locator("#policy-promotions-table").inner_text()
    assert_accessible(page)
