"""One summary comment per suite on a GitHub pull request, through GitHub's REST API: found by its marker among
the pull request's comments and updated, or created when there is none, so a re-run never adds a second one."""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from evalsi.client_auth.oauth import check_endpoint
from evalsi.errors import EvalsiError

DEFAULT_API = "https://api.github.com"
API_VERSION = "2022-11-28"
# A comment is at most 65,536 characters; a page of 100 of them in UTF-8 fits in this many bytes.
MAX_PAGE_BYTES = 32 * 1024 * 1024
PAGE_SIZE = 100
# A pull request with more comments than this is searched no further, and a new summary is posted.
MAX_PAGES = 30
DEFAULT_TIMEOUT_S = 30.0


class CommentError(EvalsiError):
    """GitHub did not take the comment: the call, its status and what GitHub said."""


@dataclass(frozen=True)
class PullRequest:
    """Where the comment goes; ``token`` is sent to ``api`` alone and never shown."""

    repository: str  # owner/name
    number: str
    token: str = field(repr=False)
    api: str = DEFAULT_API

    def __post_init__(self) -> None:
        check_endpoint(self.api, "--github-api")


@dataclass(frozen=True)
class Posted:
    """What happened: ``created`` or ``updated``, the comment's id and page."""

    action: str
    comment_id: int
    url: str


def marker(key: str) -> str:
    """The hidden line that names a suite's comment; ``key`` is the suite's (its name)."""
    safe = "".join(c if c.isalnum() or c in "-_./" else "-" for c in key)[:100]
    return f"<!-- evalsi-ci:{safe} -->"


def _same_origin(url: str, api: str) -> bool:
    # A next-page link elsewhere would take the token with it.
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(api)
    return (a.scheme, a.netloc) == (b.scheme, b.netloc)


class _GitHub:
    def __init__(self, session: aiohttp.ClientSession, pull: PullRequest) -> None:
        self._session = session
        self._pull = pull
        self._base = pull.api.rstrip("/")

    async def call(self, method: str, url: str, body: dict[str, Any] | None = None) -> tuple[Any, str | None]:
        """The JSON GitHub answered and the next page's URL (the Link header's rel=next), or CommentError."""
        what = f"{method} {url}"
        try:
            # No redirects: one to another host would take the token along.
            async with self._session.request(method, url, json=body, allow_redirects=False) as response:
                text = await _bounded_text(response, what)
                if response.status >= 300:
                    raise CommentError(f"{what}: HTTP {response.status}: {_message(text)}")
                following = response.links.get("next")
                url_next = str(following["url"]) if following is not None and "url" in following else None
                return json.loads(text) if text else None, url_next
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise CommentError(f"{what}: {type(exc).__name__}: {exc}") from None
        except json.JSONDecodeError:
            raise CommentError(f"{what}: the answer is not JSON") from None

    async def find(self, mark: str) -> int | None:
        """The id of the first comment whose body starts with ``mark``."""
        url: str | None = (f"{self._base}/repos/{self._pull.repository}/issues/{self._pull.number}/comments"
                           f"?per_page={PAGE_SIZE}")
        for _ in range(MAX_PAGES):
            if url is None or not _same_origin(url, self._pull.api):
                return None
            page, url = await self.call("GET", url)
            for comment in page if isinstance(page, list) else []:
                if isinstance(comment, dict) and str(comment.get("body") or "").startswith(mark):
                    return int(comment["id"])
        return None

    async def upsert(self, mark: str, body: str) -> Posted:
        existing = await self.find(mark)
        if existing is None:
            url = f"{self._base}/repos/{self._pull.repository}/issues/{self._pull.number}/comments"
            answer, _ = await self.call("POST", url, {"body": body})
            action = "created"
        else:
            url = f"{self._base}/repos/{self._pull.repository}/issues/comments/{existing}"
            answer, _ = await self.call("PATCH", url, {"body": body})
            action = "updated"
        if not isinstance(answer, dict) or "id" not in answer:
            raise CommentError(f"{url}: the answer names no comment id")
        return Posted(action, int(answer["id"]), str(answer.get("html_url", "")))


async def _bounded_text(response: aiohttp.ClientResponse, what: str) -> str:
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_PAGE_BYTES:
            raise CommentError(f"{what}: the answer exceeds {MAX_PAGE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _message(text: str) -> str:
    """GitHub's error message, short: its ``message`` field when the body is its JSON error."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return " ".join(text.split())[:300] or "(no body)"
    return str(document.get("message", ""))[:300] if isinstance(document, dict) else text[:300]


async def upsert_comment(pull: PullRequest, body: str, mark: str, *,
                         timeout_s: float = DEFAULT_TIMEOUT_S) -> Posted:
    """Update the pull request's comment that starts with ``mark`` to ``body`` (which must start with it), or
    create it. Every call has ``timeout_s``; anything GitHub refuses is a CommentError."""
    if not body.startswith(mark):
        raise ValueError("the comment body must start with its marker, or a re-run could not find it")
    headers = {"Authorization": f"Bearer {pull.token}", "Accept": "application/vnd.github+json",
               "X-GitHub-Api-Version": API_VERSION, "User-Agent": "evalsi-ci"}
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        return await _GitHub(session, pull).upsert(mark, body)
