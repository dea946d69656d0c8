"""A local stand-in for GitHub's REST API, as far as a pull request's issue comments go, answering as GitHub does
(status codes, JSON bodies, ``Link`` pagination, the 65,536-character body limit, ``Bad credentials``), and
recording every call so tests can see what was sent."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GITHUB_BODY_LIMIT = 65_536
_LIST = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+)/([^/]+)/issues/comments/(\d+)$")


@dataclass
class Call:
    method: str
    path: str
    authorization: str
    body: dict[str, Any] | None


@dataclass
class FakeGitHub:
    token: str
    comments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # "owner/repo#n" -> comments
    calls: list[Call] = field(default_factory=list)
    fail_with: int = 0  # answer every call with this status (a GitHub outage)
    next_origin: str = ""  # where the Link header's next page points (default: this server)
    next_id: int = 1000
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def thread(self, repository: str, number: int) -> list[dict[str, Any]]:
        return self.comments.setdefault(f"{repository}#{number}", [])

    def add(self, repository: str, number: int, body: str, login: str = "someone") -> dict[str, Any]:
        self.next_id += 1
        comment = {"id": self.next_id, "node_id": f"IC_{self.next_id}", "body": body, "user": {"login": login},
                   "html_url": f"https://github.com/{repository}/pull/{number}#issuecomment-{self.next_id}",
                   "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}
        self.thread(repository, number).append(comment)
        return comment


def _handler(state: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, document: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            url = urlsplit(self.path)
            state.calls.append(Call(method, self.path, self.headers.get("Authorization", ""), body))
            if state.fail_with:
                self._answer(state.fail_with, {"message": "Server Error"})
                return
            if self.headers.get("Authorization") != f"Bearer {state.token}":
                self._answer(401, {"message": "Bad credentials",
                                   "documentation_url": "https://docs.github.com/rest"})
                return
            listing, one = _LIST.match(url.path), _ONE.match(url.path)
            if method == "GET" and listing:
                self._list(f"{listing[1]}/{listing[2]}", int(listing[3]), parse_qs(url.query))
            elif method == "POST" and listing:
                if not self._valid(body):
                    return
                assert body is not None
                self._answer(201, state.add(f"{listing[1]}/{listing[2]}", int(listing[3]), body["body"],
                                            login="github-actions[bot]"))
            elif method == "PATCH" and one:
                if not self._valid(body):
                    return
                assert body is not None
                for thread in state.comments.values():
                    for comment in thread:
                        if comment["id"] == int(one[3]):
                            comment["body"] = body["body"]
                            comment["updated_at"] = "2026-01-02T00:00:00Z"
                            self._answer(200, comment)
                            return
                self._answer(404, {"message": "Not Found"})
            else:
                self._answer(404, {"message": "Not Found"})

        def _valid(self, body: dict[str, Any] | None) -> bool:
            text = (body or {}).get("body")
            if not isinstance(text, str) or not text:
                self._answer(422, {"message": "Validation Failed", "errors": [{"resource": "IssueComment",
                                   "code": "missing_field", "field": "body"}]})
                return False
            if len(text) > GITHUB_BODY_LIMIT:
                self._answer(422, {"message": "Validation Failed", "errors": [{
                    "resource": "IssueComment", "code": "custom", "field": "body",
                    "message": f"body is too long (maximum is {GITHUB_BODY_LIMIT} characters)"}]})
                return False
            return True

        def _list(self, repository: str, number: int, query: dict[str, list[str]]) -> None:
            per_page = min(int(query.get("per_page", ["30"])[0]), 100)
            page = int(query.get("page", ["1"])[0])
            thread = state.thread(repository, number)
            chunk = thread[(page - 1) * per_page: page * per_page]
            headers = {}
            if page * per_page < len(thread):
                base = f"{state.next_origin or state.url}/repos/{repository}/issues/{number}/comments"
                headers["Link"] = f'<{base}?per_page={per_page}&page={page + 1}>; rel="next"'
            self._answer(200, chunk, headers)

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    return Handler


@contextmanager
def fake_github(token: str = "ghs_test_token") -> Iterator[FakeGitHub]:
    state = FakeGitHub(token=token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
