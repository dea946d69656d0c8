"""The Authenticator's choice of method, token locations, modes, API keys, client certificates and trusted proxies."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import pytest
from auth_helpers import AUDIENCE, ISSUER, SigningKey, claims, client_certificate, jwks

from evalsi.auth.api_keys import ApiKey, ApiKeyVerifier, hash_api_key, new_api_key
from evalsi.auth.authenticator import Authenticator, MissingCredential
from evalsi.auth.config import load_auth_config
from evalsi.auth.principal import ANONYMOUS, Credentials, Unauthenticated

KEY = new_api_key()
EXPIRED_KEY = new_api_key()


@pytest.fixture(scope="module")
def signer() -> SigningKey:
    return SigningKey.generate("ES256", "es-1")


def _config(signer: SigningKey, *, jwt: dict[str, Any] | None = None, api_keys: dict[str, Any] | None = None,
            **rest: Any) -> dict[str, Any]:
    provider = {"name": "corp", "issuer": ISSUER, "audiences": [AUDIENCE], "jwks": {"inline": jwks(signer)}}
    keys = [{"name": "otel-collector", "key": hash_api_key(KEY), "roles": {"support": ["ingest"]},
             "labels": {"source": "agentgateway"}},
            {"name": "old-ci", "key": hash_api_key(EXPIRED_KEY), "expires": "2020-01-01T00:00:00Z"}]
    return {"jwt": {"providers": [provider], **(jwt or {})}, "api_keys": {"keys": keys, **(api_keys or {})}, **rest}


def _authenticator(document: dict[str, Any], **kwargs: Any) -> Authenticator:
    return Authenticator(load_auth_config(document), **kwargs)


def _headers(**headers: str) -> Credentials:
    return Credentials("http", headers=headers)


async def test_an_api_key_in_the_bearer_header_proves_its_key(signer) -> None:
    principal = await _authenticator(_config(signer)).authenticate(_headers(authorization=f"Bearer {KEY}"))
    assert (principal.kind, principal.provider, principal.subject, principal.key_name) == (
        "apikey", "apikey", "otel-collector", "otel-collector")
    assert principal.roles == {"support": ("ingest",)} and principal.labels == {"source": "agentgateway"}
    assert principal.id == "apikey/otel-collector" and principal.claims == {}


async def test_wrong_and_expired_keys_are_refused_without_echoing_them(signer) -> None:
    authenticator = _authenticator(_config(signer))
    wrong = new_api_key()
    with pytest.raises(Unauthenticated, match="unknown API key") as refused:
        await authenticator.authenticate(_headers(authorization=f"Bearer {wrong}"))
    assert wrong not in str(refused.value)
    with pytest.raises(Unauthenticated, match="API key 'old-ci' expired at 2020-01-01T00:00:00\\+00:00"):
        await authenticator.authenticate(_headers(authorization=f"Bearer {EXPIRED_KEY}"))


def test_new_keys_are_prefixed_random_and_hashed_as_sha256() -> None:
    first, second = new_api_key(), new_api_key()
    assert first.startswith("evk_") and len(first) == 47 and first != second
    digest = hash_api_key(first)
    assert digest.startswith("sha256:") and len(digest) == 71 and digest == hash_api_key(first)
    # The same digest as `printf %s evk_x | sha256sum`, so hashes can be made with standard tools too.
    assert hash_api_key("evk_x") == "sha256:" + hashlib.sha256(b"evk_x").hexdigest()


async def test_stored_keys_answer_through_the_lookup_after_config_keys(signer) -> None:
    stored_key = new_api_key()
    asked: list[str] = []

    async def lookup(key_hash: str) -> ApiKey | None:
        asked.append(key_hash)
        if key_hash == hash_api_key(stored_key):
            return ApiKey("batch-scorer", key_hash, {"ml": ("runner",)})
        return None

    authenticator = _authenticator(_config(signer), key_lookup=lookup)
    principal = await authenticator.authenticate(_headers(authorization=f"Bearer {stored_key}"))
    assert (principal.subject, principal.roles) == ("batch-scorer", {"ml": ("runner",)})
    # Config keys are found without asking the store; the store sees only hashes, never the key.
    await authenticator.authenticate(_headers(authorization=f"Bearer {KEY}"))
    assert asked == [hash_api_key(stored_key)]
    with pytest.raises(Unauthenticated, match="unknown API key"):
        await authenticator.authenticate(_headers(authorization=f"Bearer {new_api_key()}"))


async def test_a_stored_key_past_its_expiry_is_refused() -> None:
    now = datetime.datetime(2027, 1, 1, tzinfo=datetime.UTC)
    key = new_api_key()

    async def lookup(key_hash: str) -> ApiKey | None:
        return ApiKey("k", key_hash, expires=now) if key_hash == hash_api_key(key) else None

    with pytest.raises(Unauthenticated, match="expired"):
        await ApiKeyVerifier((), lookup, now=lambda: now).verify(key)
    earlier = now - datetime.timedelta(seconds=1)
    assert (await ApiKeyVerifier((), lookup, now=lambda: earlier).verify(key)).subject == "k"


async def test_api_keys_are_refused_when_no_method_accepts_them(signer) -> None:
    document = _config(signer)
    del document["api_keys"]
    with pytest.raises(Unauthenticated, match="API keys are not accepted by this server"):
        await _authenticator(document).authenticate(_headers(authorization=f"Bearer {KEY}"))


async def test_a_token_is_read_from_the_configured_cookie_or_query_parameter(signer) -> None:
    token = signer.sign(claims())
    cookie = _authenticator(_config(signer, jwt={"location": {"cookie": "evalsi_session"}}))
    principal = await cookie.authenticate(Credentials("http", cookies={"evalsi_session": token}))
    assert principal.subject == "5f1c-user"
    # The header is the API keys' location here, not the tokens': a token there is refused, saying where to put it.
    with pytest.raises(Unauthenticated, match="holds no evk_ API key \\(bearer tokens are read from the "
                       "evalsi_session cookie\\)"):
        await cookie.authenticate(Credentials("http", headers={"authorization": f"Bearer {token}"},
                                              cookies={"other": token}))
    query = _authenticator(_config(signer, jwt={"location": {"query": "access_token"}}))
    assert (await query.authenticate(Credentials("http", query={"access_token": token}))).subject == "5f1c-user"


async def test_a_custom_header_location_with_and_without_a_prefix(signer) -> None:
    token = signer.sign(claims())
    bare = _authenticator(_config(signer, jwt={"location": {"header": {"name": "X-Evalsi-Token"}}},
                                  api_keys={"location": {"header": {"name": "x-api-key"}}}))
    assert (await bare.authenticate(_headers(**{"x-evalsi-token": token}))).subject == "5f1c-user"
    assert (await bare.authenticate(_headers(**{"x-api-key": KEY}))).subject == "otel-collector"
    with pytest.raises(Unauthenticated, match="the x-api-key header holds no evk_ API key"):
        await bare.authenticate(_headers(**{"x-api-key": "hunter2"}))
    # The Bearer scheme matches in any case (RFC 7235); another scheme is not a bearer token at all.
    default = _authenticator(_config(signer))
    assert (await default.authenticate(_headers(authorization=f"bearer {token}"))).subject == "5f1c-user"
    with pytest.raises(MissingCredential):
        await default.authenticate(_headers(authorization="Basic YWRhOnB3"))


async def test_strict_refuses_a_request_without_credentials(signer) -> None:
    authenticator = _authenticator(_config(signer))
    with pytest.raises(MissingCredential) as refused:
        await authenticator.authenticate(Credentials("grpc"))
    assert "a bearer token in the authorization header" in str(refused.value)
    assert authenticator.www_authenticate(refused.value) == 'Bearer realm="evalsi"'


async def test_an_empty_enforced_section_refuses_everything() -> None:
    with pytest.raises(MissingCredential, match="no authentication method is configured"):
        await Authenticator(load_auth_config({})).authenticate(Credentials("http"))


async def test_mode_none_lets_everybody_in_as_anonymous(signer) -> None:
    authenticator = _authenticator({**_config(signer), "mode": "none"})
    assert await authenticator.authenticate(_headers(authorization="Bearer garbage")) is ANONYMOUS


async def test_optional_lets_anonymous_through_but_refuses_a_bad_token(signer) -> None:
    authenticator = _authenticator(_config(signer, jwt={"mode": "optional"}, api_keys={"mode": "optional"}))
    assert await authenticator.authenticate(Credentials("http")) is ANONYMOUS
    with pytest.raises(Unauthenticated, match="expired") as refused:
        await authenticator.authenticate(_headers(authorization=f"Bearer {signer.sign(claims(exp=1))}"))
    challenge = authenticator.www_authenticate(refused.value)
    assert challenge.startswith('Bearer realm="evalsi", error="invalid_token", error_description="the token has')
    # One strict method is enough to require a credential.
    mixed = _authenticator(_config(signer, jwt={"mode": "optional"}))
    with pytest.raises(MissingCredential):
        await mixed.authenticate(Credentials("http"))


async def test_permissive_marks_a_bad_token_and_never_refuses(signer) -> None:
    authenticator = _authenticator(_config(signer, jwt={"mode": "permissive"}, api_keys={"mode": "permissive"}))
    expired = signer.sign(claims(exp=1, repository="acme/agent"))
    principal = await authenticator.authenticate(_headers(authorization=f"Bearer {expired}"))
    assert principal.kind == "anonymous" and not principal.authenticated
    assert principal.credential_error.startswith("the token has expired")
    # The claims are there for rules, apart from the verified ones: nothing grants groups or roles from them.
    assert principal.unverified_claims["repository"] == "acme/agent"
    assert principal.claims == {} and principal.groups == () and principal.roles == {}
    garbage = await authenticator.authenticate(_headers(authorization="Bearer not.a.jwt"))
    assert garbage.credential_error.startswith("malformed") and garbage.unverified_claims == {}
    bad_key = await authenticator.authenticate(_headers(authorization=f"Bearer {new_api_key()}"))
    assert bad_key.credential_error == "unknown API key"
    assert await authenticator.authenticate(Credentials("http")) is ANONYMOUS
    valid = await authenticator.authenticate(_headers(authorization=f"Bearer {signer.sign(claims())}"))
    assert valid.kind == "user" and valid.credential_error == ""


async def test_the_challenge_never_breaks_its_quotes(signer) -> None:
    authenticator = _authenticator(_config(signer))
    challenge = authenticator.www_authenticate(Unauthenticated('unknown token issuer \'a"b\\c\n\''))
    assert challenge.count('"') == 6 and "\n" not in challenge and "\\" not in challenge


async def test_an_oversized_api_key_is_refused_before_hashing(signer) -> None:
    with pytest.raises(Unauthenticated, match="the limit is 8192"):
        await _authenticator(_config(signer)).authenticate(_headers(authorization="Bearer evk_" + "a" * 9000))


def _mtls_config(signer: SigningKey, **mtls: Any) -> dict[str, Any]:
    return _config(signer, jwt={"mode": "optional"}, api_keys={"mode": "optional"},
                   tls={"cert_file": "tls.crt", "key_file": "tls.key", "client_ca": "ca.crt"},
                   mtls={"identities": [{"subject": "spiffe://cluster.local/ns/evals/sa/collector",
                                         "roles": {"*": ["ingest"]}, "labels": {"team": "obs"}}], **mtls})


async def test_a_client_certificate_with_a_spiffe_id_proves_that_id(signer) -> None:
    certificate = client_certificate("collector-7f9", uris=("spiffe://cluster.local/ns/evals/sa/collector",
                                                            "https://example.test/other"))
    principal = await _authenticator(_mtls_config(signer)).authenticate(
        Credentials("otlp-grpc", peer_certificate=certificate, secure=True))
    assert (principal.kind, principal.provider, principal.subject, principal.name) == (
        "service", "mtls", "spiffe://cluster.local/ns/evals/sa/collector", "collector-7f9")
    assert principal.roles == {"*": ("ingest",)} and principal.labels == {"team": "obs"}


async def test_a_client_certificate_without_spiffe_id_proves_its_subject_cn(signer) -> None:
    principal = await _authenticator(_mtls_config(signer)).authenticate(
        Credentials("grpc", peer_certificate=client_certificate("operator.evals.svc")))
    assert (principal.subject, principal.roles) == ("operator.evals.svc", {})


async def test_a_certificate_naming_nobody_is_refused_and_a_token_wins_over_it(signer) -> None:
    authenticator = _authenticator(_mtls_config(signer))
    with pytest.raises(Unauthenticated, match="names no SPIFFE ID"):
        await authenticator.authenticate(Credentials("grpc", peer_certificate=client_certificate("")))
    with pytest.raises(Unauthenticated, match="more than one SPIFFE ID"):
        await authenticator.authenticate(Credentials("grpc", peer_certificate=client_certificate(
            "x", uris=("spiffe://a/b", "spiffe://a/c"))))
    both = Credentials("grpc", headers={"authorization": f"Bearer {signer.sign(claims())}"},
                       peer_certificate=client_certificate("operator"))
    assert (await authenticator.authenticate(both)).provider == "corp"


def _proxied(peer: str, **headers: str) -> Credentials:
    return Credentials("http", headers=headers, peer=peer)


async def test_proxy_headers_count_only_from_the_configured_cidrs(signer) -> None:
    document = _config(signer, jwt={"mode": "optional"}, api_keys={"mode": "optional"},
                       trusted_proxies={"cidrs": ["10.0.0.0/24", "fd00::/8"]})
    authenticator = _authenticator(document)
    headers = {"x-forwarded-user": "ada", "x-forwarded-groups": "eng, support,", "x-forwarded-email": "ada@x.test"}
    principal = await authenticator.authenticate(_proxied("10.0.0.7", **headers))
    assert (principal.kind, principal.provider, principal.subject, principal.email) == (
        "user", "proxy", "ada", "ada@x.test")
    assert principal.groups == ("eng", "support") and principal.id == "proxy/ada"
    assert (await authenticator.authenticate(_proxied("[fd00::5]", **headers))).subject == "ada"
    # The same headers from anywhere else are ignored: the caller is anonymous, not ada.
    for outsider in ("10.0.1.7", "127.0.0.1", "", "garbage"):
        assert await authenticator.authenticate(_proxied(outsider, **headers)) is ANONYMOUS
    # In strict mode, ignored headers are no credential at all.
    with pytest.raises(MissingCredential):
        await _authenticator(_config(signer, trusted_proxies={"cidrs": ["10.0.0.0/24"]})).authenticate(
            _proxied("192.168.1.1", **headers))


async def test_with_only_a_trusted_proxy_other_peers_are_refused() -> None:
    authenticator = Authenticator(load_auth_config({"trusted_proxies": {"cidrs": ["10.0.0.5/32"]}}))
    assert (await authenticator.authenticate(_proxied("10.0.0.5", **{"x-forwarded-user": "ada"}))).subject == "ada"
    with pytest.raises(MissingCredential, match="come through a trusted proxy"):
        await authenticator.authenticate(_proxied("10.0.0.6", **{"x-forwarded-user": "ada"}))
