"""A real headless Chromium for the web UI's tests (Debian's chromium, driven by Playwright; never
``playwright install``, which downloads browsers from a CDN).

``browser`` (one per test module: a session-long one keeps Playwright's event loop running in the main thread,
and every async test collected after tests/ui fails with "Runner.run() cannot be called from a running event
loop") and ``page`` (a fresh context each test: empty storage) are registered as fixtures
by ``tests/ui/conftest.py``. A test fails when its page logged a console error (a CSP violation is one), threw an
uncaught exception, had a request fail, or got an HTTP error answer, unless the test named that answer in
``allowed_errors`` (a list of substrings, for a test that provokes a 401 on purpose). ``assert_accessible(page)``
runs axe-core (shipped in axe-playwright-python, no network) and fails on serious or critical violations.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, Response, sync_playwright

CHROMIUM = "/usr/bin/chromium"
SERIOUS = ("serious", "critical")
# A fetch aborted on purpose (a page's stream closed when the viewer navigates away) is not a failure.
_ABORTED = "net::ERR_ABORTED"


def chromium_path() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh installs it)")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def allowed_errors() -> list[str]:
    """Substrings of problems a test expects (``"401"``, a URL); every other problem fails the test."""
    return []


@pytest.fixture
def page(browser: Browser, allowed_errors: list[str]) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"console error: {message.text} at {message.location.get('url', '')}")

    def on_request_failed(request: Request) -> None:
        failure = request.failure or ""
        if _ABORTED not in failure:
            problems.append(f"request failed: {request.method} {request.url}: {failure}")

    def on_response(response: Response) -> None:
        if response.status >= 400:
            problems.append(f"HTTP {response.status} for {response.request.method} {response.url}")

    opened.on("console", on_console)
    opened.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    opened.on("requestfailed", on_request_failed)
    opened.on("response", on_response)
    try:
        yield opened
    finally:
        context.close()
    unexpected = [p for p in problems if not any(allowed in p for allowed in allowed_errors)]
    assert not unexpected, "the page had problems:\n" + "\n".join(unexpected)


def assert_accessible(page: Page, context: str | None = None) -> None:
    """axe-core over the page (or the part ``context`` selects): no serious or critical violation."""
    results = Axe().run(page, context=context)
    violations = [v for v in results.response["violations"] if v.get("impact") in SERIOUS]
    details = [
        f"{v['id']} ({v['impact']}): {v['help']}: " + "; ".join(node["target"][0] for node in v["nodes"][:5])
        for v in violations
    ]
    assert not violations, "axe-core found serious violations:\n" + "\n".join(details)


def wait_for_page(page: Page) -> None:
    """Until the router has drawn the current page: its page module's render finished (or failed, or the route
    has no page), which the router marks ``<main data-ready>``."""
    page.wait_for_selector("#main[data-ready]", state="attached")
