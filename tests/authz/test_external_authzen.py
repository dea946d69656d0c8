"""External authorization against a real AuthZEN PDP on loopback: the access evaluation request's shape, modes
require and decide, caching, and failing closed on a timeout and on a PDP error."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from external_servers import Tls, authzen_pdp

from evalsi.auth.principal import Principal
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.config import load_authorization_config
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.authz.external import ExternalAuthorizer

VIEWER = Principal(kind="user", provider="corp", subject="ana", groups=("eng",), roles={"p": ("viewer",)})
NOBODY = Principal(kind="user", provider="corp", subject="zed")
RULES = [{"deny": '"banned" in principal.groups'}, {"require": 'resource.project != "frozen"'}]
ALLOWED = {"corp/ana", "corp/zed"}


def allow_listed(body: dict[str, Any]) -> bool:
    return body["subject"]["id"] in ALLOWED and body["action"]["name"] == "runs.read"


def build(url: str, mode: str = "require", **extra: Any) -> tuple[Authorizer, ExternalAuthorizer]:
    # A generous deadline: under load a loopback answer can take longer than the 200ms default.
    section = {"authzen": {"url": url}, "mode": mode, "timeout": "5s", **extra}
    config = load_authorization_config({"rules": RULES, "ext_authz": section})
    assert config.external is not None
    return Authorizer(authorization=config), ExternalAuthorizer.from_config(config.external)


async def decide(local: Authorizer, external: ExternalAuthorizer, access: AccessRequest) -> Decision:
    return await external.check(access, local.decide(access))


def read_run(principal: Principal, run: str = "r1", project: str = "p") -> AccessRequest:
    return AccessRequest(principal, "runs.read", project, {"project": project, "run": {"id": run}},
                         method="/evalsi.v1alpha1.RunService/GetRun", protocol="grpc", source="127.0.0.1")


async def test_the_request_is_an_authzen_access_evaluation_and_both_must_allow_in_mode_require() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url)
        try:
            decision = await decide(local, external, read_run(VIEWER))
            assert decision.allowed
            assert decision.deciding.startswith("role viewer")
            assert f"AuthZEN PDP {pdp.url} allowed" in decision.deciding
            body = pdp.requests[0]
            assert body["subject"]["type"] == "user" and body["subject"]["id"] == "corp/ana"
            assert body["subject"]["properties"]["groups"] == ["eng"]
            assert body["action"] == {"name": "runs.read"}
            assert body["resource"]["type"] == "runs" and body["resource"]["id"] == "r1"
            assert body["resource"]["properties"]["run"] == {"id": "r1"}
            assert body["context"] == {"project": "p", "method": "/evalsi.v1alpha1.RunService/GetRun",
                                       "protocol": "grpc", "source": "127.0.0.1", "partial": False}
            assert pdp.headers[0]["content-type"] == "application/json" and pdp.headers[0]["x-request-id"]

            # The PDP denies what the local roles allow: require refuses, naming the PDP and its reason.
            other = Principal(kind="user", provider="corp", subject="bea", roles={"p": ("viewer",)})
            denied = await decide(local, external, read_run(other))
            assert not denied.allowed
            assert denied.deciding == f"AuthZEN PDP {pdp.url} denied: not on the list (ext_authz mode require)"
            assert denied.trace[-1].startswith(f"AuthZEN PDP {pdp.url} denied")

            # A local refusal is final in mode require: the PDP is not asked.
            asked = len(pdp.requests)
            assert not (await decide(local, external, read_run(NOBODY))).allowed
            assert len(pdp.requests) == asked
        finally:
            await external.aclose()


async def test_mode_decide_grants_without_a_local_role_but_local_deny_and_require_rules_win() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url, "decide")
        try:
            granted = await decide(local, external, read_run(NOBODY))  # no role at all; the PDP lists corp/zed
            assert granted.allowed
            assert granted.deciding == f"AuthZEN PDP {pdp.url} allowed (ext_authz mode decide)"

            # A local allow the PDP refuses is refused: the external decision is final.
            viewer_bea = Principal(kind="user", provider="corp", subject="bea", roles={"p": ("viewer",)})
            assert not (await decide(local, external, read_run(viewer_bea))).allowed

            asked = len(pdp.requests)
            banned = Principal(kind="user", provider="corp", subject="zed", groups=("banned",))
            by_deny = await decide(local, external, read_run(banned))
            assert not by_deny.allowed and by_deny.deciding.startswith("deny rule authorization.rules[0]")
            by_require = await decide(local, external, read_run(NOBODY, project="frozen"))
            assert not by_require.allowed and "does not hold" in by_require.deciding
            assert len(pdp.requests) == asked  # neither was sent to the PDP
        finally:
            await external.aclose()


async def test_answers_are_cached_per_question_for_the_ttl_and_concurrent_questions_share_one_call() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url, cache_ttl="30s")
        now = [1000.0]
        external.cache._clock = lambda: now[0]
        try:
            first = await decide(local, external, read_run(VIEWER))
            second = await decide(local, external, read_run(VIEWER))
            assert first.allowed and second.allowed
            assert len(pdp.requests) == 1  # the second was not sent
            assert second.trace[-1].endswith("(cached)") and not first.trace[-1].endswith("(cached)")

            await decide(local, external, read_run(VIEWER, run="r2"))  # another resource: another question
            assert len(pdp.requests) == 2

            now[0] += 31  # past the TTL: asked again
            await decide(local, external, read_run(VIEWER))
            assert len(pdp.requests) == 3

            pdp.delay_s = 0.05
            results = await asyncio.gather(*(decide(local, external, read_run(VIEWER, run="r3")) for _ in range(5)))
            assert all(result.allowed for result in results)
            assert len(pdp.requests) == 4  # five identical questions in flight, one call
        finally:
            await external.aclose()


async def test_the_cache_is_bounded_and_can_be_turned_off() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url, max_cache_entries=2)
        off_local, off = build(pdp.url, cache_ttl=0)
        try:
            for run in ("a", "b", "c"):
                await decide(local, external, read_run(VIEWER, run=run))
            assert len(external.cache) == 2
            await decide(local, external, read_run(VIEWER, run="a"))  # the oldest was evicted: asked again
            assert len(pdp.requests) == 4
            await decide(off_local, off, read_run(VIEWER))
            await decide(off_local, off, read_run(VIEWER))
            assert len(pdp.requests) == 6 and len(off.cache) == 0
        finally:
            await external.aclose()
            await off.aclose()


async def test_a_timeout_fails_closed_and_is_not_cached() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url, "decide")
        hasty = ExternalAuthorizer(replace(external.config, timeout_s=0.1), external.point, cache=external.cache)
        try:
            pdp.delay_s = 3.0
            loop = asyncio.get_running_loop()
            started = loop.time()
            decision = await decide(local, hasty, read_run(VIEWER))
            assert loop.time() - started < 2.5  # the deadline, not the PDP's pace
            assert not decision.allowed
            assert decision.deciding == (f"AuthZEN PDP {pdp.url} failed (no answer within 100ms): "
                                         "denied (fail closed)")
            pdp.delay_s = 0.0
            # The same cache, with a deadline the answer meets: the failure was not kept.
            assert (await decide(local, external, read_run(VIEWER))).allowed
        finally:
            await external.aclose()


async def test_a_pdp_error_or_a_malformed_answer_fails_closed() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        local, external = build(pdp.url, "decide")
        try:
            pdp.fail_status = 500
            decision = await decide(local, external, read_run(VIEWER))
            assert not decision.allowed
            assert "failed (ExternalAuthorizerError: the PDP answered HTTP 500)" in decision.deciding
            pdp.fail_status = 0
            pdp.policy = lambda body: "yes"  # type: ignore[assignment,return-value]
            malformed = await decide(local, external, read_run(VIEWER, run="r9"))
            assert not malformed.allowed and 'no boolean "decision"' in malformed.deciding
        finally:
            await external.aclose()


async def test_an_unreachable_pdp_fails_closed() -> None:
    async with authzen_pdp(allow_listed) as pdp:
        url = pdp.url
    local, external = build(url, "decide")  # the server is gone: connection refused
    try:
        decision = await decide(local, external, read_run(VIEWER))
        assert not decision.allowed and "denied (fail closed)" in decision.deciding
    finally:
        await external.aclose()


async def test_headers_from_send_the_pdp_its_own_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_PDP_AUTH", "Bearer pdp-secret")
    async with authzen_pdp(allow_listed) as pdp:
        config = load_authorization_config({"ext_authz": {"authzen": {
            "url": pdp.url, "headers_from": {"Authorization": {"env": "EVALSI_TEST_PDP_AUTH"}}}}})
        assert config.external is not None
        assert "pdp-secret" not in repr(config.external)  # never printed with the config
        external = ExternalAuthorizer.from_config(config.external)
        try:
            await external.check(read_run(VIEWER), Decision(True, "role viewer"))
            assert pdp.headers[0]["authorization"] == "Bearer pdp-secret"
        finally:
            await external.aclose()


async def test_https_to_a_pdp_whose_ca_is_named_and_refused_without_it(tmp_path: Path) -> None:
    tls = Tls.create()
    (tmp_path / "ca.pem").write_bytes(tls.ca)
    async with authzen_pdp(allow_listed, tls, tmp_path) as pdp:
        assert pdp.url.startswith("https://")
        local, external = build(pdp.url, "decide")  # the system's roots do not include the test CA
        config = load_authorization_config({"ext_authz": {"authzen": {"url": pdp.url,
                                                                      "ca_file": str(tmp_path / "ca.pem")}}})
        assert config.external is not None
        trusting = ExternalAuthorizer.from_config(config.external)
        try:
            untrusted = await decide(local, external, read_run(NOBODY))
            assert not untrusted.allowed and "denied (fail closed)" in untrusted.deciding
            assert pdp.requests == []  # the handshake failed: nothing was sent
            assert (await trusting.check(read_run(NOBODY), Decision(True, "role viewer"))).allowed
            assert len(pdp.requests) == 1
        finally:
            await external.aclose()
            await trusting.aclose()


async def test_metrics_count_answers_cache_hits_and_failures_and_time_the_calls() -> None:
    from prometheus_client import CollectorRegistry

    from evalsi.authz.external_metrics import ExternalAuthzMetrics

    registry = CollectorRegistry()
    async with authzen_pdp(allow_listed) as pdp:
        local, built = build(pdp.url, "decide", cache_ttl="30s")
        external = ExternalAuthorizer(built.config, built.point, metrics=ExternalAuthzMetrics(registry))
        name = built.point.describe()

        def count(answer: str, cached: str) -> float:
            value = registry.get_sample_value("evalsi_ext_authz_decisions_total",
                                              {"authorizer": name, "answer": answer, "cached": cached})
            return value or 0.0

        try:
            await decide(local, external, read_run(VIEWER))
            await decide(local, external, read_run(VIEWER))  # from the cache
            await decide(local, external, read_run(NOBODY, run="r9"))  # allowed by the PDP (decide mode)
            assert (count("allowed", "false"), count("allowed", "true")) == (2.0, 1.0)
            pdp.fail_status = 500
            await decide(local, external, read_run(VIEWER, run="r-error"))
            assert count("error", "false") == 1.0
            calls = registry.get_sample_value("evalsi_ext_authz_request_seconds_count", {"authorizer": name})
            assert calls == 3.0  # the cache hit made no call; the failed call is timed too
        finally:
            await external.aclose()


def test_the_gate_built_from_settings_registers_the_metrics_on_the_registry_it_is_given() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from evalsi.auth.api_keys import hash_api_key, new_api_key
    from evalsi.gate.exposure import AccessSettings

    settings = AccessSettings.from_document({
        "auth": {"api_keys": {"keys": [{"name": "k", "key": hash_api_key(new_api_key()), "roles": {"p": ["viewer"]}}]}},
        "authorization": {"ext_authz": {"authzen": {"url": "http://127.0.0.1:9/pdp"}}}})
    registry = CollectorRegistry()
    gate = settings.gate(metrics=registry)
    assert gate is not None and gate.external is not None and gate.external.metrics is not None
    assert b"evalsi_ext_authz_request_seconds" in generate_latest(registry)
