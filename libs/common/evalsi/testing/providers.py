"""Local stand-ins for the OpenAI and Anthropic HTTP APIs, for tests, examples and end-to-end CLI runs.

They speak the real wire protocols (paths, auth headers, request validation, response and error JSON
shapes), so the production connectors run unchanged against them, and they can be scripted to fail::

    async with FakeOpenAI(reply=lambda body: '{"score": 1}') as server:
        server.enqueue(("status", 429, {"Retry-After": "1"}), ("status", 500))
        config = JudgeConfig(model="gpt-4o-mini", base_url=server.base_url)
        ...
        assert len(server.requests) == 3

Script steps, each consumed by one request (after that, requests get the default reply):

- ``("status", code)`` or ``("status", code, {header: value})``: an error in the provider's format.
- ``("delay", seconds)``: wait, then the default reply (to exercise client timeouts).
- ``("garbage", "not json")``: HTTP 200 with that body, as a misconfigured proxy might send.
- ``("text", "...")``: a normal reply with this text instead of the default reply's.
- ``("tool_calls", [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_1"}, ...])``: the model
  asks for these tool calls instead of answering (OpenAI ``tool_calls`` with ``finish_reason: tool_calls``,
  Anthropic ``tool_use`` blocks); ``id`` is optional. The next request, carrying the tool results, gets the
  default reply or the next step, so a tool loop is two steps: ``("tool_calls", [...])``, ``("text", "...")``.

The default reply (``reply``) may also return a ``("tool_calls", [...])`` step instead of text: tool calls that
depend on the request, so concurrent agent loops each get theirs whatever order their requests arrive in; or a
``("status", code)`` step: an error for the requests it picks, whatever order they arrive in.

Run one from a shell for a CLI smoke test: ``python -m evalsi.testing.providers openai --port 8080``.
Token counts are whitespace-separated words: deterministic, not the real tokenizers.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, TracebackType
from typing import Any, Self

from aiohttp import web

Step = tuple[Any, ...]
ReplyFn = Callable[[dict[str, Any]], "str | Step"]


@dataclass(frozen=True)
class ToolCallSpec:
    """One tool call a ``("tool_calls", ...)`` script step makes the model ask for."""

    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments)

_STEP_KINDS = ("status", "delay", "garbage", "text", "tool_calls")

# Error "type" and default message per status, as each provider documents them.
_OPENAI_TYPES: Mapping[int, str] = MappingProxyType({
    400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_error",
    404: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error",
})
_OPENAI_MESSAGES: Mapping[int, str] = MappingProxyType({
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    404: "The model does not exist or you do not have access to it.",
    429: "Rate limit reached for requests. Please try again later.",
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
})
_ANTHROPIC_TYPES: Mapping[int, str] = MappingProxyType({
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
    529: "overloaded_error",
})
_ANTHROPIC_MESSAGES: Mapping[int, str] = MappingProxyType({
    401: "invalid x-api-key", 404: "Not found", 429: "Number of requests has exceeded your rate limit",
    500: "Internal server error", 529: "Overloaded",
})


def echo_reply(body: dict[str, Any]) -> str:
    """The default reply: names the last user message, so outputs are deterministic and traceable."""
    users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content", "") if users else ""
    return f"fake reply to: {_text_of(content)[:80]}"


class FakeProvider(ABC):
    """An aiohttp server on 127.0.0.1 and a free port. Not thread-safe: use from one event loop."""

    def __init__(
        self,
        reply: ReplyFn | None = None,
        *,
        script: Iterable[Step] = (),
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """``api_key``: when set, requests without it get the provider's 401; when None, any or no key
        passes (like a local vLLM). ``port`` 0 picks a free one."""
        self.reply = reply or echo_reply
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []  # JSON bodies received, in order, faulted ones included
        self.request_headers: list[dict[str, str]] = []
        self._script: collections.deque[Step] = collections.deque()
        self.enqueue(*script)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self._ids = itertools.count(1)

    # --- protocol specifics ------------------------------------------------------------------------

    path: str  # the route the API serves
    base_path: str  # what clients put after host:port in base_url

    @abstractmethod
    def check_request(self, request: web.Request, body: Any) -> web.Response | None:
        """The provider's error response for an unauthenticated or invalid request, else None."""

    @abstractmethod
    def success(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """The provider's response JSON for ``text``."""

    @abstractmethod
    def tool_use(self, body: dict[str, Any], calls: list[ToolCallSpec]) -> dict[str, Any]:
        """The provider's response JSON asking for ``calls``."""

    @abstractmethod
    def error(self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None) -> web.Response:
        """An error response in the provider's format."""

    # --- scripting ---------------------------------------------------------------------------------

    def enqueue(self, *steps: Step) -> None:
        for step in steps:
            if not isinstance(step, tuple) or not step or step[0] not in _STEP_KINDS:
                raise ValueError(f"script step must be a tuple starting with one of {_STEP_KINDS}, got {step!r}")
            if step[0] == "tool_calls" and not _valid_tool_calls(step[1:]):
                # Checked here, so a bad script fails in the test that wrote it, not as a 500 in the server.
                raise ValueError(f"a tool_calls step is ('tool_calls', [{{name, arguments, id}}, ...]), got {step!r}")
            self._script.append(step)

    @property
    def pending(self) -> int:
        """Script steps not yet consumed."""
        return len(self._script)

    # --- lifecycle ---------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError(f"{type(self).__name__} is not started; use 'async with' or await start()")
        return f"http://{self._host}:{self._bound_port}{self.base_path}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self.path, self._handle)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a "delay" step stops when the client gives up, as a real server's would,
        # so shutting down after a client timeout does not wait the delay out.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        # Bind the socket ourselves to learn the free port the OS picked (TCPSite hides it).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        self._bound_port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # --- handling ----------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = None
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        rejected = self.check_request(request, body)
        if rejected is not None:
            return rejected
        step = self._script.popleft() if self._script else ("reply",)
        kind = step[0]
        if kind == "status":
            return self.error(int(step[1]), headers=step[2] if len(step) > 2 else None)
        if kind == "garbage":
            return web.Response(status=200, text=str(step[1]), content_type="application/json")
        if kind == "delay":
            await asyncio.sleep(float(step[1]))
        if kind in ("reply", "delay"):
            answer = self.reply(body)
            step = answer if isinstance(answer, tuple) else ("text", answer)
            if step[0] == "status":
                return self.error(int(step[1]), headers=step[2] if len(step) > 2 else None)
            if step[0] not in ("text", "tool_calls") or (step[0] == "tool_calls" and not _valid_tool_calls(step[1:])):
                raise ValueError(
                    f"a reply function returns text, ('tool_calls', [...]) or ('status', code), got {answer!r}"
                )
        if step[0] == "tool_calls":
            return web.json_response(self.tool_use(body, self._tool_calls(step[1])))
        return web.json_response(self.success(body, str(step[1])))

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        return self.error(404, f"Invalid URL ({request.method} {request.path})")

    def _next_id(self) -> int:
        return next(self._ids)

    def _tool_calls(self, calls: Iterable[Mapping[str, Any]]) -> list[ToolCallSpec]:
        return [ToolCallSpec(str(call.get("id") or f"call_fake{self._next_id()}"), call["name"],
                             dict(call.get("arguments") or {})) for call in calls]


class FakeOpenAI(FakeProvider):
    """``POST /v1/chat/completions``; ``base_url`` ends in ``/v1`` like https://api.openai.com/v1."""

    path = "/v1/chat/completions"
    base_path = "/v1"

    def check_request(self, request: web.Request, body: Any) -> web.Response | None:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self.error(401, code="invalid_api_key")
        if not isinstance(body, dict):
            return self.error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body.get("model"), str):
            return self.error(400, "you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return self.error(400, "'messages' must be a non-empty array", param="messages")
        return None

    def success(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        text, truncated = _truncate(text, body.get("max_completion_tokens") or body.get("max_tokens"))
        message = {"role": "assistant", "content": text, "refusal": None}
        return self._completion(body, message, "length" if truncated else "stop", _words(text))

    def tool_use(self, body: dict[str, Any], calls: list[ToolCallSpec]) -> dict[str, Any]:
        message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}}
            for call in calls]}
        return self._completion(body, message, "tool_calls", sum(_words(c.arguments_json) for c in calls))

    def _completion(self, body: dict[str, Any], message: dict[str, Any], finish_reason: str,
                    completion: int) -> dict[str, Any]:
        prompt = sum(_words(m.get("content")) for m in body["messages"] if isinstance(m, dict))
        return {
            "id": f"chatcmpl-fake{self._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
            "system_fingerprint": "fp_fake",
        }

    def error(
        self,
        status: int,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        code: str | None = None,
        param: str | None = None,
    ) -> web.Response:
        doc = {"error": {
            "message": message or _OPENAI_MESSAGES.get(status, f"HTTP {status}"),
            "type": _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code or ("rate_limit_exceeded" if status == 429 else None),
        }}
        return web.json_response(doc, status=status, headers=dict(headers or {}))


