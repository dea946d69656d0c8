"""The web UI's static files on the api's HTTP port: ``/ui/`` and below, and ``GET /`` redirecting there.

The files ship inside the package (``evalsi/ui/static``) and carry no data: every page reads the public HTTP/JSON
API with the viewer's own credential, so they are served without one. They are read once, when the routes are
added (a few hundred KiB in all, bounded below), and answered from memory: a request path only ever selects one
of the files found there, so no path a caller sends can reach the filesystem. Every answer carries a strict
Content-Security-Policy (scripts, styles and connections to this origin only; no inline code), so a string from
the API that ever ended up as markup still could not run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from aiohttp import web

UI_PREFIX = "/ui/"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # A new release's files must replace the old ones at once: the browser revalidates each time.
    "Cache-Control": "no-cache",
}
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
}
MAX_FILES = 200
PAGES_DIR = "js/pages/"
PAGES_INDEX = "pages.json"
MAX_TOTAL_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str


def load_static(root: Traversable | None = None) -> dict[str, StaticFile]:
    """Every servable file under ``root`` (the package's ``static`` directory by default), keyed by its path
    relative to it with ``/`` separators, plus ``pages.json``: the page modules under ``js/pages/``. Files of a
    type not in the table above are not served."""
    base = root if root is not None else resources.files("evalsi.ui") / "static"
    files: dict[str, StaticFile] = {}
    total = 0
    pending: list[tuple[str, Traversable]] = [("", base)]
    while pending:
        prefix, directory = pending.pop()
        for entry in directory.iterdir():
            name = prefix + entry.name
            if entry.is_dir():
                pending.append((name + "/", entry))
                continue
            content_type = _CONTENT_TYPES.get("." + entry.name.rpartition(".")[2])
            if content_type is None:
                continue
            body = entry.read_bytes()
            total += len(body)
            if len(files) >= MAX_FILES or total > MAX_TOTAL_BYTES:
                raise ValueError(f"evalsi/ui/static: more than {MAX_FILES} files or {MAX_TOTAL_BYTES} bytes; "
                                 "the UI's assets are meant to be small")
            files[name] = StaticFile(body, content_type)
    # The router asks which page modules exist, so a page not built yet is said so without a failed fetch.
    pages = sorted(name.removeprefix(PAGES_DIR) for name in files if name.startswith(PAGES_DIR))
    files[PAGES_INDEX] = StaticFile(json.dumps(pages).encode(), _CONTENT_TYPES[".json"])
    return files


def add_ui_routes(app: web.Application, files: dict[str, StaticFile] | None = None) -> None:
    """``GET /`` → ``/ui/``, ``/ui`` → ``/ui/``, and ``/ui/<file>`` (``index.html`` for ``/ui/``). Add them before
    a catch-all route, which would otherwise take these paths."""
    served = load_static() if files is None else files

    async def redirect(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(UI_PREFIX)

    async def static(request: web.Request) -> web.StreamResponse:
        name = request.match_info["path"] or "index.html"
        found = served.get(name)
        if found is None:
            return web.Response(status=404, text=f"no UI file {name!r}; the UI starts at {UI_PREFIX}",
                                headers=_SECURITY_HEADERS)
        return web.Response(body=found.body, headers={**_SECURITY_HEADERS, "Content-Type": found.content_type})

    app.router.add_get("/", redirect)
    app.router.add_get(UI_PREFIX.rstrip("/"), redirect)
    app.router.add_get(UI_PREFIX + "{path:.*}", static)
