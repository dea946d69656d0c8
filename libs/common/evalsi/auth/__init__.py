"""Authentication: credentials (JWT bearer tokens, evk_ API keys, client certificates) to a Principal.

- ``principal``: ``Principal``, ``Credentials``, ``Unauthenticated``, ``PermissionDenied``, ``ANONYMOUS``: the
  contract with authorization and the enforcement point.
- ``config``: ``load_auth_config`` and the ``auth:`` section's dataclasses.
- ``authenticator``: ``Authenticator.authenticate(Credentials) -> Principal``, ``www_authenticate`` for 401s.
- ``jwt_tokens`` (bearer tokens), ``jwks`` (signing keys, cached and refetched), ``api_keys`` (``evk_`` keys,
  ``KeyLookup`` for stored ones), ``mtls`` (client certificates), ``proxy`` (trusted proxy headers).

The names below load on first use: importing ``evalsi.auth.principal`` (as every handler does) costs nothing
of PyJWT, cryptography or aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from evalsi.auth.api_keys import ApiKey, KeyLookup, hash_api_key, new_api_key
    from evalsi.auth.authenticator import Authenticator, MissingCredential
    from evalsi.auth.config import AuthConfig, load_auth_config
    from evalsi.auth.principal import ANONYMOUS, Credentials, PermissionDenied, Principal, Unauthenticated

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    ".api_keys": ("ApiKey", "KeyLookup", "hash_api_key", "new_api_key"),
    ".authenticator": ("Authenticator", "MissingCredential"),
    ".config": ("AuthConfig", "load_auth_config"),
    ".principal": ("ANONYMOUS", "Credentials", "PermissionDenied", "Principal", "Unauthenticated"),
})

__all__ = ["ANONYMOUS", "ApiKey", "AuthConfig", "Authenticator", "Credentials", "KeyLookup", "MissingCredential",
           "PermissionDenied", "Principal", "Unauthenticated", "hash_api_key", "load_auth_config", "new_api_key"]
