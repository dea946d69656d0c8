"""Bearer tokens through the Authenticator: each accepted algorithm, and each way a token must be refused."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from auth_helpers import AUDIENCE, ISSUER, SigningKey, claims, hmac_token, jwks, unsigned_token

from evalsi.auth.authenticator import Authenticator
from evalsi.auth.config import load_auth_config
from evalsi.auth.principal import Credentials, Unauthenticated


@pytest.fixture(scope="module")
def keys() -> dict[str, SigningKey]:
    return {algorithm: SigningKey.generate(algorithm, f"kid-{algorithm}") for algorithm in ("RS256", "ES256", "EdDSA")}


def _authenticator(keys: dict[str, SigningKey], **provider: Any) -> Authenticator:
    settings = {"name": "corp", "issuer": ISSUER, "audiences": [AUDIENCE],
                "jwks": {"inline": jwks(*keys.values())}, **provider}
    return Authenticator(load_auth_config({"jwt": {"providers": [settings]}}))


def _bearer(token: str) -> Credentials:
    return Credentials("grpc", headers={"authorization": f"Bearer {token}"})


async def _refusal(authenticator: Authenticator, token: str) -> str:
    with pytest.raises(Unauthenticated) as refused:
        await authenticator.authenticate(_bearer(token))
    message = str(refused.value)
    assert token not in message
    return message


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "EdDSA"])
async def test_a_valid_token_of_each_default_algorithm_proves_its_user(keys, algorithm: str) -> None:
    principal = await _authenticator(keys).authenticate(_bearer(keys[algorithm].sign(claims())))
    assert (principal.kind, principal.provider, principal.subject, principal.id) == (
        "user", "corp", "5f1c-user", "corp/5f1c-user")
    assert (principal.name, principal.email, principal.email_verified) == ("Ada", "ada@example.test", True)
    assert principal.groups == ("eng", "support")
    assert principal.claims["iss"] == ISSUER and principal.authenticated


async def test_malformed_tokens_are_refused_as_malformed(keys) -> None:
    authenticator = _authenticator(keys)
    for token in ("not-a-jwt", "a.b.c", keys["RS256"].sign(claims())[:-8] + "!!!!!!!!"):
        assert "malformed" in await _refusal(authenticator, token)


async def test_claims_nested_too_deep_are_malformed_not_a_crash(keys) -> None:
    segment = base64.urlsafe_b64encode(("[" * 3000 + "]" * 3000).encode()).rstrip(b"=").decode()
    header = keys["RS256"].sign(claims()).split(".")[0]
    assert "malformed" in await _refusal(_authenticator(keys), f"{header}.{segment}.c2ln")


async def test_a_tampered_signature_is_refused(keys) -> None:
    token = keys["ES256"].sign(claims())
    other = SigningKey.generate("ES256", "kid-ES256").sign(claims(sub="admin"))
    forged = ".".join(other.split(".")[:2] + token.split(".")[2:])
    assert "signature does not verify" in await _refusal(_authenticator(keys), forged)


async def test_time_claims_are_checked_with_the_clock_skew(keys) -> None:
    now = int(time.time())
    authenticator = _authenticator(keys, clock_skew="10s")
    assert "expired" in await _refusal(authenticator, keys["RS256"].sign(claims(exp=now - 20)))
    assert "not valid yet (nbf" in await _refusal(authenticator, keys["RS256"].sign(claims(nbf=now + 60)))
    assert "not valid yet (iat" in await _refusal(authenticator, keys["RS256"].sign(claims(iat=now + 60)))
    # Within the skew both ways: a clock a few seconds apart from the issuer's is not a refusal.
    principal = await authenticator.authenticate(_bearer(keys["RS256"].sign(claims(exp=now - 5, nbf=now + 5))))
    assert principal.subject == "5f1c-user"


async def test_the_audience_must_be_one_of_the_providers(keys) -> None:
    authenticator = _authenticator(keys, audiences=["evals.si", "https://evals.example.test"])
    assert "audience (aud) is not one of: evals.si" in await _refusal(
        authenticator, keys["RS256"].sign(claims(aud="another-app")))
    assert (await authenticator.authenticate(
        _bearer(keys["RS256"].sign(claims(aud=["x", "https://evals.example.test"]))))).subject == "5f1c-user"


async def test_an_unknown_issuer_is_named_in_the_refusal(keys) -> None:
    message = await _refusal(_authenticator(keys), keys["RS256"].sign(claims(iss="https://evil.example.test")))
    assert "unknown token issuer 'https://evil.example.test'" in message and ISSUER in message


async def test_alg_none_is_never_accepted(keys) -> None:
    message = await _refusal(_authenticator(keys), unsigned_token(claims()))
    assert "algorithm 'none' is not accepted" in message


async def test_hs256_signed_with_the_public_key_is_refused(keys) -> None:
    """The RS256-to-HS256 confusion: the public key (which anyone has) as an HMAC secret must prove nothing."""
    rsa = keys["RS256"]
    message = await _refusal(_authenticator(keys), hmac_token(claims(), rsa.public_pem(), rsa.kid))
    assert "algorithm 'HS256' is not accepted" in message


async def test_an_algorithm_outside_the_providers_allowlist_is_refused(keys) -> None:
    message = await _refusal(_authenticator(keys, algorithms=["ES256"]), keys["RS256"].sign(claims()))
    assert "algorithm 'RS256' is not accepted for provider 'corp' (accepted: ES256)" in message


async def test_a_key_is_never_used_for_another_algorithm(keys) -> None:
    """A token saying ES256 but naming the RSA key's kid finds no ES256 key under that kid."""
    token = keys["ES256"].sign(claims(), headers={"kid": keys["RS256"].kid})
    assert "no ES256 key with kid 'kid-RS256'" in await _refusal(_authenticator(keys), token)


