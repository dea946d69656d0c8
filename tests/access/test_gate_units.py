"""The gate's pure parts: peer addresses from grpc, the headers CEL may see, the project a credential binds."""

from __future__ import annotations

import pytest

from evalsi.auth.principal import Principal
from evalsi.gate.access import credential_project, visible_headers
from evalsi.gate.credentials import _cookies, grpc_peer_address


@pytest.mark.parametrize(("peer", "address"), [
    ("ipv4:127.0.0.1:50312", "127.0.0.1"),
    ("ipv6:[::1]:50312", "::1"),
    ("ipv6:[2001:db8::7]:443", "2001:db8::7"),
    ("unix:/tmp/socket", ""),
    ("", ""),
])
def test_the_peer_address_of_a_grpc_call(peer: str, address: str) -> None:
    assert grpc_peer_address(peer) == address


def test_credentials_never_reach_cel_rules() -> None:
    headers = {"authorization": "Bearer secret", "cookie": "session=secret", "x-api-key": "evk_secret",
               "proxy-authorization": "Basic secret", "x-evalsi-project": "a", "user-agent": "ci"}
    assert visible_headers(headers) == {"x-evalsi-project": "a", "user-agent": "ci"}


def test_a_credential_binds_a_project_only_when_it_names_exactly_one() -> None:
    assert credential_project(Principal("apikey", roles={"a": ("ingest",)})) == "a"
    assert credential_project(Principal("apikey", roles={"a": ("ingest",), "b": ("ingest",)})) == ""
    assert credential_project(Principal("apikey", roles={"*": ("viewer",)})) == ""
    assert credential_project(Principal("user")) == ""


def test_cookies_of_a_grpc_call_and_a_malformed_header() -> None:
    assert _cookies("session=abc; theme=dark") == {"session": "abc", "theme": "dark"}
    assert _cookies("") == {}
    assert _cookies('bad"cookie') == {}
