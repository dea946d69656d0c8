"""Identity headers from a trusted proxy: honored only when the connection itself comes from a configured CIDR.

Anyone can send ``x-forwarded-user``; only the peer address (the TCP connection's, never a forwarded-for header)
says whether the proxy that vouches for it sent the request. Headers from any other peer are ignored, as if absent.
"""

from __future__ import annotations

from evalsi.auth.config import TrustedProxies
from evalsi.auth.principal import PROXY_PROVIDER, Credentials, Principal


def proxy_principal(credentials: Credentials, proxies: TrustedProxies) -> Principal | None:
    """The user a trusted proxy names, or ``None`` (no user header, or a peer outside ``proxies.cidrs``)."""
    if not proxies.trusts(credentials.peer):
        return None
    user = credentials.headers.get(proxies.user_header, "").strip()
    if not user:
        return None
    groups = credentials.headers.get(proxies.groups_header, "")
    email = credentials.headers.get(proxies.email_header, "").strip()
    return Principal(
        kind="user", provider=PROXY_PROVIDER, subject=user, name=user, email=email,
        # The proxy vouches for the address it forwards, as an identity provider's email_verified would.
        email_verified=bool(email),
        groups=tuple(group.strip() for group in groups.split(",") if group.strip()),
    )
