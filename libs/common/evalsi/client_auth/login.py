"""``evalsi login``'s work: find the issuer (the server's ``/.well-known/evalsi-auth``, or given), discover its
endpoints, sign in by the device grant or the browser, and cache the tokens for the server."""

from __future__ import annotations

import time
import webbrowser
from collections.abc import Callable
from typing import Literal

from evalsi.client_auth.cache import CachedLogin, CredentialCache
from evalsi.client_auth.oauth import LoginConfig, discover, fetch_login_config

Method = Literal["device", "browser"]


def login(
    server: str,
    cache: CredentialCache,
    *,
    method: Method,
    inform: Callable[[str], None],
    config: LoginConfig | None = None,
    open_url: Callable[[str], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
) -> CachedLogin:
    """Sign in for ``server`` and cache the login; ``config`` skips the server's advertisement."""
    config = config or fetch_login_config(server)
    endpoints = discover(config.issuer)
    if method == "device":
        from evalsi.client_auth.device_flow import device_login

        tokens = device_login(endpoints, config, inform=inform, sleep=sleep)
    else:
        from evalsi.client_auth.browser_flow import browser_login

        tokens = browser_login(endpoints, config, inform=inform, open_url=open_url or webbrowser.open)
    signed_in = CachedLogin(
        issuer=config.issuer, client_id=config.client_id, token_endpoint=endpoints.token_endpoint,
        access_token=tokens.access_token, refresh_token=tokens.refresh_token,
        expires_at=clock() + tokens.expires_in if tokens.expires_in else 0.0, scopes=config.scopes,
    )
    cache.put(server, signed_in)
    return signed_in
