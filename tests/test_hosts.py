"""One loopback rule for every listener: the api, ingest and ``evalsi serve`` refuse another address without an
auth section (evalsi.gate.exposure), and agree on what stays local."""

from __future__ import annotations

import pytest

from evalsi.auth.config import load_auth_config
from evalsi.errors import BadInputError
from evalsi.gate.exposure import AccessSettings
from evalsi.hosts import is_loopback

LOCAL = ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LocalHost", " localhost "]
REMOTE = ["0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "example.com", "localhost.example.com", "", "[::2]"]


@pytest.mark.parametrize("host", LOCAL)
def test_loopback_hosts_are_accepted_without_an_auth_section(host: str) -> None:
    assert is_loopback(host)
    assert AccessSettings().check(host, "api.host") is None  # no warning either: nothing changed


@pytest.mark.parametrize("host", REMOTE)
def test_other_hosts_are_refused_without_an_auth_section(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(BadInputError, match=r"api\.host .*not a loopback address, and there is no auth section"):
        AccessSettings().check(host, "api.host")
    keys = load_auth_config({"api_keys": {"keys": []}, "allow_plaintext": True})
    assert AccessSettings(auth=keys).check(host, "api.host") is None
    warning = AccessSettings(no_auth=True).check(host, "api.host")
    assert warning is not None and "WITHOUT AUTHENTICATION (--no-auth or EVALSI_NO_AUTH=1)" in warning
