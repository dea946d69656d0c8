"""The connectors against protocol-faithful local servers, for both providers."""

import random
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.judges import (
    JudgeConfig,
    ProviderError,
    RateLimiter,
    RetryPolicy,
    make_connector,
    parse_retry_after,
)
from evalsi.testing import FakeAnthropic, FakeOpenAI, FakeProvider

MESSAGES = [{"role": "system", "content": "You grade answers."}, {"role": "user", "content": "Is 2+2=4 right?"}]


class Sleeps(list[float]):
    """An injected sleep that records instead of waiting."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@dataclass
class Setup:
    server: FakeProvider
    provider: str

    def connector(self, environ: dict[str, str] | None = None, **config: Any) -> Any:
        self.sleeps = Sleeps()
        cfg = JudgeConfig(model="judge-model", provider=self.provider, base_url=self.server.base_url,
                          **{"max_retries": 3, **config})
        return make_connector(cfg, sleep=self.sleeps, rng=random.Random(7), environ=environ or {})


@pytest.fixture(params=["openai", "anthropic"])
async def setup(request: pytest.FixtureRequest) -> AsyncIterator[Setup]:
    fake = FakeOpenAI if request.param == "openai" else FakeAnthropic
    async with fake(reply=lambda body: "score: 4 because correct") as server:
        yield Setup(server, request.param)


async def test_success_parses_text_usage_and_model(setup: Setup) -> None:
    conn = setup.connector()
    try:
        c = await conn.complete(MESSAGES)
    finally:
        await conn.aclose()
    assert c.text == "score: 4 because correct"
    assert c.output_tokens == 4
    assert c.input_tokens == 6  # the fake counts words: "You grade answers." + "Is 2+2=4 right?"
    assert c.model == "judge-model"
    assert c.cached is False
    assert c.raw["id"]
    assert setup.sleeps == []
    assert conn.requests == 1 and conn.retries == 0


async def test_openai_request_shape_and_bearer_auth() -> None:
    async with FakeOpenAI(api_key="sk-test") as server:
        cfg = JudgeConfig(model="gpt", base_url=server.base_url, params={"seed": 1, "top_p": None})
        conn = make_connector(cfg, environ={"OPENAI_API_KEY": "sk-test"})
        await conn.complete(MESSAGES)
        await conn.aclose()
    assert server.requests == [{"model": "gpt", "messages": MESSAGES, "temperature": 0, "seed": 1}]
    assert server.request_headers[0]["Authorization"] == "Bearer sk-test"


async def test_anthropic_request_shape_system_field_and_headers() -> None:
    async with FakeAnthropic(api_key="ak-test") as server:
        cfg = JudgeConfig(model="claude", provider="anthropic", base_url=server.base_url)
        conn = make_connector(cfg, environ={"ANTHROPIC_API_KEY": "ak-test"})
        await conn.complete(MESSAGES)
        await conn.aclose()
    body = server.requests[0]
    assert body == {"model": "claude", "system": "You grade answers.", "max_tokens": 1024, "temperature": 0,
                    "messages": [{"role": "user", "content": "Is 2+2=4 right?"}]}
    headers = server.request_headers[0]
    assert headers["x-api-key"] == "ak-test"
    assert headers["anthropic-version"] == "2023-06-01"


async def test_no_api_key_means_no_auth_header(setup: Setup) -> None:
    conn = setup.connector(environ={})
    await conn.complete(MESSAGES)
    await conn.aclose()
    sent = {k.lower() for k in setup.server.request_headers[0]}
    assert "authorization" not in sent and "x-api-key" not in sent


async def test_429_honors_retry_after_seconds(setup: Setup) -> None:
    setup.server.enqueue(("status", 429, {"Retry-After": "1"}), ("status", 429, {"Retry-After": "2.5"}))
    conn = setup.connector()
    c = await conn.complete(MESSAGES)
    await conn.aclose()
    assert c.text == "score: 4 because correct"
    assert setup.sleeps == [1.0, 2.5]
    assert len(setup.server.requests) == 3
    assert conn.retries == 2


async def test_429_honors_retry_after_http_date() -> None:
    async with FakeOpenAI(script=[("status", 429, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})]) as server:
        sleeps = Sleeps()
        now = 1445412480.0 - 7  # 7 s before that date
        conn = make_connector(JudgeConfig(model="m", base_url=server.base_url), sleep=sleeps,
                              wall_clock=lambda: now, environ={})
        await conn.complete(MESSAGES)
        await conn.aclose()
    assert sleeps == [pytest.approx(7.0)]


async def test_429_without_retry_after_backs_off_with_seeded_jitter(setup: Setup) -> None:
    setup.server.enqueue(("status", 429), ("status", 429))
    conn = setup.connector()
    await conn.complete(MESSAGES)
    await conn.aclose()
    rng, policy = random.Random(7), RetryPolicy()
    assert setup.sleeps == [policy.backoff(1, rng), policy.backoff(2, rng)]
    assert 0.5 <= setup.sleeps[0] <= 1.0 and 1.0 <= setup.sleeps[1] <= 2.0  # exponential, jittered


async def test_retry_after_is_capped() -> None:
    async with FakeOpenAI(script=[("status", 429, {"Retry-After": "3600"})]) as server:
        sleeps = Sleeps()
        conn = make_connector(JudgeConfig(model="m", base_url=server.base_url), sleep=sleeps,
                              retry=RetryPolicy(max_retry_after_s=90), environ={})
        await conn.complete(MESSAGES)
        await conn.aclose()
    assert sleeps == [90]


async def test_429_holds_back_other_callers_of_that_model() -> None:
    now = [100.0]
    limiter_sleeps = Sleeps()

    async def limiter_sleep(seconds: float) -> None:
        await limiter_sleeps(seconds)
        now[0] += seconds

    limiter = RateLimiter(clock=lambda: now[0], sleep=limiter_sleep)
    async with FakeOpenAI(script=[("status", 429, {"Retry-After": "3"})]) as server:
        cfg = JudgeConfig(model="m", base_url=server.base_url, max_retries=0)
        conn = make_connector(cfg, sleep=Sleeps(), limiter=limiter.for_model("openai", "m"), environ={})
        with pytest.raises(ProviderError, match="HTTP 429"):
            await conn.complete(MESSAGES)
        await conn.aclose()
    await limiter.for_model("openai", "other-model").acquire()
    assert limiter_sleeps == []  # other models are unaffected
    await limiter.for_model("openai", "m").acquire()  # another caller of the same model, same instant
    assert limiter_sleeps == [3.0]


async def test_500_then_success(setup: Setup) -> None:
    setup.server.enqueue(("status", 500))
    conn = setup.connector()
    c = await conn.complete(MESSAGES)
    await conn.aclose()
    assert c.text == "score: 4 because correct"
    assert len(setup.sleeps) == 1 and 0.5 <= setup.sleeps[0] <= 1.0
    assert len(setup.server.requests) == 2


async def test_timeout_then_success(setup: Setup) -> None:
    setup.server.enqueue(("delay", 2.0))
    conn = setup.connector(timeout_s=0.2)
    c = await conn.complete(MESSAGES)
    await conn.aclose()
    assert c.text == "score: 4 because correct"
    assert len(setup.server.requests) == 2
    assert len(setup.sleeps) == 1


async def test_retries_exhausted_raise_infra_error_naming_everything(setup: Setup) -> None:
    setup.server.enqueue(("status", 500), ("status", 503), ("status", 500))
    conn = setup.connector(max_retries=2)
    with pytest.raises(ProviderError) as e:
        await conn.complete(MESSAGES)
    await conn.aclose()
    assert isinstance(e.value, InfraError)
    msg = str(e.value)
    assert msg.startswith(f"{setup.provider} judge-model: gave up after 3 attempts; last status: HTTP 500: ")
    assert (e.value.status, e.value.attempts) == (500, 3)
    assert len(setup.server.requests) == 3
    assert len(setup.sleeps) == 2  # no pointless sleep after the last attempt
    assert setup.server.pending == 0


async def test_401_fails_at_once_with_the_providers_message(setup: Setup) -> None:
    setup.server.api_key = "right-key"
    conn = setup.connector(environ={"OPENAI_API_KEY": "wrong", "ANTHROPIC_API_KEY": "wrong"})
    with pytest.raises(ProviderError) as e:
        await conn.complete(MESSAGES)
    await conn.aclose()
    expected = "Incorrect API key provided." if setup.provider == "openai" else "invalid x-api-key"
    assert f"HTTP 401: {expected}" in str(e.value)
    assert (e.value.status, e.value.attempts) == (401, 1)
    assert len(setup.server.requests) == 1 and setup.sleeps == []


@pytest.mark.parametrize("status", [400, 404])
async def test_other_4xx_are_not_retried(setup: Setup, status: int) -> None:
    setup.server.enqueue(("status", status))
    conn = setup.connector()
    with pytest.raises(ProviderError, match=f"HTTP {status}"):
        await conn.complete(MESSAGES)
    await conn.aclose()
    assert len(setup.server.requests) == 1 and setup.sleeps == []


@pytest.mark.parametrize("body", ["not json", '{"unexpected": true}', "[]"])
async def test_malformed_200_body_is_an_infra_error_not_a_score(setup: Setup, body: str) -> None:
    setup.server.enqueue(("garbage", body))
    conn = setup.connector()
    with pytest.raises(ProviderError, match="malformed response body") as e:
        await conn.complete(MESSAGES)
    await conn.aclose()
    assert body[:5] in str(e.value)  # the start of what came back, for debugging a wrong base_url
    assert len(setup.server.requests) == 1


async def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    conn = make_connector(JudgeConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1),
                          sleep=sleeps, environ={})
    with pytest.raises(ProviderError, match=r"gave up after 2 attempts; last status: connection error") as e:
        await conn.complete(MESSAGES)
    await conn.aclose()
    assert e.value.status is None and len(sleeps) == 1


async def test_malformed_messages_are_bad_input(setup: Setup) -> None:
    conn = setup.connector()
    for bad in ([], "hello", [{"content": "no role"}]):
        with pytest.raises(BadInputError):
            await conn.complete(bad)  # type: ignore[arg-type]
    await conn.aclose()
    assert setup.server.requests == []


async def test_anthropic_max_tokens_param_overrides_default() -> None:
    async with FakeAnthropic(reply=lambda body: "one two three four") as server:
        cfg = JudgeConfig(model="c", provider="anthropic", base_url=server.base_url, params={"max_tokens": 2})
        conn = make_connector(cfg, environ={})
        c = await conn.complete(MESSAGES)
        await conn.aclose()
    assert server.requests[0]["max_tokens"] == 2
    assert c.text == "one two" and c.raw["stop_reason"] == "max_tokens"


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}, now=0) == 3.0
    assert parse_retry_after({"retry-after": " 1.5 "}, now=0) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}, now=0) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412490.0) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}, now=0) is None
    assert parse_retry_after({}, now=0) is None


def test_connector_refuses_the_wrong_provider() -> None:
    from evalsi.judges import AnthropicConnector

    with pytest.raises(ValueError, match="cannot serve provider 'openai'"):
        AnthropicConnector(JudgeConfig(model="m"))
