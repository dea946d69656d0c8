"""A local SerpAPI-compatible search endpoint and page server, for playing the example's BFCL web search questions
offline (``evalsi cases play-bfcl bfcl://examples/benchmarks/bfcl/web_search/web_search_base``, its key ``KEY``):

    python examples/benchmarks/bfcl/local_search_server.py --port 8765

The search endpoint answers ``GET /search`` as SerpAPI does for the engine BFCL asks for (``duckduckgo``, its
``organic_results`` of ``position``, ``title``, ``link``, ``snippet``): a wrong key is a 401 with SerpAPI's error
object, the query ``over quota`` a 429 with its out-of-searches error, ``no results`` an answer without
``organic_results``, and ``rate limited once`` a ``429``-worded error the first time. Every request is kept in
``queries``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

KEY = "test-key-123"
PAGE = ("<!DOCTYPE html><html><head><title>Forbes China rich list &amp; more</title><style>p{color:red}</style>"
        "<script>var tracking = 1;</script></head><body><h1>China's richest</h1><p>In April 2025 <b>Zhang Yiming"
        "</b>, ByteDance's founder, tops\nthe list.</p><!-- ad --><template><p>hidden</p></template><ul><li> Da "
        "Hong Pao </li><li>tea&nbsp;&copy;</li></ul><br/>tail</body></html>")
LATIN = "<p>Caf\u00e9 cr\u00e8me</p>"


def organic(pages: str, query: str) -> list[dict[str, Any]]:
    return [{"position": n + 1, "title": f"Result {n + 1} for {query}", "link": f"{pages}/page{n}.html",
             "snippet": f"Snippet {n + 1}: {query}", "favicon": f"{pages}/favicon.ico"} for n in range(12)]


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/search":
            self._search({key: values[0] for key, values in parse_qs(url.query).items()})
        else:
            self._page(url.path)

    def _search(self, params: dict[str, str]) -> None:
        self.server.queries.append(params)
        query = params.get("q", "")
        status, answer = 200, {"search_metadata": {"status": "Success"},
                               "organic_results": organic(self.server.pages, query)}
        if params.get("api_key") != KEY:
            status, answer = 401, {"error": "Invalid API key. Your API key should be here: "
                                            "https://serpapi.com/manage-api-key"}
        elif query == "over quota":
            status, answer = 429, {"error": "Your account has run out of searches."}
        elif query == "no results":
            answer = {"search_metadata": {"status": "Success"}, "search_information": {"organic_results_state":
                                                                                       "Fully empty"}}
        elif query == "rate limited once" and sum(q.get("q") == query for q in self.server.queries) == 1:
            answer = {"error": "429 Too Many Requests"}
        self._send(status, json.dumps(answer).encode(), "application/json; charset=utf-8")

    def _page(self, path: str) -> None:
        if path.startswith("/page"):
            self._send(200, PAGE.encode("utf-8"), "text/html; charset=utf-8")
        elif path == "/latin":
            self._send(200, LATIN.encode("latin-1"), "text/html")
        elif path == "/gzip":
            self._send(200, gzip.compress(PAGE.encode()), "text/html; charset=utf-8", {"Content-Encoding": "gzip"})
        elif path == "/big":
            self._send(200, b"<p>" + b"x" * 200_000 + b"</p>", "text/html; charset=utf-8")
        elif path == "/slow":
            time.sleep(3)
            self._send(200, b"<p>late</p>", "text/html; charset=utf-8")
        elif path == "/moved":
            self._send(302, b"", "text/html", {"Location": "/page0.html"})
        elif path == "/down":
            self._send(503, b"busy", "text/plain")
        else:
            self._send(404, b"<h1>Not Found</h1>", "text/html")


@contextmanager
def serve(port: int = 0) -> Iterator[tuple[str, ThreadingHTTPServer]]:
    """One server for both roles (``/search`` and the pages) on ``port`` (0: a free one): its base URL and the
    server (``queries``)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    server.daemon_threads = True
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.pages = base  # type: ignore[attr-defined]
    server.queries = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base, server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    with contextlib.suppress(KeyboardInterrupt), serve(port) as (base, _server):
        print(f"local search endpoint and pages; --search-base-url {base}, key {KEY}", flush=True)
        threading.Event().wait()  # until Ctrl-C
