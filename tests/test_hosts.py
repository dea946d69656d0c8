"""One loopback rule for every listener: the API's settings and ``evalsi serve`` agree on what stays local."""

from __future__ import annotations

import pytest

from evalsi.api.config import ServerConfig
from evalsi.errors import BadInputError
from evalsi.hosts import is_loopback
from evalsi.service.config import require_loopback

LOCAL = ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LocalHost", " localhost "]
REMOTE = ["0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "example.com", "localhost.example.com", "", "[::2]"]


@pytest.mark.parametrize("host", LOCAL)
def test_loopback_hosts_are_accepted_everywhere(host: str) -> None:
    assert is_loopback(host)
    require_loopback(host, "api.host")
    ServerConfig(host=host).validate()


@pytest.mark.parametrize("host", REMOTE)
def test_other_hosts_are_refused_everywhere(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(BadInputError, match=r"api\.host .*only listens on loopback"):
        require_loopback(host, "api.host")
    with pytest.raises(BadInputError):
        ServerConfig(host=host).validate()
    ServerConfig(host=host, allow_non_loopback=True).validate()
