"""A local HTTP server standing for the internet in egress tests (sandboxes reach it only through the egress
proxy); the ``internet`` fixture of tests/conftest.py serves it and yields its port."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

BODY = b"hello from the internet\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving() -> Iterator[int]:
    """Serve ``BODY`` to every GET on a loopback port until the block ends; yields the port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
