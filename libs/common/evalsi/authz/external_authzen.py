"""The OpenID AuthZEN Authorization API 1.0 access evaluation, as a client (the PEP side).

``POST <url>`` with ``{subject: {type, id, properties}, action: {name}, resource: {type, id, properties},
context}`` as JSON; the PDP answers ``200`` with ``{decision: true|false, context?}``. Any other status, a body
that is not such an object, or a ``decision`` that is not a boolean is an error (the caller fails closed): the
spec returns denials as ``200 {decision: false}``, never as an HTTP error. Redirects are not followed, so the
question only ever goes to the configured URL.
"""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp

from evalsi.authz.external_answer import ExternalAnswer, ExternalAuthorizerError
from evalsi.authz.external_config import AuthzenEndpoint

MAX_ANSWER_BYTES = 64 * 1024


class AuthzenDecisionPoint:
    def __init__(self, endpoint: AuthzenEndpoint) -> None:
        self.endpoint = endpoint
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool = True  # the system's roots, unless ca_file names the PDP's CA

    def describe(self) -> str:
        return self.endpoint.describe()

    async def evaluate(self, query: Mapping[str, Any], timeout_s: float) -> ExternalAnswer:
        if self._session is None or self._session.closed:
            if self.endpoint.ca_file:
                self._ssl = ssl.create_default_context(cafile=self.endpoint.ca_file)
            self._session = aiohttp.ClientSession()
        # The spec's request identifier, echoed by the PDP: lets its logs be matched with ours.
        headers = {**self.endpoint.headers, "content-type": "application/json", "accept": "application/json",
                   "x-request-id": uuid.uuid4().hex}
        try:
            async with self._session.post(self.endpoint.url, data=json.dumps(query, separators=(",", ":")),
                                          headers=headers, allow_redirects=False, ssl=self._ssl,
                                          timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                body = await response.content.read(MAX_ANSWER_BYTES + 1)
                status = response.status
        except aiohttp.ClientError as exc:
            raise ExternalAuthorizerError(f"{type(exc).__name__}: {exc}".rstrip(": ")) from None
        if status != 200:
            raise ExternalAuthorizerError(f"the PDP answered HTTP {status}")
        if len(body) > MAX_ANSWER_BYTES:
            raise ExternalAuthorizerError(f"the PDP answered more than {MAX_ANSWER_BYTES} bytes")
        return parse_answer(body)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def parse_answer(body: bytes) -> ExternalAnswer:
    """An access evaluation response: ``{"decision": bool, "context": {...}?}``."""
    try:
        document = json.loads(body)
    except ValueError:
        raise ExternalAuthorizerError("the PDP's answer is not JSON") from None
    decision = document.get("decision") if isinstance(document, dict) else None
    if not isinstance(decision, bool):
        raise ExternalAuthorizerError('the PDP\'s answer has no boolean "decision"')
    context = document.get("context")
    reason: Any = ""
    if isinstance(context, dict):
        reason = context.get("reason") or context.get("reason_user") or context.get("reason_admin") or ""
        if isinstance(reason, dict):  # AuthZEN's examples give reasons per language: {"en": "..."}
            reason = reason.get("en") or next(iter(reason.values()), "")
    return ExternalAnswer(decision, " ".join(str(reason).split())[:200])
