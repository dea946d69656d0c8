"""The web UI's shell in a real Chromium against a served stack: served at /ui/ with its CSP, the router (every
route of the contract, an unknown one), the theme toggle, sign-in and the project picker reaching the API's
headers, the error banner, keyboard use and an axe-core pass."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser import assert_accessible, wait_for_page
from playwright.sync_api import Page, Request

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.ports import free_ports
from evalsi.testing.stack import Stack
from evalsi.ui.serve import CONTENT_SECURITY_POLICY, load_static


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_root_redirects_to_the_ui_and_files_carry_the_csp(ui_stack: Stack) -> None:
    status, headers, _ = _get(ui_stack.http + "/")
    assert (status, headers["Location"]) == (302, "/ui/")
    status, headers, body = _get(ui_stack.http + "/ui/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert b'<script type="module" src="js/app.js">' in body
    status, headers, _ = _get(ui_stack.http + "/ui/js/app.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    status, _, body = _get(ui_stack.http + "/ui/../evalsi.db")
    assert status == 404
    status, _, body = _get(ui_stack.http + "/ui/js/nothing.js")
    assert status == 404 and b"nothing.js" in body
    # The API still answers beside the UI.
    status, _, body = _get(ui_stack.http + "/v1alpha1/runs")
    assert status == 200 and set(json.loads(body)) <= {"runs", "nextPageToken"}


def test_pages_index_lists_the_page_modules_present() -> None:
    files = load_static()
    pages = json.loads(files["pages.json"].body)
    assert pages == sorted(name.removeprefix("js/pages/") for name in files if name.startswith("js/pages/"))
    assert {"runs.js", "run.js", "compare.js"} <= set(pages)


def test_shell_loads_and_routes(ui_stack: Stack, page: Page) -> None:
    page.goto(ui_stack.http + "/ui/")
    page.wait_for_url("**/ui/#/runs")
    wait_for_page(page)
    assert page.locator('.nav-links a[aria-current="page"]').inner_text() == "Runs"
    page.goto(ui_stack.http + "/ui/#/no/such/page")
    wait_for_page(page)
    assert page.locator("main h1").inner_text() == "Page not found"
    assert page.locator(".nav-links a[aria-current]").count() == 0
    page.locator("main a", has_text="Go to the runs").click()
    page.wait_for_url("**/ui/#/runs")
    assert page.title().endswith("Evals.si")
    assert_accessible(page)


def test_theme_toggle_switches_and_persists(ui_stack: Stack, page: Page) -> None:
    page.emulate_media(color_scheme="light")
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    background = "getComputedStyle(document.body).backgroundColor"
    light = page.evaluate(background)
    toggle = page.locator("#theme-toggle")
    assert toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert toggle.get_attribute("aria-pressed") == "true"
    dark = page.evaluate(background)
    assert dark != light
    assert_accessible(page)
    page.reload()
    wait_for_page(page)
    assert page.evaluate(background) == dark  # the choice is remembered (localStorage)
    page.locator("#theme-toggle").click()
    assert page.evaluate(background) == light


def test_the_system_theme_is_the_default(ui_stack: Stack, page: Page) -> None:
    page.emulate_media(color_scheme="dark")
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    assert page.locator("#theme-toggle").get_attribute("aria-pressed") == "true"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(20, 23, 27)"


def test_sign_in_and_project_reach_the_api_headers(ui_stack: Stack, page: Page) -> None:
    sent: list[dict[str, str]] = []

    def on_request(request: Request) -> None:
        if "/v1alpha1/" in request.url:
            sent.append(request.headers)

    page.on("request", on_request)
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    page.locator("#signin-button").click()
    assert page.locator("#signin-dialog").is_visible()
    page.locator("#signin-token").fill("evk_test_key")
    page.locator("#signin-dialog button[type=submit]").click()
    assert page.locator("#signin-button").inner_text() == "Signed in"
    page.locator("#project-input").fill("shop")
    page.locator("#project-input").press("Enter")
    answer = page.evaluate(
        "async () => { const m = await import('/ui/js/api.js'); return await m.api.get('/v1alpha1/runs'); }")
    assert answer == {} or "runs" in answer
    assert sent[-1]["authorization"] == "Bearer evk_test_key"
    assert sent[-1]["x-evalsi-project"] == "shop"
    # Signing out sends no credential at all (auth off).
    page.locator("#signin-button").click()
    page.locator("#signout-button").click()
    page.evaluate("async () => { const m = await import('/ui/js/api.js'); await m.api.get('/v1alpha1/runs'); }")
    assert "authorization" not in sent[-1]


@pytest.mark.parametrize("allowed_errors", [["/v1alpha1/runs/no-such-run"]])
def test_api_errors_are_thrown_and_shown_in_the_banner(ui_stack: Stack, page: Page, allowed_errors: list[str]) -> None:
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    error = page.evaluate("""async () => {
        const m = await import('/ui/js/api.js');
        try { await m.api.get('/v1alpha1/runs/no-such-run'); return null; }
        catch (err) { return {name: err.name, status: err.status, message: err.message,
                              isApiError: err instanceof m.ApiError}; }
    }""")
    assert error["isApiError"] and error["status"] == 404 and "no-such-run" in error["message"]
    banner = page.locator("#banner")
    assert banner.is_hidden()
    # An error nobody caught (a click handler's call) still reaches the viewer: the banner (role=alert).
    page.evaluate("import('/ui/js/api.js').then((m) => { m.api.get('/v1alpha1/runs/no-such-run'); })")
    banner.wait_for(state="visible")
    assert "no-such-run" in page.locator("#banner-text").inner_text()
    assert page.get_by_role("alert").count() == 1
    page.locator("#banner-close").click()
    assert banner.is_hidden()


def test_keyboard_skip_link_and_focus(ui_stack: Stack, page: Page) -> None:
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "skip-link"
    assert page.locator("#skip-link").is_visible()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    assert page.url.endswith("#/no-page")  # the skip link does not change the route
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the first link in the page: "Go to the runs"
    page.wait_for_url("**/ui/#/runs")


def test_dom_and_chart_helpers(ui_stack: Stack, page: Page) -> None:
    """The helpers every page builds on (js/dom.js, js/charts.js), run in the browser."""
    page.goto(ui_stack.http + "/ui/#/no-page")
    wait_for_page(page)
    out = page.evaluate("""async () => {
        const d = await import('/ui/js/dom.js');
        const c = await import('/ui/js/charts.js');
        const rows = (t) => [...t.querySelectorAll('tbody th')].map((x) => x.textContent);
        const out = {
            interval: d.fmtInterval(0.5667, 0.39217, 0.7262), bare: d.fmtInterval(1, null, null),
            tiny: d.fmtInterval(9.21e-6, 0, 1.01e-5),
            numbers: [d.fmtNumber(0), d.fmtNumber(1250), d.fmtNumber(undefined), d.fmtNumber(0.25)],
            durations: [d.fmtDuration('0.250s'), d.fmtDuration(3.5), d.fmtDuration(125), d.fmtDuration(3900)],
            time: d.fmtTime('2026-12-02T18:34:20.5Z'),
            markup: d.h('p', {}, '<b>data</b>').innerHTML,
        };
        const t = d.table([{ key: 'name', label: 'Name' }, { key: 'n', label: 'N', numeric: true }],
                          [{ name: 'b', n: 2 }, { name: 'a', n: 10 }, { name: 'c', n: 1 }]);
        document.body.append(t);
        const sortN = t.querySelectorAll('th button')[1];
        sortN.click(); out.ascending = rows(t);
        sortN.click(); out.descending = rows(t);
        out.ariaSort = t.querySelectorAll('thead th')[1].getAttribute('aria-sort');
        const filter = t.querySelector('input[type=search]');
        filter.value = 'a'; filter.dispatchEvent(new Event('input'));
        out.filtered = rows(t);
        out.filterLabel = t.querySelector('label').textContent;
        const bars = c.errorBars([{ label: 'm', mean: 0.5, lo: 0.4, hi: 0.6 }], { domain: [0, 1] });
        out.barsLabel = bars.getAttribute('aria-label');
        out.barsTitle = bars.querySelector('title').textContent;
        out.whiskers = bars.querySelectorAll('line.whisker').length;
        const hist = c.histogram([0, 1, 1, 1]);
        out.histLabel = hist.getAttribute('aria-label');
        out.histBars = hist.querySelectorAll('rect.bar').length;
        const band = c.lineWithBand([{ t: '2026-01-02T00:00:00Z', mean: 0.7, lo: 0.6, hi: 0.8 },
                                     { t: '2026-01-01T00:00:00Z', mean: 0.5, lo: 0.4, hi: 0.6 }]);
        out.paths = [...band.querySelectorAll('path')].map((p) => p.getAttribute('class'));
        out.role = band.getAttribute('role');
        return out;
    }""")
    assert out["interval"] == "0.567 [0.392, 0.726]" and out["bare"] == "1.000"
    assert out["tiny"] == "9.21e-6 [0.000, 1.01e-5]"  # a cost per record is not "0.000"
    assert out["numbers"] == ["0", "1,250", "\u2014", "0.250"]
    assert out["durations"] == ["250 ms", "3.5 s", "2 min 5 s", "1 h 5 min"]
    assert out["time"] == "2026-12-02 18:34:20 UTC"
    assert out["markup"] == "&lt;b&gt;data&lt;/b&gt;"  # data is text, never markup
    assert (out["ascending"], out["descending"], out["ariaSort"]) == (["c", "b", "a"], ["a", "b", "c"], "descending")
    assert out["filtered"] == ["a"] and out["filterLabel"] == "Filter rows"
    assert out["barsLabel"] == out["barsTitle"] == "Means with their intervals. m: 0.500 (0.400 to 0.600)"
    assert out["whiskers"] == 3
    assert (out["histLabel"], out["histBars"]) == ("Distribution: 4 values; 0: 1, 1: 3", 2)
    assert out["paths"] == ["band", "line"] and out["role"] == "img"


# --- signing in against a server with authentication on ---


def _ready(url: str) -> bool:
    try:
        return _get(url + "/readyz")[0] == 200
    except OSError:  # not listening yet
        return False


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """``evalsi serve`` with one API key (the viewer role in every project), as an operator starts it; yields the
    HTTP address, the key and the file holding what it printed."""
    tmp = tmp_path_factory.mktemp("ui-auth")
    key = new_api_key()
    config = tmp / "evalsi.yaml"
    config.write_text(yaml.safe_dump({
        "auth": {"api_keys": {"keys": [{"name": "viewer", "key": hash_api_key(key), "roles": {"*": ["viewer"]}}]}},
        "sandboxd": {"enabled": False},
        # Named, though they are --state-dir's defaults: no other server's runs may show in this one (the test reads
        # an empty project).
        "metadata": {"url": f"sqlite:///{tmp / 'state' / 'evalsi.db'}"},
        "objects": {"url": str(tmp / "state" / "objects")},
    }))
    http, grpc_port, otlp_http, otlp_grpc = free_ports(4)
    log = (tmp / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "evalsi"), "serve", "--config", str(config), "--state-dir",
         str(tmp / "state"), "--http-port", str(http), "--grpc-port", str(grpc_port), "--otlp-http-port",
         str(otlp_http), "--otlp-grpc-port", str(otlp_grpc)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{http}"
    try:
        deadline = time.monotonic() + 180
        while not _ready(url):
            assert process.poll() is None and time.monotonic() < deadline, (tmp / "serve.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url, key, tmp / "serve.log"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.mark.parametrize("allowed_errors", [["401"]])
def test_sign_in_with_an_api_key_when_auth_is_on(
    auth_server: tuple[str, str, Path], page: Page, allowed_errors: list[str]
) -> None:
    url, key, printed = auth_server
    assert f"web ui     {url}/ui/" in printed.read_text()  # evalsi serve says where the UI is
    assert _get(url + "/ui/")[0] == 200  # the page itself needs no credential: it holds no data
    page.goto(url + "/ui/#/runs")
    banner = page.locator("#banner")
    banner.wait_for(state="visible")
    assert "HTTP 401" in page.locator("#banner-text").inner_text()
    assert "Sign in" in page.locator("#banner-text").inner_text()
    page.locator("#signin-button").click()
    page.locator("#signin-token").fill(key)
    page.locator("#signin-token").press("Enter")
    page.locator("main table").wait_for()
    assert banner.is_hidden()
    assert page.locator("main h1").inner_text() == "Runs"
    assert "No runs in project default." in page.locator("main tbody").inner_text()
    # Kept for this tab only: sessionStorage, never localStorage.
    assert page.evaluate("sessionStorage.getItem('evalsi.token')") == key
    assert key not in page.evaluate("JSON.stringify(Object.assign({}, localStorage))")
    page.locator("#signin-button").click()
    page.locator("#signout-button").click()
    banner.wait_for(state="visible")
    assert "HTTP 401" in page.locator("#banner-text").inner_text()
