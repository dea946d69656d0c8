"""``authorization.ext_authz`` parsed at load: defaults, and every refusal naming its key path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalsi.authz.config import load_authorization_config
from evalsi.authz.external_config import AuthzenEndpoint, EnvoyEndpoint, load_external_config
from evalsi.errors import BadInputError
from evalsi.gate.exposure import AccessSettings


def refused(section: Any) -> str:
    with pytest.raises(BadInputError) as caught:
        load_authorization_config({"ext_authz": section})
    return str(caught.value)


def test_defaults_and_both_kinds() -> None:
    config = load_external_config({"authzen": {"url": "https://pdp.example/access/v1/evaluation"}})
    assert config.endpoint == AuthzenEndpoint("https://pdp.example/access/v1/evaluation")
    assert (config.mode, config.timeout_s, config.cache_ttl_s, config.max_cache_entries) == ("require", 0.2, 30.0,
                                                                                              10_000)
    grpc = load_external_config({"grpc": {"address": "127.0.0.1:9191"}, "mode": "decide", "timeout": "1s",
                                 "cache_ttl": "0s", "max_cache_entries": 5})
    assert grpc.endpoint == EnvoyEndpoint("127.0.0.1:9191")
    assert (grpc.mode, grpc.timeout_s, grpc.cache_ttl_s, grpc.max_cache_entries) == ("decide", 1.0, 0.0, 5)
    remote = load_external_config({"grpc": {"address": "opa.internal:9191", "tls": {"ca_file": "ca.pem"}}})
    assert isinstance(remote.endpoint, EnvoyEndpoint) and remote.endpoint.tls is not None
    assert load_authorization_config({"rules": []}).external is None


def test_refusals_name_the_key_path() -> None:
    assert refused({}).startswith("authorization.ext_authz: name exactly one external authorizer")
    assert refused({"authzen": {"url": "https://a/e"}, "grpc": {"address": "127.0.0.1:1"}}).startswith(
        "authorization.ext_authz: name exactly one")
    assert refused({"authzen": {"url": "http://pdp.example/e"}}).startswith(
        "authorization.ext_authz.authzen.url: the PDP is asked over https://")
    assert refused({"authzen": {"url": "https://user:pw@pdp.example/e"}}).startswith(
        "authorization.ext_authz.authzen.url: credentials do not go in the URL")
    assert refused({"authzen": {"url": "ftp://pdp/e"}}).startswith("authorization.ext_authz.authzen.url: expected")
    assert refused({"authzen": {"url": "https://a/e", "header": {}}}).startswith(
        "authorization.ext_authz.authzen.header: unknown key")
    assert refused({"grpc": {"address": "opa.internal:9191"}}).startswith(
        "authorization.ext_authz.grpc.tls: opa.internal:9191 is not a loopback address")
    assert refused({"authzen": {"url": "https://a/e", "ca_file": "/nonexistent/ca.pem"}}).startswith(
        "authorization.ext_authz.authzen.ca_file: /nonexistent/ca.pem is not a readable file")
    assert refused({"grpc": {"address": "no-port"}}).startswith("authorization.ext_authz.grpc.address: expected")
    assert refused({"grpc": {"address": "127.0.0.1:1", "tls": {"cert_file": "c.pem"}}}).startswith(
        "authorization.ext_authz.grpc.tls: a client certificate needs both")
    assert refused({"grpc": {"address": "127.0.0.1:1"}, "mode": "advise"}).startswith(
        "authorization.ext_authz.mode: must be one of require, decide")
    assert refused({"grpc": {"address": "127.0.0.1:1"}, "timeout": "0s"}).startswith(
        "authorization.ext_authz.timeout: must be more than 0")
    assert refused({"grpc": {"address": "127.0.0.1:1"}, "cache_ttl": "soon"}).startswith(
        "authorization.ext_authz.cache_ttl: expected a duration")
    assert refused({"grpc": {"address": "127.0.0.1:1"}, "max_cache_entries": 0}).startswith(
        "authorization.ext_authz.max_cache_entries: expected a positive integer")


def test_headers_from_read_env_and_files_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "pdp-token"
    secret.write_text("Bearer from-file\n")
    monkeypatch.setenv("EVALSI_TEST_PDP_KEY", "k-123")
    config = load_external_config({"authzen": {"url": "http://127.0.0.1:9/e", "headers_from": {
        "Authorization": {"file": str(secret)}, "x-api-key": {"env": "EVALSI_TEST_PDP_KEY"}}}})
    assert isinstance(config.endpoint, AuthzenEndpoint)
    assert config.endpoint.headers == {"authorization": "Bearer from-file", "x-api-key": "k-123"}
    monkeypatch.delenv("EVALSI_TEST_PDP_KEY")
    base = {"url": "https://pdp.example/e"}
    assert refused({"authzen": {**base, "headers_from": {"x-api-key": {"env": "EVALSI_TEST_PDP_KEY"}}}}) \
        .startswith("authorization.ext_authz.authzen.headers_from.x-api-key.env: the environment variable")
    assert refused({"authzen": {**base, "headers_from": {"a": {"file": str(tmp_path / "none")}}}}).startswith(
        "authorization.ext_authz.authzen.headers_from.a.file: cannot read")
    assert refused({"authzen": {**base, "headers_from": {"a": "literal"}}}).startswith(
        "authorization.ext_authz.authzen.headers_from.a: expected a mapping")


def test_a_served_process_checks_the_section_at_start_and_its_gate_asks_the_external_authorizer() -> None:
    with pytest.raises(BadInputError, match=r"evalsi.yaml: authorization.ext_authz.mode"):
        AccessSettings.from_document({"authorization": {"ext_authz": {"grpc": {"address": "127.0.0.1:1"},
                                                                      "mode": "x"}}}, where="evalsi.yaml")
    document = {"auth": {"api_keys": {"keys": []}},
                "authorization": {"ext_authz": {"grpc": {"address": "127.0.0.1:9191"}}}}
    gate = AccessSettings.from_document(document).gate()
    assert gate is not None and gate.external is not None
    plain = AccessSettings.from_document({"auth": {"api_keys": {"keys": []}}}).gate()
    assert plain is not None and plain.external is None  # nothing configured: the gate makes no external call