class FakeAnthropic(FakeProvider):
    """``POST /v1/messages``; ``base_url`` is the bare origin like https://api.anthropic.com."""

    path = "/v1/messages"
    base_path = ""

    def check_request(self, request: web.Request, body: Any) -> web.Response | None:
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return self.error(401)
        if not request.headers.get("anthropic-version"):
            return self.error(400, "anthropic-version: header is required")
        if not isinstance(body, dict):
            return self.error(400, "Request body must be valid JSON")
        for key in ("model", "max_tokens", "messages"):
            if key not in body:
                return self.error(400, f"{key}: Field required")
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            return self.error(400, "max_tokens: Input should be a valid integer greater than 0")
        if not isinstance(body["messages"], list) or not body["messages"]:
            return self.error(400, "messages: at least one message is required")
        for i, m in enumerate(body["messages"]):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in ("user", "assistant"):
                return self.error(400, f"messages.{i}.role: Unexpected role {role!r}. The Messages API accepts "
                                       "a top-level `system` parameter, not \"system\" as an input message role.")
        return None

    def success(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        text, truncated = _truncate(text, body["max_tokens"])
        return self._message(body, [{"type": "text", "text": text}], "max_tokens" if truncated else "end_turn",
                             _words(text))

    def tool_use(self, body: dict[str, Any], calls: list[ToolCallSpec]) -> dict[str, Any]:
        blocks = [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments} for call in calls]
        return self._message(body, blocks, "tool_use", sum(_words(c.arguments_json) for c in calls))

    def _message(self, body: dict[str, Any], content: list[dict[str, Any]], stop_reason: str,
                 output_tokens: int) -> dict[str, Any]:
        prompt = sum(_words(m.get("content")) for m in body["messages"]) + _words(body.get("system"))
        return {
            "id": f"msg_fake{self._next_id()}",
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": body["model"],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": prompt, "output_tokens": output_tokens},
        }

    def error(self, status: int, message: str | None = None, headers: Mapping[str, str] | None = None) -> web.Response:
        doc = {"type": "error", "error": {
            "type": _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"),
            "message": message or _ANTHROPIC_MESSAGES.get(status, f"HTTP {status}"),
        }}
        return web.json_response(doc, status=status, headers=dict(headers or {}))


