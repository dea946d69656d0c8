"""The native ``WebSearchAPI`` (``evalsi.packs.benchmarks.bfcl_web_search``) against bfcl-eval 2026.3.23's, both
pointed at the same local SerpAPI-compatible search endpoint and page server (``bfcl_web_servers``).

bfcl-eval's module imports ``serpapi`` (google-search-results) and ``html2text``, which are not installed: ``serpapi``
is stood in for by a ``GoogleSearch`` doing what that client's ``get_dict`` does (``requests.get(<base>/search,
params + source=python + output=json, timeout=60)``, the body read as JSON whatever the status), ``html2text`` by
an empty module (its markdown mode is not compared: the port does not build it). Its fetches use the real requests
and BeautifulSoup, so ``raw`` and ``truncate`` are compared with BFCL's own code.
"""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from benchmarks_import.bfcl_web_servers import KEY, LATIN, PAGE, serve
from evalsi.packs.benchmarks.bfcl_web_search import (
    PrivateAddressError,
    SearchEndpoint,
    WebSearchAPI,
    _check_peer,
    page_text,
)

KEY_ENV = "EVALSI_TEST_SEARCH_KEY"


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Any]]:
    with serve() as served:
        yield served


@pytest.fixture
def reference(server: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """bfcl-eval's WebSearchAPI class, its serpapi client asking the local endpoint."""
    base, _ = server

    class GoogleSearch:
        def __init__(self, params: dict[str, Any]) -> None:
            self.params = params

        def get_dict(self) -> dict[str, Any]:
            params = {**self.params, "source": "python", "output": "json"}
            return dict(json.loads(requests.get(f"{base}/search", params, timeout=60).text))

    monkeypatch.setitem(sys.modules, "serpapi", types.SimpleNamespace(GoogleSearch=GoogleSearch))
    monkeypatch.setitem(sys.modules, "html2text", types.ModuleType("html2text"))
    module = importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.func_source_code.web_search")
    monkeypatch.setattr(module, "GoogleSearch", GoogleSearch)
    monkeypatch.setenv("SERPAPI_API_KEY", KEY)
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(module, "time", types.SimpleNamespace(sleep=lambda _s: None))  # its back-off only
    return module.WebSearchAPI


def _port(server: tuple[str, Any], **limits: Any) -> WebSearchAPI:
    # The local page server is on loopback, which page fetches may reach only when the operator allows it.
    return WebSearchAPI(SearchEndpoint(api_key_env=KEY_ENV, base_url=server[0], private_addresses=True, **limits),
                        sleep=lambda _s: None)


@pytest.mark.parametrize("show_snippet", [True, False])
@pytest.mark.parametrize(("keywords", "kwargs"), [
    ("richest billionaire China", {}), ("tea", {"max_results": 3, "region": "cn-zh"}),
    ("over quota", {}), ("no results", {}), ("rate limited once", {})])
def test_search_matches_bfcl(server: tuple[str, Any], reference: Any, show_snippet: bool, keywords: str,
                             kwargs: dict[str, Any]) -> None:
    theirs, ours = reference(), _port(server)
    theirs._load_scenario({"show_snippet": show_snippet})
    ours._load_scenario({"show_snippet": show_snippet})
    server[1].queries.clear()
    expected = theirs.search_engine_query(keywords, **kwargs)
    their_queries = list(server[1].queries)
    server[1].queries.clear()
    assert ours.search_engine_query(keywords, **kwargs) == expected
    assert server[1].queries == their_queries  # the same requests, parameters and all
    if keywords == "richest billionaire China":
        assert len(expected) == 10 and ("body" in expected[0]) is show_snippet
        assert their_queries[0]["engine"] == "duckduckgo" and their_queries[0]["kl"] == "wt-wt"
    if keywords in ("over quota", "no results"):
        assert expected == {"error": "Failed to retrieve the search results from server. Please try again later."}
    if keywords == "rate limited once":  # retried after the 429, then the results
        assert len(their_queries) == 2 and len(expected) == 10


def test_a_wrong_key_and_an_unreachable_endpoint(server: tuple[str, Any], reference: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "wrong")
    monkeypatch.setenv(KEY_ENV, "wrong")
    assert _port(server).search_engine_query("tea") == reference().search_engine_query("tea") == {
        "error": "Failed to retrieve the search results from server. Please try again later."}
    closed = WebSearchAPI(SearchEndpoint(api_key_env=KEY_ENV, base_url="http://127.0.0.1:9"))
    assert set(closed.search_engine_query("tea")) == {"error"}  # urllib's words, not requests'
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ValueError, match=KEY_ENV):
        _port(server).search_engine_query("tea")


