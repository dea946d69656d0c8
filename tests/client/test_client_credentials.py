"""Which credential a client sends (flag > environment > login cache), the 0600 cache, refresh of a cached
login against a real local issuer, token files read per call, and a GitHub Actions job's OIDC token."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from evalsi.client_auth.cache import CachedLogin, CredentialCache, cache_path, server_key
from evalsi.client_auth.oauth import discover, token_request
from evalsi.client_auth.sources import (
    CachedLoginCredential,
    StaticCredential,
    TokenFileCredential,
    refresh_login,
    resolve_credentials,
)
from evalsi.errors import BadInputError, InfraError
from evalsi.testing.issuer import CLI_CLIENT, LocalIssuer, ThreadedIssuer

SERVER = "http://127.0.0.1:8080"


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    with ThreadedIssuer(users={"alice": {"email": "alice@example.com"}}) as running:
        yield running


def test_cache_is_created_0600_in_a_0700_directory_and_read_back(tmp_path: Path) -> None:
    cache = CredentialCache(tmp_path / "config" / "evalsi" / "credentials")
    cache.put("HTTP://127.0.0.1:8080/", CachedLogin("https://iss", "cli", "https://iss/token", "access-1", "refresh-1",
                                                    5.0))
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.path.parent.stat().st_mode) == 0o700
    assert cache.servers() == [SERVER]  # one spelling per server
    login = cache.get(SERVER + "/")
    assert login is not None
    assert (login.access_token, login.refresh_token, login.expires_at) == ("access-1", "refresh-1", 5.0)
    assert "access-1" not in repr(login) and "refresh-1" not in repr(login)
    assert cache.remove(SERVER) == [SERVER] and cache.get(SERVER) is None


def test_cache_readable_by_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    cache = CredentialCache(tmp_path / "credentials")
    cache.put(SERVER, CachedLogin("https://iss", "cli", "https://iss/token", "at"))
    os.chmod(cache.path, 0o644)
    with pytest.raises(BadInputError) as refused:
        cache.get(SERVER)
    assert "mode 0644" in str(refused.value) and f"chmod 600 {cache.path}" in str(refused.value)


def test_cache_path_follows_xdg_config_home(tmp_path: Path) -> None:
    assert cache_path({"XDG_CONFIG_HOME": str(tmp_path)}, Path("/home/u")) == tmp_path / "evalsi" / "credentials"
    assert cache_path({"XDG_CONFIG_HOME": "relative"}, Path("/home/u")) == Path("/home/u/.config/evalsi/credentials")


def _resolve(tmp_path: Path, env: dict[str, str] | None = None, **flags: Any) -> Any:
    return resolve_credentials(SERVER, env=env or {}, cache=CredentialCache(tmp_path / "credentials"), **flags)


def test_flag_beats_environment_beats_cache(tmp_path: Path) -> None:
    CredentialCache(tmp_path / "credentials").put(SERVER, CachedLogin("https://i", "c", "https://i/t", "cached"))
    env = {"EVALSI_TOKEN": "from-env"}
    assert _resolve(tmp_path, env, token="from-flag").authorization() == "Bearer from-flag"
    assert _resolve(tmp_path, env, api_key="evk_flag").authorization() == "Bearer evk_flag"
    from_env = _resolve(tmp_path, env)
    assert (from_env.authorization(), from_env.origin) == ("Bearer from-env", "$EVALSI_TOKEN")
    assert _resolve(tmp_path, {"EVALSI_API_KEY": "evk_env"}).authorization() == "Bearer evk_env"
    from_cache = _resolve(tmp_path)
    assert isinstance(from_cache, CachedLoginCredential) and from_cache.authorization() == "Bearer cached"
    assert _resolve(tmp_path / "elsewhere") is None  # nothing anywhere: anonymous


def test_ambiguous_or_malformed_credentials_are_refused_without_echoing_them(tmp_path: Path) -> None:
    cases = [
        ({"token": "t", "api_key": "evk_k"}, {}, "--token and --api-key both given"),
        ({}, {"EVALSI_TOKEN": "t", "EVALSI_API_KEY": "evk_k"}, "$EVALSI_TOKEN and $EVALSI_API_KEY are all set"),
        ({"api_key": "sk-secret-value"}, {}, "--api-key: Evals.si API keys start with 'evk_'"),
        ({"token": "two words"}, {}, "--token: holds spaces or control characters"),
        ({"token": "x\r\nInjected: 1"}, {}, "--token: holds spaces or control characters"),
    ]
    for flags, env, message in cases:
        with pytest.raises(BadInputError) as refused:
            _resolve(tmp_path, env, **flags)
        assert message in str(refused.value)
        assert "sk-secret-value" not in str(refused.value) and "Injected" not in str(refused.value)


def test_static_credential_repr_hides_the_value() -> None:
    assert "s3cr3t" not in repr(StaticCredential("s3cr3t", "--token"))


def test_token_file_is_read_at_every_call(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    source = _resolve(tmp_path, {"EVALSI_TOKEN_FILE": str(path)})
    assert isinstance(source, TokenFileCredential) and source.authorization() == "Bearer first"
    path.write_text("rotated")  # a projected service-account token is replaced in place
    assert source.authorization() == "Bearer rotated"
    path.unlink()
    with pytest.raises(BadInputError, match=r"\$EVALSI_TOKEN_FILE: cannot read"):
        source.authorization()


def _login_with_refresh(issuer: LocalIssuer) -> CachedLogin:
    """A real login: the device grant approved at once, so the cache holds a refresh token the issuer knows."""
    from evalsi.client_auth.device_flow import device_login
    from evalsi.client_auth.oauth import LoginConfig

    config = LoginConfig(issuer.url, CLI_CLIENT)
    endpoints = discover(issuer.url)
    codes: list[str] = []
    tokens = device_login(endpoints, config, inform=codes.append,
                          sleep=lambda _s: issuer.approve(codes[0].rsplit(" ", 1)[1], "alice"))
    return CachedLogin(issuer.url, CLI_CLIENT, endpoints.token_endpoint, tokens.access_token, tokens.refresh_token,
                       expires_at=time.time() - 1)  # already expired: the next call must refresh


def test_an_expired_cached_login_is_refreshed_before_the_call_and_saved(tmp_path: Path, issuer: LocalIssuer) -> None:
    cache = CredentialCache(tmp_path / "credentials")
    stale = _login_with_refresh(issuer)
    cache.put(SERVER, stale)
    source = _resolve(tmp_path)
    header = source.authorization()
    assert header != "Bearer " + stale.access_token and issuer.grants[-1] == "refresh_token"
    claims = jwt.decode(header.removeprefix("Bearer "), options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["iss"] == issuer.url
    saved = cache.get(SERVER)
    assert saved is not None and "Bearer " + saved.access_token == header
    assert saved.refresh_token != stale.refresh_token and saved.expires_at > time.time() + 200
    assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    # A second command that read the cache before the refresh finds the new login instead of spending the
    # (rotated, now invalid) refresh token again.
    late = CachedLoginCredential(cache, SERVER, stale, refresh_login)
    assert late.authorization() == header and issuer.grants.count("refresh_token") == 1


def test_a_refresh_the_issuer_refuses_says_to_log_in_again(tmp_path: Path, issuer: LocalIssuer) -> None:
    cache = CredentialCache(tmp_path / "credentials")
    stale = _login_with_refresh(issuer)
    token_request(stale.token_endpoint, {"grant_type": "refresh_token", "refresh_token": stale.refresh_token,
                                         "client_id": CLI_CLIENT})  # spent elsewhere: rotated away
    cache.put(SERVER, stale)
    with pytest.raises(BadInputError) as refused:
        _resolve(tmp_path).authorization()
    assert "could not be refreshed" in str(refused.value) and "invalid_grant" in str(refused.value)
    assert f"run `evalsi login --server {SERVER}` again" in str(refused.value)
    assert stale.refresh_token not in str(refused.value)


def test_github_actions_oidc_token_is_fetched_for_the_audience_and_again_when_it_lapses(
    tmp_path: Path, issuer: LocalIssuer
) -> None:
    # Under the 60 s margin: every call fetches again.
    env = issuer.github_job(audience="https://evals.example.com", lifetime_s=30)
    source = _resolve(tmp_path, env)
    claims = jwt.decode(source.authorization().removeprefix("Bearer "), options={"verify_signature": False})
    assert claims["aud"] == "https://evals.example.com" and claims["repository"] == "acme/agent"
    assert claims["sub"] == "repo:acme/agent:ref:refs/heads/main"
    source.authorization()
    assert issuer.github_requests == ["https://evals.example.com"] * 2
    assert env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"] not in repr(source)


def test_github_actions_token_is_reused_while_valid(tmp_path: Path, issuer: LocalIssuer) -> None:
    source = _resolve(tmp_path, issuer.github_job(audience="evals.si", lifetime_s=600))
    assert source.authorization() == source.authorization() and len(issuer.github_requests) == 1


def test_a_wrong_job_request_token_is_an_infrastructure_error(tmp_path: Path, issuer: LocalIssuer) -> None:
    env = {**issuer.github_job(audience="evals.si"), "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "stale"}
    with pytest.raises(InfraError, match=r"ACTIONS_ID_TOKEN_REQUEST_URL answered HTTP 401"):
        _resolve(tmp_path, env).authorization()


def test_github_audience_without_the_job_token_says_what_the_workflow_lacks(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="permissions: id-token: write"):
        _resolve(tmp_path, {"EVALSI_OIDC_AUDIENCE": "evals.si"})


def test_server_key_normalizes() -> None:
    assert server_key("HTTPS://Evals.Example.com:443/") == "https://evals.example.com:443"