def _valid_tool_calls(args: tuple[Any, ...]) -> bool:
    if len(args) != 1 or not isinstance(args[0], list) or not args[0]:
        return False
    return all(isinstance(call, Mapping) and isinstance(call.get("name"), str)
               and isinstance(call.get("arguments") or {}, Mapping) for call in args[0])


def _text_of(content: Any) -> str:
    """Message content is a string or a list of typed blocks ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def _words(content: Any) -> int:
    return len(_text_of(content).split())


def _truncate(text: str, max_tokens: Any) -> tuple[str, bool]:
    words = text.split()
    if isinstance(max_tokens, int) and len(words) > max_tokens:
        return " ".join(words[:max_tokens]), True
    return text, False


async def _serve(server: FakeProvider) -> None:
    async with server:
        print(f"{type(server).__name__} listening; base_url: {server.base_url}", flush=True)
        await asyncio.Event().wait()  # until Ctrl-C


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake LLM provider API on 127.0.0.1.")
    parser.add_argument("provider", choices=["openai", "anthropic"])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    parser.add_argument("--reply", help="fixed reply text (default: echo the last user message)")
    parser.add_argument("--api-key", help="require this key (default: accept any)")
    args = parser.parse_args(argv)
    reply: ReplyFn | None = (lambda _body: args.reply) if args.reply is not None else None
    cls = FakeOpenAI if args.provider == "openai" else FakeAnthropic
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the way to stop it
        asyncio.run(_serve(cls(reply, api_key=args.api_key, port=args.port)))


if __name__ == "__main__":
    main()