@pytest.mark.parametrize("path", ["/page0.html", "/latin", "/gzip", "/moved", "/missing", "/down"])
@pytest.mark.parametrize("mode", ["raw", "truncate", "bogus"])
def test_fetch_matches_bfcl(server: tuple[str, Any], reference: Any, path: str, mode: str) -> None:
    url = server[0] + path
    expected = reference().fetch_url_content(url, mode)
    assert _port(server).fetch_url_content(url, mode) == expected
    if path == "/missing":
        assert expected == {"error": f"An error occurred while fetching {url}: 404 Client Error: Not Found for url: "
                                     f"{url}"}
    if path == "/latin" and mode == "raw":
        assert expected == {"content": LATIN}
    if path in ("/page0.html", "/gzip", "/moved") and mode == "truncate":  # scripts, styles, comments gone
        assert expected == {"content": "Forbes China rich list & more\nChina's richest\nIn April 2025\nZhang Yiming\n"
                                       ", ByteDance's founder, tops\nthe list.\nDa Hong Pao\ntea\xa0©\ntail"}


def test_fetch_modes_and_limits(server: tuple[str, Any], reference: Any) -> None:
    url = server[0] + "/page0.html"
    with pytest.raises(ValueError, match="Invalid URL: ftp://x"):
        _port(server).fetch_url_content("ftp://x")
    with pytest.raises(ValueError, match="Invalid URL: ftp://x"):
        reference().fetch_url_content("ftp://x")
    markdown = _port(server).fetch_url_content(url, "markdown")
    assert markdown["error"].startswith(f"An error occurred while fetching {url}: mode 'markdown' is not available")
    assert _port(server).fetch_url_content(url)["content"] == PAGE  # raw is the default
    big = _port(server, max_bytes=100_000).fetch_url_content(server[0] + "/big")
    assert big == {"error": f"An error occurred while fetching {server[0]}/big: the page is larger than the fetch "
                            "limit of 100000 bytes"}
    slow = _port(server, timeout_s=1).fetch_url_content(server[0] + "/slow")
    assert "error" in slow, slow
    assert slow["error"].startswith(f"An error occurred while fetching {server[0]}/slow: ")


@pytest.mark.parametrize("html", [
    PAGE, "<p>x<p>y<script>1</script>z</p>  \n <div>\n\n</div>q &lt;tag&gt;", "plain text", "",
    "<p>unclosed <script>never closed", "<div><![CDATA[cd]]> a<?pi x?>b<!ELEMENT z></div>",
    "<pre>  keep\n  inner  </pre><textarea> t </textarea><noscript>n</noscript>"])
def test_truncate_text_is_beautifulsoups(html: str) -> None:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style"]):
        tag.extract()
    assert page_text(html) == soup.get_text(separator="\n", strip=True)


class _Socket:
    def __init__(self, address: str) -> None:
        self.address, self.closed = address, False

    def getpeername(self) -> tuple[str, int]:
        return self.address, 80

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.9", "169.254.169.254", "::1",
                                     "::ffff:127.0.0.1", "fe80::1%eth0", "fd00::1", "0.0.0.0", "224.0.0.1"])
def test_a_fetch_never_reaches_a_private_address_unless_allowed(address: str) -> None:
    sock = _Socket(address)
    with pytest.raises(PrivateAddressError, match="not a public address"):
        _check_peer(sock)
    assert sock.closed  # nothing of the request was sent on it
    _check_peer(_Socket("93.184.215.14"))  # a public address passes
    _check_peer(_Socket("2606:4700::6810:85e5"))


def test_the_local_page_is_refused_by_default(server: tuple[str, Any]) -> None:
    page = f"{server[0]}/page0.html"
    refused = WebSearchAPI(SearchEndpoint(api_key_env=KEY_ENV, base_url=server[0])).fetch_url_content(page)
    assert set(refused) == {"error"} and "127.0.0.1 is not a public address" in refused["error"]
    assert set(_port(server).fetch_url_content(page)) == {"content"}  # allowed by the operator
