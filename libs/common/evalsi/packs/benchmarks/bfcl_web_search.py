"""A native port of bfcl-eval 2026.3.23's ``WebSearchAPI`` (its ``web_search`` category's class), without serpapi,
requests, BeautifulSoup or html2text, its search going only where the operator's :class:`SearchEndpoint` says.

``search_engine_query`` asks a SerpAPI-compatible endpoint as bfcl-eval's serpapi client does
(``GET <base_url>/search`` with ``engine=duckduckgo``, ``q``, ``kl`` the region, ``api_key``, ``output=json``,
``source=python``) and returns BFCL's shapes: a list of ``{"title", "href", "body"}`` (no ``body`` when
``show_snippet`` is off), ``{"error": "Failed to retrieve ..."}`` when the answer has no ``organic_results``, and
``{"error": <message>}`` when the request fails. A 429 (raised, or as the payload's ``error``) is retried with
BFCL's back-off, but at most :data:`MAX_RATE_RETRIES` times (BFCL retries forever), then it is the error.

``fetch_url_content`` returns ``{"content": ...}`` or ``{"error": "An error occurred while fetching <url>: ..."}``
as BFCL does, with its browser-like headers; ``raw`` is the body decoded as requests decodes it (the Content-Type's
charset, ISO-8859-1 for a ``text/`` type without one, else UTF-8 where requests would guess) and ``truncate`` its
text as BeautifulSoup's ``get_text(separator="\\n", strip=True)`` after removing ``script`` and ``style``.
``markdown`` (html2text's conversion) is not built: it returns an error saying so. A fetch reads at most
``max_bytes`` and takes at most ``timeout_s`` in all (BFCL: 20 s per socket operation, no size limit); past either
it is an error. Error texts for a refused status are requests' (``404 Client Error: Not Found for url: <url>``);
those for a connection that fails are urllib's, not requests'.

The model under test picks the URLs it fetches, and a page can tell it which: a fetch that reaches a loopback,
private, link-local, multicast or reserved address (cloud metadata at 169.254.169.254 among them) is refused, the
address checked on the connected socket itself, so a redirect or a name that resolves there is refused too, unless
the operator allows those addresses (``SearchEndpoint.private_addresses``). Fetches go direct, not through a proxy
from the environment (a proxy's address would be the one checked). BFCL fetches whatever the model names.
"""

from __future__ import annotations

import gzip
import http.client
import ipaddress
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from email.message import Message
from html.parser import HTMLParser
from typing import Any

DEFAULT_BASE_URL = "https://serpapi.com"
MAX_RATE_RETRIES = 5  # 429s retried before the query is an error (BFCL: no limit)
SEARCH_TIMEOUT_S = 60.0  # serpapi's client's timeout
# bfcl_eval's fetch_url_content headers (Accept-Encoding without br: nothing here decodes brotli)
FETCH_HEADERS = {
    "User-Agent": ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                   "Chrome/112.0.0.0 Safari/537.36"),
    "Accept": ("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,"
               "application/signed-exchange;v=b3;q=0.7"),
    "Accept-Language": "en-US,en;q=0.9",
    "Accept-Encoding": "gzip, deflate",
    "Connection": "keep-alive",
    "Upgrade-Insecure-Requests": "1",
    "Referer": "https://www.google.com/",
    "Sec-Fetch-Site": "same-origin",
    "Sec-Fetch-Mode": "navigate",
    "Sec-Fetch-User": "?1",
    "Sec-Fetch-Dest": "document",
}
API_DESCRIPTION = ("This tool belongs to the Web Search API category. It provides functions to search the web and "
                   "browse search results.")


@dataclass(frozen=True)
class SearchEndpoint:
    """Where searches go and how pages are fetched: the operator's settings, never a record's. ``api_key_env``
    names the environment variable holding the key."""

    api_key_env: str
    base_url: str = DEFAULT_BASE_URL
    max_bytes: int = 5_000_000
    timeout_s: float = 20.0
    private_addresses: bool = False  # page fetches may reach this machine's and its networks' own addresses

    def api_key(self) -> str:
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise ValueError(f"the search API key's environment variable {self.api_key_env} is not set")
        return key


