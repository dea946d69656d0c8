"""A GitHub Actions job's own OIDC token as the credential: no stored secret.

A job with ``permissions: id-token: write`` gets ``ACTIONS_ID_TOKEN_REQUEST_URL`` and
``ACTIONS_ID_TOKEN_REQUEST_TOKEN``; ``GET <url>&audience=<aud>`` with that request token as a bearer answers
``{"value": "<JWT>"}``, a token signed by ``https://token.actions.githubusercontent.com`` naming the repository
and ref. ``EVALSI_OIDC_AUDIENCE`` names the audience the server's github provider expects. The token is fetched
on first use and again shortly before it expires.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from evalsi.errors import BadInputError, InfraError

AUDIENCE_ENV = "EVALSI_OIDC_AUDIENCE"
REQUEST_URL_ENV = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN_ENV = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
MARGIN_S = 60.0
TIMEOUT_S = 30.0


@dataclass(repr=False)
class GithubActionsToken:
    """Fetches the job's token for ``audience``; caches it until a minute before its ``exp``."""

    request_url: str
    request_token: str
    audience: str
    clock: Callable[[], float] = time.time
    origin: str = field(init=False)
    _token: str = field(default="", init=False)
    _expires_at: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.origin = f"the GitHub Actions OIDC token for audience {self.audience!r} (${AUDIENCE_ENV})"

    def authorization(self) -> str:
        if not self._token or self.clock() >= self._expires_at - MARGIN_S:
            self._token = self._fetch()
            self._expires_at = _expiry(self._token) or self.clock() + 5 * 60
        return "Bearer " + self._token

    def _fetch(self) -> str:
        separator = "&" if urllib.parse.urlsplit(self.request_url).query else "?"
        url = f"{self.request_url}{separator}audience={urllib.parse.quote(self.audience, safe='')}"
        request = urllib.request.Request(url, headers={"authorization": f"bearer {self.request_token}",
                                                       "accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                value = json.loads(response.read(1 << 20)).get("value")
        except urllib.error.HTTPError as exc:
            raise InfraError(f"{self.origin}: ${REQUEST_URL_ENV} answered HTTP {exc.code}") from None
        except urllib.error.URLError as exc:
            raise InfraError(f"{self.origin}: cannot reach ${REQUEST_URL_ENV}: {exc.reason}") from None
        except (ValueError, AttributeError):
            raise InfraError(f"{self.origin}: ${REQUEST_URL_ENV} did not answer a JSON object") from None
        if not isinstance(value, str) or not value:
            raise InfraError(f"{self.origin}: ${REQUEST_URL_ENV} answered no token ('value')")
        return value

    def __repr__(self) -> str:
        return f"GithubActionsToken(audience={self.audience!r})"


def github_actions_token(env: Mapping[str, str]) -> GithubActionsToken:
    """The source for this job, or a BadInputError saying what the workflow lacks."""
    url, token = env.get(REQUEST_URL_ENV, ""), env.get(REQUEST_TOKEN_ENV, "")
    if not url or not token:
        raise BadInputError(f"${AUDIENCE_ENV} is set but ${REQUEST_URL_ENV} and ${REQUEST_TOKEN_ENV} are not: the "
                            "job needs `permissions: id-token: write` to get its OIDC token")
    return GithubActionsToken(url, token, env[AUDIENCE_ENV])


def _expiry(token: str) -> float:
    """The ``exp`` claim, read without verifying (the server verifies; this only says when to fetch again)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims.get("exp", 0))
    except (IndexError, ValueError, TypeError, AttributeError):
        return 0.0
