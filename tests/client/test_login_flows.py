"""The login flows against the local issuer: the device grant's polling (pending, slow_down, denied, expired) on a
clock shared with the issuer, PKCE's state and verifier checks, and the issuer checks (discovery's issuer, HTTPS)."""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.client_auth.browser_flow import browser_login, pkce_pair
from evalsi.client_auth.cache import CredentialCache
from evalsi.client_auth.device_flow import device_login
from evalsi.client_auth.login import login
from evalsi.client_auth.oauth import LoginConfig, OAuthError, check_endpoint, discover, token_request
from evalsi.errors import BadInputError
from evalsi.testing.issuer import CLI_CLIENT, LocalIssuer, ThreadedIssuer


class FakeClock:
    """Time for the issuer and the client alike: the client's sleeps advance it, nothing waits."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def issuer(clock: FakeClock) -> Iterator[LocalIssuer]:
    with ThreadedIssuer(clock=clock, device_interval_s=5, device_lifetime_s=60) as running:
        yield running


def _code(lines: list[str]) -> str:
    match = re.search(r"enter the code (\S+)", lines[0])
    assert match, lines
    return match[1]


def _approve_over_http(issuer: LocalIssuer, user_code: str, subject: str, deny: bool = False) -> None:
    form = {"user_code": user_code, "subject": subject, **({"deny": "1"} if deny else {})}
    urllib.request.urlopen(f"{issuer.url}/device/approve", data=urllib.parse.urlencode(form).encode()).read()


def test_device_flow_polls_at_the_interval_backs_off_on_slow_down_and_gets_tokens(
    issuer: LocalIssuer, clock: FakeClock
) -> None:
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        clock.slept.append(seconds)
        # The second wait is cut short (a laptop waking from sleep fires its timers early): the issuer answers
        # slow_down, and every later wait must be 5 s longer.
        clock.now += seconds / 2 if len(clock.slept) == 2 else seconds
        if len(clock.slept) == 4:
            _approve_over_http(issuer, _code(lines), "alice")

    tokens = device_login(discover(issuer.url), LoginConfig(issuer.url, CLI_CLIENT), inform=lines.append,
                          sleep=sleep, clock=clock)
    assert clock.slept == [5, 5, 10, 10]
    assert lines[1].startswith(f"(or open {issuer.url}/device?user_code=")
    assert tokens.refresh_token and tokens.expires_in == 300


def test_device_flow_refused_or_expired_says_so(issuer: LocalIssuer, clock: FakeClock) -> None:
    lines: list[str] = []

    def deny(seconds: float) -> None:
        clock.now += seconds
        _approve_over_http(issuer, _code(lines), "alice", deny=True)

    with pytest.raises(BadInputError, match="the sign-in was refused at the issuer"):
        device_login(discover(issuer.url), LoginConfig(issuer.url, CLI_CLIENT), inform=lines.append, sleep=deny,
                     clock=clock)

    def late(seconds: float) -> None:
        clock.now += 61  # past the code's lifetime at the issuer, before the client's own deadline

    lines.clear()
    with pytest.raises(BadInputError, match="the code expired before it was approved"):
        device_login(discover(issuer.url), LoginConfig(issuer.url, CLI_CLIENT), inform=lines.append, sleep=late,
                     clock=lambda: 0.0)  # the client's clock does not move: the issuer's expiry answers


def test_pkce_login_exchanges_the_code_with_the_verifier(issuer: LocalIssuer, tmp_path: Path) -> None:
    issuer.sign_in("bob")
    seen: list[str] = []

    def browser(url: str) -> None:
        seen.append(url)
        urllib.request.urlopen(url).read()  # the issuer redirects to the loopback callback

    signed_in = login("http://127.0.0.1:8080", CredentialCache(tmp_path / "credentials"), method="browser",
                      inform=lambda _line: None, config=LoginConfig(issuer.url, CLI_CLIENT), open_url=browser)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(seen[0]).query))
    assert query["code_challenge_method"] == "S256" and len(query["state"]) >= 32
    assert signed_in.refresh_token and issuer.grants == ["authorization_code"]


def test_pkce_callback_with_another_state_is_refused(issuer: LocalIssuer) -> None:
    issuer.sign_in("bob")

    def forged(url: str) -> None:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
        # Another page calls the callback with a code of its own choosing and a state it guessed.
        urllib.request.urlopen(f"{query['redirect_uri']}?code=attacker&state=guess").read()

    with pytest.raises(BadInputError, match="another state than this login sent"):
        browser_login(discover(issuer.url), LoginConfig(issuer.url, CLI_CLIENT), inform=lambda _l: None,
                      open_url=forged)
    assert "authorization_code" not in issuer.grants


def test_a_code_without_its_verifier_is_refused_by_the_issuer(issuer: LocalIssuer) -> None:
    issuer.sign_in("bob")
    _verifier, challenge = pkce_pair()
    redirect = "http://127.0.0.1:9/callback"
    query = urllib.parse.urlencode({"response_type": "code", "client_id": CLI_CLIENT, "redirect_uri": redirect,
                                    "code_challenge": challenge, "code_challenge_method": "S256", "state": "s"})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as found:
        opener.open(f"{issuer.url}/authorize?{query}")
    code = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(found.value.headers["location"]).query))["code"]
    with pytest.raises(OAuthError) as refused:
        token_request(f"{issuer.url}/token", {"grant_type": "authorization_code", "code": code,
                                              "redirect_uri": redirect, "client_id": CLI_CLIENT,
                                              "code_verifier": pkce_pair()[0]})
    assert refused.value.error == "invalid_grant"


def test_issuers_must_be_https_or_loopback_and_name_themselves() -> None:
    assert check_endpoint("https://sso.example.com/realms/eng", "issuer")
    assert check_endpoint("http://127.0.0.1:9400", "issuer")
    with pytest.raises(BadInputError, match="must be an https:// URL"):
        check_endpoint("http://sso.example.com", "issuer")


def test_discovery_naming_another_issuer_is_refused(issuer: LocalIssuer) -> None:
    aliased = issuer.url.replace("127.0.0.1", "localhost")
    with pytest.raises(BadInputError, match=r"names issuer .* not "):
        discover(aliased)