class WebSearchAPI:
    """BFCL's ``WebSearchAPI`` (see the module's docstring); ``sleep`` is the back-off's (tests pass a fake)."""

    def __init__(self, endpoint: SearchEndpoint, sleep: Any = time.sleep) -> None:
        self._api_description = API_DESCRIPTION
        self.show_snippet = True
        self._endpoint = endpoint
        self._sleep = sleep
        self._backoff_random = random.Random()

    def _load_scenario(self, initial_config: dict[str, Any], long_context: bool = False) -> None:
        self.show_snippet = initial_config["show_snippet"]

    def search_engine_query(self, keywords: str, max_results: int | None = 10,
                            region: str | None = "wt-wt") -> list[dict[str, str]] | dict[str, str]:
        params = {"engine": "duckduckgo", "q": keywords, "kl": region, "api_key": self._endpoint.api_key(),
                  "source": "python", "output": "json"}
        url = self._endpoint.base_url.rstrip("/") + "/search?" + urllib.parse.urlencode(
            {key: str(value) for key, value in params.items() if value is not None})
        backoff = 2.0
        for attempt in range(MAX_RATE_RETRIES + 1):
            try:
                results = _search(url)
            except Exception as exc:  # BFCL: any failure of the request is the error, a 429 is retried
                if "429" in str(exc) and attempt < MAX_RATE_RETRIES:
                    backoff = self._wait(backoff)
                    continue
                return {"error": str(exc)}
            if "error" in results and "429" in str(results["error"]) and attempt < MAX_RATE_RETRIES:
                backoff = self._wait(backoff)
                continue
            break
        if "organic_results" not in results:
            return {"error": "Failed to retrieve the search results from server. Please try again later."}
        found = results["organic_results"][:max_results]
        if self.show_snippet:
            return [{"title": r["title"], "href": r["link"], "body": r["snippet"]} for r in found]
        return [{"title": r["title"], "href": r["link"]} for r in found]

    def _wait(self, backoff: float) -> float:
        self._sleep(backoff + self._backoff_random.uniform(0, backoff))
        return min(backoff * 2, 120)

    def fetch_url_content(self, url: str, mode: str = "raw") -> dict[str, str]:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Invalid URL: {url}")
        try:
            text = _fetch(url, self._endpoint)
            if mode == "raw":
                return {"content": text}
            if mode == "markdown":
                raise ValueError("mode 'markdown' is not available here (BFCL converts with html2text, which this "
                                 "port does not have); use 'raw' or 'truncate'")
            if mode == "truncate":
                return {"content": page_text(text)}
            raise ValueError(f"Unsupported mode: {mode}")
        except Exception as exc:
            return {"error": f"An error occurred while fetching {url}: {exc}"}


def _search(url: str) -> dict[str, Any]:
    """The endpoint's JSON answer; like serpapi's client, an error status's body is read as the answer."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=SEARCH_TIMEOUT_S) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
    answer = json.loads(body)
    if not isinstance(answer, dict):
        raise ValueError("the search endpoint answered JSON that is not an object")
    return answer


def _fetch(url: str, endpoint: SearchEndpoint) -> str:
    """The page's body as text (see the module's docstring); raises with requests' words for a refused status."""
    deadline = time.monotonic() + endpoint.timeout_s
    request = urllib.request.Request(url, headers=FETCH_HEADERS)
    opener = _ANY_ADDRESS if endpoint.private_addresses else _PUBLIC_ONLY
    try:
        response = opener.open(request, timeout=endpoint.timeout_s)
    except urllib.error.HTTPError as exc:
        kind = "Client" if exc.code < 500 else "Server"
        raise OSError(f"{exc.code} {kind} Error: {exc.reason} for url: {exc.url}") from None
    with response:
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read(65536):
            size += len(chunk)
            if size > endpoint.max_bytes:
                raise OSError(f"the page is larger than the fetch limit of {endpoint.max_bytes} bytes")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the page took longer than the fetch limit of {endpoint.timeout_s:g} s")
            chunks.append(chunk)
        headers: Message = response.headers
    body = _decoded(b"".join(chunks), headers.get("Content-Encoding", ""), endpoint.max_bytes)
    return body.decode(_charset(headers), errors="replace")


