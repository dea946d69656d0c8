"""The HTML report opened in a real Chromium from a file with every network request blocked: it asks for nothing
but itself, logs no error (a CSP violation would be one), shows its tables and plots, and passes axe-core."""

from __future__ import annotations

from pathlib import Path

from browser import allowed_errors, assert_accessible, browser, page
from playwright.sync_api import Page, Route
from report_helpers import evalsi

__all__ = ["allowed_errors", "browser", "page"]


def open_offline(page: Page, report: Path) -> list[str]:
    """Load ``report`` by file:// with anything else aborted; the URLs the page asked for."""
    asked: list[str] = []

    def only_files(route: Route) -> None:
        asked.append(route.request.url)
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    page.route("**/*", only_files)
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    return asked


def test_the_report_reads_offline_in_chromium(page: Page, saved: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    done = evalsi("report", str(saved["candidate"]), "--compare", str(saved["baseline"]), "-o", str(report),
                  "--title", "Candidate <script>window.pwned = 1</script>")
    assert done.returncode == 0, done.stderr
    asked = open_offline(page, report)
    assert asked == [report.as_uri()]
    assert page.evaluate("() => window.pwned === undefined")
    assert page.locator("h1").inner_text() == "Candidate <script>window.pwned = 1</script>"
    metrics = page.locator("#metrics table")
    assert metrics.is_visible()
    assert metrics.locator("tbody th").all_inner_texts() == ["exact-match", "fuzzy-match.similarity",
                                                             "fuzzy-match.passed"]
    # The stylesheet applied (the CSP allowed it by its hash): numbers right-aligned, and the plots drawn.
    align = page.evaluate("() => getComputedStyle(document.querySelector('#metrics td.num')).textAlign")
    assert align == "right"
    assert page.locator("svg.plot").count() == 5 and page.locator("#comparison svg circle, #comparison svg rect")
    box = page.locator("#metrics svg").bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 50
    assert page.locator("#records tbody tr").count() == 30
    assert_accessible(page)


def test_dark_and_light_follow_the_system(page: Page, saved: dict[str, Path], tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    assert evalsi("report", str(saved["baseline"]), "-o", str(report)).returncode == 0
    colours = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        open_offline(page, report)
        colours[scheme] = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert_accessible(page)
    assert colours == {"light": "rgb(255, 255, 255)", "dark": "rgb(13, 17, 23)"}
