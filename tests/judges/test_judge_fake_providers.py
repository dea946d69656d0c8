"""The fake servers answer like the real APIs, so connector tests against them mean something."""

import aiohttp
import pytest

from evalsi.testing import FakeAnthropic, FakeOpenAI


async def post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict, dict]:
    async with aiohttp.ClientSession() as s, s.post(url, json=body, headers=headers or {}) as r:
        return r.status, await r.json(), dict(r.headers)


async def test_openai_success_shape() -> None:
    async with FakeOpenAI(reply=lambda body: "yes it is") as server:
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        status, doc, _ = await post(f"{server.base_url}/chat/completions",
                                    {"model": "gpt", "messages": [{"role": "user", "content": "a b"}]})
    assert status == 200
    assert doc["object"] == "chat.completion" and doc["id"].startswith("chatcmpl-") and doc["model"] == "gpt"
    assert doc["choices"][0]["message"] == {"role": "assistant", "content": "yes it is", "refusal": None}
    assert doc["choices"][0]["finish_reason"] == "stop"
    assert doc["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}


async def test_anthropic_success_shape() -> None:
    async with FakeAnthropic(reply=lambda body: "fine") as server:
        status, doc, _ = await post(f"{server.base_url}/v1/messages",
                                    {"model": "c", "max_tokens": 5, "system": "be brief",
                                     "messages": [{"role": "user", "content": "hi"}]},
                                    {"anthropic-version": "2023-06-01"})
    assert status == 200
    assert doc == {"id": "msg_fake1", "type": "message", "role": "assistant",
                   "content": [{"type": "text", "text": "fine"}], "model": "c", "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}


async def test_scripted_error_uses_each_providers_error_format() -> None:
    async with FakeOpenAI(script=[("status", 429, {"Retry-After": "7"})]) as server:
        status, doc, headers = await post(f"{server.base_url}/chat/completions",
                                          {"model": "g", "messages": [{"role": "user", "content": "x"}]})
    assert status == 429 and headers["Retry-After"] == "7"
    assert doc["error"]["code"] == "rate_limit_exceeded" and doc["error"]["message"]
    async with FakeAnthropic(script=[("status", 529)]) as server:
        status, doc, _ = await post(f"{server.base_url}/v1/messages",
                                    {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
                                    {"anthropic-version": "2023-06-01"})
    assert status == 529 and doc == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.mark.parametrize(
    ("body", "headers", "fragment"),
    [
        ({"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}, {}, "anthropic-version"),
        ({"model": "c", "messages": [{"role": "user", "content": "x"}]}, {"anthropic-version": "v"}, "max_tokens"),
        ({"model": "c", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
         {"anthropic-version": "v"}, "top-level `system`"),
    ],
)
async def test_anthropic_rejects_what_the_real_api_rejects(body: dict, headers: dict, fragment: str) -> None:
    async with FakeAnthropic() as server:
        status, doc, _ = await post(f"{server.base_url}/v1/messages", body, headers)
    assert status == 400 and doc["error"]["type"] == "invalid_request_error" and fragment in doc["error"]["message"]


async def test_api_key_enforced_only_when_configured() -> None:
    body = {"model": "g", "messages": [{"role": "user", "content": "x"}]}
    async with FakeOpenAI(api_key="k") as server:
        url = f"{server.base_url}/chat/completions"
        assert (await post(url, body))[0] == 401
        assert (await post(url, body, {"Authorization": "Bearer k"}))[0] == 200
    assert len(server.requests) == 2  # rejected requests are recorded too


async def test_unknown_path_is_a_404_in_provider_format() -> None:
    async with FakeOpenAI() as server:
        status, doc, _ = await post(f"{server.base_url}/completions", {})
    assert status == 404 and "Invalid URL" in doc["error"]["message"]


def test_script_steps_are_validated() -> None:
    with pytest.raises(ValueError, match="script step"):
        FakeOpenAI(script=[("explode",)])
    with pytest.raises(RuntimeError, match="not started"):
        _ = FakeOpenAI().base_url
