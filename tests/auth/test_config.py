"""The auth: section: a full example loads into its dataclasses; every mistake is refused naming its key path."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalsi.auth.api_keys import hash_api_key, new_api_key
from evalsi.auth.config import DEFAULT_ALGORITHMS, TokenLocation, load_auth_config
from evalsi.errors import BadInputError

KEY_HASH = "sha256:" + "ab" * 32

EXAMPLE = f"""
auth:
  jwt:
    mode: optional
    location: {{cookie: evalsi_session}}
    providers:
      - name: corp
        issuer: https://sso.example.com/realms/eng
        audiences: [evals.si]
        jwks: {{discovery: true}}
        claims: {{groups: realm_access.roles, name: preferred_username}}
        required_claims: [exp, sub]
        clock_skew: 1m
        role_claims:
          claim: app_roles
          map:
            checkout-lead: {{checkout: [editor]}}
            auditor: {{"*": [trace-auditor]}}
      - name: github
        issuer: https://token.actions.githubusercontent.com
        audiences: [https://evals.example.com]
        jwks: {{url: https://token.actions.githubusercontent.com/.well-known/jwks, refetch_interval: 30s}}
        algorithms: [RS256]
        principal_kind: service
  api_keys:
    keys:
      - name: otel-collector
        key: {KEY_HASH}
        roles: {{support: [ingest]}}
        expires: 2027-06-30T00:00:00Z
        labels: {{source: agentgateway}}
  mtls:
    identities: [{{subject: "spiffe://cluster.local/ns/evals/sa/collector", roles: {{"*": [ingest]}}}}]
  trusted_proxies: {{cidrs: [10.0.0.5/32, "fd00::/8"], user_header: X-Auth-Request-User}}
  tls: {{cert_file: /etc/evalsi/tls.crt, key_file: /etc/evalsi/tls.key, client_ca: /etc/evalsi/ca.crt}}
  allow_plaintext: true
  cli_login: {{issuer: https://sso.example.com/realms/eng, client_id: evalsi-cli}}
  max_token_bytes: 16384
"""


def test_the_documented_example_loads() -> None:
    config = load_auth_config(yaml.safe_load(EXAMPLE)["auth"])
    assert config.enabled and config.mode == "enforce"
    assert config.jwt is not None and config.jwt.mode == "optional"
    assert config.jwt.location == TokenLocation("cookie", "evalsi_session", "")
    corp, github = config.jwt.providers
    assert corp.jwks.discovery and corp.claims.groups == "realm_access.roles" and corp.claims.subject == "sub"
    assert corp.clock_skew_s == 60.0 and corp.required_claims == ("exp", "sub")
    assert corp.algorithms == DEFAULT_ALGORITHMS == ("RS256", "ES256", "EdDSA")
    assert corp.role_claims is not None and corp.role_claims.map["auditor"] == {"*": ("trace-auditor",)}
    assert github.jwks.refetch_interval_s == 30.0 and github.principal_kind == "service"
    assert config.api_keys is not None and config.api_keys.mode == "strict"
    (key,) = config.api_keys.keys
    assert key.roles == {"support": ("ingest",)} and key.labels == {"source": "agentgateway"}
    assert key.expires == datetime.datetime(2027, 6, 30, tzinfo=datetime.UTC)
    assert config.mtls is not None and config.mtls.mode == "optional"
    assert config.client_ca == "/etc/evalsi/ca.crt"
    assert config.trusted_proxies is not None and config.trusted_proxies.user_header == "x-auth-request-user"
    assert config.trusted_proxies.trusts("10.0.0.5") and config.trusted_proxies.trusts("fd00::1")
    assert not config.trusted_proxies.trusts("10.0.0.6") and not config.trusted_proxies.trusts("not-an-ip")
    assert config.allow_plaintext and config.max_token_bytes == 16384
    assert config.cli_login is not None and "openid" in config.cli_login.scopes


def test_mode_none_is_explicit_and_keeps_the_rest() -> None:
    config = load_auth_config({"mode": "none", "api_keys": {"keys": []}})
    assert not config.enabled and config.api_keys is not None
    empty = load_auth_config(None)
    assert empty.enabled and empty.jwt is None and empty.max_token_bytes == 8192


def _provider(**overrides: Any) -> dict[str, Any]:
    provider = {"name": "corp", "issuer": "https://sso.example.com", "audiences": ["evals.si"],
                "jwks": {"discovery": True}}
    provider.update(overrides)
    return {k: v for k, v in provider.items() if v is not None}


@pytest.mark.parametrize(("section", "path", "says"), [
    ({"mode": "off"}, "auth.mode", "must be one of enforce, none"),
    ({"api_key": {}}, "auth.api_key", "unknown key; did you mean api_keys?"),
    ({"jwt": {"providers": []}}, "auth.jwt.providers", "at least one provider"),
    ({"jwt": {"mode": "lenient", "providers": [_provider()]}}, "auth.jwt.mode", "strict, optional, permissive"),
    ({"jwt": {"providers": [_provider(jwks=None)]}}, "auth.jwt.providers[0].jwks", "required: one of"),
    ({"jwt": {"providers": [_provider(audiences=None)]}}, "auth.jwt.providers[0].audiences", "required"),
    ({"jwt": {"providers": [_provider(jwks={"url": "http://idp/certs"})]}}, "auth.jwt.providers[0].jwks.url",
     "https://"),
    ({"jwt": {"providers": [_provider(issuer="http://idp.local")]}}, "auth.jwt.providers[0].jwks.discovery",
     "must be https://"),
    ({"jwt": {"providers": [_provider(jwks={"discovery": True, "file": "k.json"})]}},
     "auth.jwt.providers[0].jwks", "exactly one of url, file, inline or discovery"),
    ({"jwt": {"providers": [_provider(jwks={"inline": "{not json"})]}}, "auth.jwt.providers[0].jwks.inline",
     "not a JSON document"),
    ({"jwt": {"providers": [_provider(jwks={"inline": {"keys": []}})]}}, "auth.jwt.providers[0].jwks.inline",
     "at least one key"),
    ({"jwt": {"providers": [_provider(algorithms=["RS256", "none"])]}}, "auth.jwt.providers[0].algorithms[1]",
     "unsigned tokens are never accepted"),
    ({"jwt": {"providers": [_provider(algorithms=["HS256"])]}}, "auth.jwt.providers[0].algorithms[0]",
     "shared-secret (HMAC) algorithms are not accepted"),
    ({"jwt": {"providers": [_provider(clock_skew="soon")]}}, "auth.jwt.providers[0].clock_skew", "a duration"),
    ({"jwt": {"providers": [_provider(), _provider(name="other")]}}, "auth.jwt.providers[1].issuer",
     "used by an earlier provider"),
    ({"jwt": {"providers": [_provider(role_claims={"claim": "r", "map": {"x": {"bad project": ["viewer"]}}})]}},
     "auth.jwt.providers[0].role_claims.map.x.bad project", "a project name"),
    ({"jwt": {"providers": [_provider(claims={"sub": "oid"})]}}, "auth.jwt.providers[0].claims.sub",
     "did you mean subject?"),
    ({"jwt": {"location": {"header": {"name": "x-token"}, "cookie": "c"}, "providers": [_provider()]}},
     "auth.jwt.location", "exactly one location"),
    ({"api_keys": {"keys": [{"name": "k", "key": "sha256:abc"}]}}, "auth.api_keys.keys[0].key",
     "64 lower-case hex digits"),
    ({"api_keys": {"keys": [{"name": "k", "key": KEY_HASH, "expires": "2027-01-01T00:00:00"}]}},
     "auth.api_keys.keys[0].expires", "with a zone"),
    ({"api_keys": {"keys": [{"name": "k", "key": KEY_HASH}, {"name": "k", "key": "sha256:" + "cd" * 32}]}},
     "auth.api_keys.keys[1].name", "names are unique"),
    ({"api_keys": {"keys": [{"name": "k", "key": KEY_HASH, "roles": ["ingest"]}]}},
     "auth.api_keys.keys[0].roles", "a mapping of projects to roles"),
    ({"trusted_proxies": {"user_header": "x-user"}}, "auth.trusted_proxies.cidrs", "required"),
    ({"trusted_proxies": {"cidrs": ["10.0.0.300/8"]}}, "auth.trusted_proxies.cidrs[0]", "not a network"),
    ({"mtls": {"client_ca": "ca.crt"}}, "auth.mtls", "need a TLS listener"),
    ({"mtls": {}, "tls": {"cert_file": "c", "key_file": "k"}}, "auth.mtls.client_ca", "required"),
    ({"mtls": {"identities": [{"subject": "spiffe://a/b"}, {"subject": "spiffe://a/b"}]},
      "tls": {"cert_file": "c", "key_file": "k", "client_ca": "ca"}}, "auth.mtls.identities[1].subject",
     "granted by an earlier entry"),
    ({"tls": {"cert_file": "c"}}, "auth.tls", "cert_file and key_file go together"),
    ({"max_token_bytes": 0}, "auth.max_token_bytes", "a positive integer"),
    ({"cli_login": {"issuer": "https://sso"}}, "auth.cli_login.client_id", "non-empty string"),
])
def test_each_mistake_names_its_key_path(section: dict[str, Any], path: str, says: str | None) -> None:
    with pytest.raises(BadInputError) as refused:
        load_auth_config(section)
    message = str(refused.value)
    assert message.startswith(f"{path}:") or message.startswith(f"{path}."), message
    if says:
        assert says in message


def test_a_plaintext_api_key_in_config_is_refused_and_never_echoed() -> None:
    plaintext = new_api_key()
    with pytest.raises(BadInputError) as refused:
        load_auth_config({"api_keys": {"keys": [{"name": "ci", "key": plaintext}]}}, where="evalsi.yaml: auth")
    message = str(refused.value)
    assert message.startswith("evalsi.yaml: auth.api_keys.keys[0].key: a plaintext API key")
    assert "evalsi auth hash-key" in message and plaintext not in message
    assert load_auth_config({"api_keys": {"keys": [{"name": "ci", "key": hash_api_key(plaintext)}]}}).api_keys


def test_insecure_jwks_need_the_explicit_flag() -> None:
    provider = _provider(issuer="http://127.0.0.1:9000/realms/dev", allow_insecure_jwks=True)
    config = load_auth_config({"jwt": {"providers": [provider]}})
    assert config.jwt is not None and config.jwt.providers[0].allow_insecure_jwks


def test_a_header_location_keeps_its_prefix_and_lowercases_its_name() -> None:
    config = load_auth_config({"jwt": {"location": {"header": {"name": "X-Token", "prefix": ""}},
                                       "providers": [_provider()]}})
    assert config.jwt is not None and config.jwt.location == TokenLocation("header", "x-token", "")


def test_the_example_in_docs_auth_md_loads() -> None:
    """docs/auth.md's Authentication example is a config this loader accepts, key for key."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "auth.md").read_text(encoding="utf-8")
    section = page.split("## Authentication", 1)[1].split("\n## ", 1)[0]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = load_auth_config(yaml.safe_load(block)["auth"])
    assert config.jwt is not None and [p.name for p in config.jwt.providers] == ["corp", "github"]
    assert config.api_keys is not None and config.api_keys.keys[0].name == "otel-collector"
    assert config.mtls is not None and config.trusted_proxies is not None and config.cli_login is not None