async def test_an_oversized_token_is_refused_before_it_is_parsed(keys) -> None:
    big = keys["RS256"].sign(claims(padding="x" * 9000))
    assert "bytes; the limit is 8192 (auth.max_token_bytes)" in await _refusal(_authenticator(keys), big)


async def test_required_claims_default_to_exp_and_are_configurable(keys) -> None:
    assert "lacks the required claim 'exp'" in await _refusal(_authenticator(keys), keys["RS256"].sign(
        claims(exp=None)))
    strict = _authenticator(keys, required_claims=["exp", "sub", "tenant"])
    assert "lacks the required claim 'tenant'" in await _refusal(strict, keys["RS256"].sign(claims()))
    assert (await strict.authenticate(_bearer(keys["RS256"].sign(claims(tenant="acme"))))).subject == "5f1c-user"


async def test_claims_mapping_follows_dotted_paths(keys) -> None:
    authenticator = _authenticator(keys, claims={"subject": "oid", "name": "preferred_username",
                                                 "groups": "realm_access.roles", "email": "upn"})
    token = keys["EdDSA"].sign(claims(oid="object-7", preferred_username="ada.l", upn="ada@corp.test",
                                      realm_access={"roles": ["platform-admins", 3, "eng"]}, email_verified=None))
    principal = await authenticator.authenticate(_bearer(token))
    assert (principal.subject, principal.name, principal.email) == ("object-7", "ada.l", "ada@corp.test")
    assert principal.groups == ("platform-admins", "eng")
    # The provider did not assert the address, so email: bindings must not match it.
    assert principal.email_verified is False


async def test_a_claim_named_with_dots_is_found_by_its_whole_name(keys) -> None:
    authenticator = _authenticator(keys, claims={"groups": "https://evals.example.test/groups"})
    token = keys["RS256"].sign(claims(**{"https://evals.example.test/groups": ["auditors"]}))
    assert (await authenticator.authenticate(_bearer(token))).groups == ("auditors",)


async def test_a_token_without_its_subject_claim_is_refused(keys) -> None:
    assert "no subject claim 'sub'" in await _refusal(_authenticator(keys), keys["RS256"].sign(claims(sub=None)))


async def test_client_credentials_tokens_are_services(keys) -> None:
    authenticator = _authenticator(keys)
    service_claims = [
        {"sub": "ci-bot", "azp": "ci-bot"},  # Keycloak, RFC 9068 client_id
        {"sub": "m2m-client@clients", "azp": "m2m-client", "gty": "client-credentials"},  # Auth0
        {"sub": "system:serviceaccount:evals:operator"},  # Kubernetes
        {"sub": "3fa8", "idtyp": "app"},  # Entra ID
    ]
    for extra in service_claims:
        token = keys["RS256"].sign(claims(email=None, email_verified=None, name=None, **extra))
        principal = await authenticator.authenticate(_bearer(token))
        assert principal.kind == "service", extra
        assert principal.name == extra["sub"]
    # A user signing in through a client has azp != sub and an email: a user.
    user = await authenticator.authenticate(_bearer(keys["RS256"].sign(claims(azp="evalsi-cli"))))
    assert user.kind == "user"
    forced = _authenticator(keys, principal_kind="service")
    assert (await forced.authenticate(_bearer(keys["RS256"].sign(claims())))).kind == "service"


async def test_role_claims_map_token_roles_to_project_roles(keys) -> None:
    authenticator = _authenticator(keys, role_claims={"claim": "app_roles", "map": {
        "checkout-lead": {"checkout": ["editor"]}, "auditor": {"*": ["trace-auditor"], "checkout": ["viewer"]}}})
    token = keys["RS256"].sign(claims(app_roles=["checkout-lead", "auditor", "unmapped"]))
    principal = await authenticator.authenticate(_bearer(token))
    assert principal.roles == {"checkout": ("editor", "viewer"), "*": ("trace-auditor",)}
    single = await authenticator.authenticate(_bearer(keys["RS256"].sign(claims(app_roles="auditor"))))
    assert single.roles == {"*": ("trace-auditor",), "checkout": ("viewer",)}
    assert (await authenticator.authenticate(_bearer(keys["RS256"].sign(claims())))).roles == {}