class PrivateAddressError(OSError):
    """A page fetch reached an address the operator did not allow (see the module's docstring)."""


def _check_peer(sock: Any) -> None:
    address = ipaddress.ip_address(sock.getpeername()[0].split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not address.is_global or address.is_multicast:
        sock.close()
        raise PrivateAddressError(f"{address} is not a public address: page fetches may not reach it "
                                  "(play-bfcl --fetch-private-addresses allows it)")


class _PublicHTTPConnection(http.client.HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _check_peer(self.sock)  # before a byte of the request is sent


class _PublicHTTPSConnection(http.client.HTTPSConnection):
    def connect(self) -> None:
        # The socket is connected, then wrapped: checked once connected, before the handshake sends anything
        # the page could use.
        http.client.HTTPConnection.connect(self)
        _check_peer(self.sock)
        server_hostname = self._tunnel_host or self.host  # type: ignore[attr-defined]
        self.sock = self._context.wrap_socket(self.sock, server_hostname=server_hostname)  # type: ignore[attr-defined]


class _PublicHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_PublicHTTPConnection, req)


class _PublicHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_PublicHTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]


# No ProxyHandler from the environment in either: fetches go direct.
_PUBLIC_ONLY = urllib.request.build_opener(urllib.request.ProxyHandler({}), _PublicHTTPHandler, _PublicHTTPSHandler)
_ANY_ADDRESS = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _decoded(body: bytes, encoding: str, max_bytes: int) -> bytes:
    encoding = encoding.strip().lower()
    if encoding not in ("gzip", "deflate"):
        return body
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error:
        out = gzip.decompress(body) if encoding == "gzip" else zlib.decompress(body, -zlib.MAX_WBITS)
    if len(out) > max_bytes:
        raise OSError(f"the page is larger than the fetch limit of {max_bytes} bytes")
    return out


def _charset(headers: Message) -> str:
    """requests' ``get_encoding_from_headers``: the charset, else ISO-8859-1 for text/*, else UTF-8 (requests would
    guess with charset_normalizer)."""
    charset = headers.get_content_charset()
    if charset:
        try:
            "".encode(charset)
            return charset
        except LookupError:
            return "utf-8"
    return "iso-8859-1" if headers.get_content_type().startswith("text/") else "utf-8"


class _Text(HTMLParser):
    """The text BeautifulSoup's ``get_text(separator="\\n", strip=True)`` gives after ``script`` and ``style`` are
    removed: each run of text between tags, stripped, the empty ones left out; text inside ``template`` (a
    TemplateString to BeautifulSoup), comments, declarations and processing instructions are not text."""

    _SKIPPED = ("script", "style", "template")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.inside: list[str] = []
        self.run: list[str] = []

    def _flush(self) -> None:
        text = "".join(self.run).strip()
        self.run = []
        if text:
            self.parts.append(text)

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        self._flush()
        if tag in self._SKIPPED:
            self.inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        self._flush()
        if tag in self.inside:
            del self.inside[len(self.inside) - 1 - self.inside[::-1].index(tag):]

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self._flush()

    def handle_data(self, data: str) -> None:
        if not self.inside:
            self.run.append(data)

    def handle_comment(self, data: str) -> None:
        self._flush()

    def handle_pi(self, data: str) -> None:  # BeautifulSoup keeps it as a node that is not text
        self._flush()

    def handle_decl(self, decl: str) -> None:
        self._flush()

    def unknown_decl(self, data: str) -> None:  # CDATA: BeautifulSoup keeps it as text
        self._flush()
        if not self.inside and data.startswith("CDATA["):
            self.run.append(data[len("CDATA["):])
            self._flush()


def page_text(html: str) -> str:
    """``truncate`` mode's text of an HTML page (see :class:`_Text`)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    parser._flush()
    return "\n".join(parser.parts)
