"""The OAuth 2.0 device authorization grant (RFC 8628): show a code, the user approves it in any browser (on
another machine too), the CLI polls the token endpoint until then. Works over SSH and in containers."""

from __future__ import annotations

import time
from collections.abc import Callable

from evalsi.client_auth.oauth import (
    DEVICE_CODE_GRANT,
    IssuerEndpoints,
    LoginConfig,
    OAuthError,
    TokenSet,
    device_authorization,
    token_request,
)
from evalsi.errors import BadInputError

SLOW_DOWN_STEP_S = 5.0  # RFC 8628 §3.5: slow_down adds 5 seconds to the interval, for this and every later poll


def device_login(
    endpoints: IssuerEndpoints,
    config: LoginConfig,
    *,
    inform: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> TokenSet:
    """Start a device login, tell the user where to approve it, and poll until the issuer answers tokens."""
    if not endpoints.device_authorization_endpoint:
        raise BadInputError(f"issuer {config.issuer} offers no device login (no device_authorization_endpoint); "
                            "use --browser")
    grant = device_authorization(endpoints.device_authorization_endpoint, config.client_id, config.scopes,
                                 config.audience)
    inform(f"To sign in, open {grant.verification_uri} and enter the code {grant.user_code}")
    if grant.verification_uri_complete:
        inform(f"(or open {grant.verification_uri_complete})")
    deadline = clock() + grant.expires_in
    interval = grant.interval
    form = {"grant_type": DEVICE_CODE_GRANT, "device_code": grant.device_code, "client_id": config.client_id}
    while True:
        sleep(interval)
        if clock() >= deadline:
            raise BadInputError("the code was not approved in time; run `evalsi login` again")
        try:
            return token_request(endpoints.token_endpoint, form)
        except OAuthError as exc:
            if exc.error == "authorization_pending":
                continue
            if exc.error == "slow_down":
                interval += SLOW_DOWN_STEP_S
                continue
            if exc.error == "expired_token":
                raise BadInputError("the code expired before it was approved; run `evalsi login` again") from None
            if exc.error == "access_denied":
                raise BadInputError("the sign-in was refused at the issuer") from None
            raise
