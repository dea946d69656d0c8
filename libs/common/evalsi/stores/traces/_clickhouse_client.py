"""Reaching a ClickHouse trace store: its URL and login, and reads that name any number of traces."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from evalsi.errors import BadInputError
from evalsi.masking import mask_url
from evalsi.stores.urls import TRACES_PASSWORD_FILE_ENV, with_password_file

from .query import TENANT

DEFAULT_PORT = 9000
_IDS_PER_QUERY = 2_000
IN_KEY = "project_id = %(project)s AND tenant_id = %(tenant)s AND trace_id IN %(traces)s"
# Filters on non-key columns must see rows after FINAL's replacing merge, not before it in PREWHERE.
READ_SETTINGS = {"optimize_move_to_prewhere": 0}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEX_IDS = re.compile(r"[0-9a-f]+(?:','[0-9a-f]+)*")  # trace ids joined by "','", each only hex digits


def select_in(client: Any, sql: str, project: str, trace_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """``sql`` (filtering on ``trace_id IN %(traces)s``) for any number of traces: in chunks, because the server
    refuses a query text over ``max_query_size`` (256 KiB), some seven thousand ids."""
    rows: list[tuple[Any, ...]] = []
    for start in range(0, len(trace_ids), _IDS_PER_QUERY):
        chunk = trace_ids[start:start + _IDS_PER_QUERY]
        joined = "','".join(chunk)
        params: dict[str, Any] = {"project": project, "tenant": TENANT}
        if _HEX_IDS.fullmatch(joined):
            # Hex ids need no escaping: written into the text here, in C, rather than escaped one by one in Python
            # by the driver (3% of an ingest process's CPU, for the summary passes' reads).
            query = sql.replace("%(traces)s", f"('{joined}')")
        else:
            query, params["traces"] = sql, tuple(chunk)
        rows.extend(client.execute(query, params, settings=READ_SETTINGS))
    return rows


def parse_clickhouse_url(url: str) -> tuple[str, int, str]:
    """``clickhouse://[user@]host[:tcp_port]/database`` → (host, port, database); the port is the native TCP one.
    The user and its password are :func:`clickhouse_login`'s."""
    forms = "clickhouse://[user@]host[:tcp_port]/database"
    match = re.fullmatch(r"clickhouse://(?:[^/@?#]*@)?([^/:?#@]+)(?::([^/?#]*))?/([^/?#]*)", url)
    if not match:
        raise BadInputError(f"trace store URL {mask_url(url)!r} is not supported; a ClickHouse URL is {forms}")
    host, port_text, database = match.groups()
    if port_text is not None and not port_text.isdigit():
        raise BadInputError(f"trace store URL {mask_url(url)!r}: port {port_text!r} is not a number")
    port = int(port_text) if port_text else DEFAULT_PORT
    if not 0 < port < 65536:
        raise BadInputError(f"trace store URL {mask_url(url)!r}: port {port} is out of range")
    if not _NAME.match(database):
        raise BadInputError(f"trace store URL {mask_url(url)!r}: database {database!r} must be a plain name ({forms})")
    return host, port, database


def clickhouse_login(url: str) -> tuple[str, str]:
    """The user and password the store signs in with: the URL's ``user[:password]@`` (``default`` and no password
    when it names none), the password else read from the file ``EVALSI_TRACES_PASSWORD_FILE`` names (evalsi.yaml's
    ``traces.password_file``, which ``evalsi serve`` hands on), so it need not sit in the URL."""
    password_file = os.environ.get(TRACES_PASSWORD_FILE_ENV, "")
    if password_file:
        url = with_password_file(url, password_file, TRACES_PASSWORD_FILE_ENV)
    parts = urlsplit(url)
    return unquote(parts.username or "") or "default", unquote(parts.password or "")
