"""The model side of the loop: one neutral conversation, spoken as OpenAI chat completions or Anthropic messages.

The loop keeps the conversation in one provider-neutral form (the dicts below), which is also what a
cassette records, so a trial recorded against one provider reads the same as one against the other:

- ``{"role": "system" | "user", "content": str}``
- ``{"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}``
- ``{"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}``

HTTP, retries, rate limits and the "infrastructure error after retries" rule are the judge connectors'
(``evalsi.judges.connectors``); this module only adds tools to their requests and reads tool calls out of
their answers. A tool call whose arguments are not a JSON object is kept (``arguments_error`` says why), so
the agent is told and can retry: it is the model's mistake, not the provider's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from evalsi.judges import JudgeConfig
from evalsi.judges.connectors import AnthropicConnector, Completion, Connector, OpenAIConnector

from .tools import ToolSpec

Message = dict[str, Any]


@dataclass(frozen=True)
class ModelToolCall:
    id: str
    name: str
    arguments: Any  # the parsed JSON object, or the raw text when it did not parse
    arguments_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments_error is not None:
            out["arguments_error"] = self.arguments_error
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ModelToolCall:
        return cls(id=str(doc["id"]), name=str(doc["name"]), arguments=doc.get("arguments"),
                   arguments_error=doc.get("arguments_error"))


@dataclass(frozen=True)
class ModelAnswer:
    """One model turn: its text, the tools it asked for, and what it cost."""

    text: str
    tool_calls: tuple[ModelToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    finish_reason: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def message(self) -> Message:
        """The assistant message this answer adds to the conversation."""
        out: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            out["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "tool_calls": [call.to_dict() for call in self.tool_calls],
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "model": self.model,
                "finish_reason": self.finish_reason}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> ModelAnswer:
        return cls(text=str(doc.get("text", "")),
                   tool_calls=tuple(ModelToolCall.from_dict(c) for c in doc.get("tool_calls") or ()),
                   input_tokens=int(doc.get("input_tokens", 0)), output_tokens=int(doc.get("output_tokens", 0)),
                   model=str(doc.get("model", "")), finish_reason=str(doc.get("finish_reason", "")))


class ChatModel(Protocol):
    config: JudgeConfig

    async def complete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None
                       ) -> ModelAnswer: ...

    async def aclose(self) -> None: ...


def _parse_arguments(raw: Any) -> tuple[Any, str | None]:
    if isinstance(raw, Mapping):
        return dict(raw), None
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return raw, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})"
        if isinstance(parsed, dict):
            return parsed, None
        return raw, "the arguments must be a JSON object"
    return raw, "the arguments must be a JSON object"


# --- OpenAI-compatible ---------------------------------------------------------------------------------------


def to_openai(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            out.append({"role": "assistant", "content": m.get("content") or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {
                    "name": c["name"],
                    "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]),
                }} for c in m["tool_calls"]]})
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


class _OpenAIToolConnector(OpenAIConnector):
    def __init__(self, config: JudgeConfig, tools: Sequence[ToolSpec], parallel: bool, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._tools = [{"type": "function", "function": spec.to_dict()} for spec in tools]
        self._parallel = parallel

    def build_request(self, messages: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, str], dict[str, Any]]:
        url, headers, body = super().build_request(messages)
        if self._tools:
            body["tools"] = self._tools
            if not self._parallel:  # only sent to turn it off: not every compatible server knows the field
                body["parallel_tool_calls"] = False
        return url, headers, body

    def parse_response(self, doc: Any) -> Completion:
        completion = super().parse_response(doc)
        for call in doc["choices"][0]["message"].get("tool_calls") or ():
            if not isinstance(call["id"], str) or not isinstance(call["function"]["name"], str):
                raise TypeError("a tool call needs a string id and function.name")
        return completion


def _openai_answer(completion: Completion) -> ModelAnswer:
    choice = completion.raw["choices"][0]
    calls = []
    for call in choice["message"].get("tool_calls") or ():
        arguments, error = _parse_arguments(call["function"].get("arguments", ""))
        calls.append(ModelToolCall(id=call["id"], name=call["function"]["name"], arguments=arguments,
                                   arguments_error=error))
    return ModelAnswer(text=completion.text, tool_calls=tuple(calls), input_tokens=completion.input_tokens,
                       output_tokens=completion.output_tokens, model=completion.model,
                       finish_reason=str(choice.get("finish_reason") or ""), raw=completion.raw)


# --- Anthropic -----------------------------------------------------------------------------------------------


def to_anthropic(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Anthropic wants tool results as ``tool_result`` blocks of one user message, calls as ``tool_use`` blocks."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if m.get("is_error"):
                block["is_error"] = True
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m["role"] == "assistant" and m.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                        "input": c["arguments"] if isinstance(c["arguments"], Mapping) else {}}
                       for c in m["tool_calls"]]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


class _AnthropicToolConnector(AnthropicConnector):
    def __init__(self, config: JudgeConfig, tools: Sequence[ToolSpec], parallel: bool, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self._tools = [{"name": s.name, "description": s.description, "input_schema": dict(s.parameters)}
                       for s in tools]
        self._parallel = parallel

    def build_request(self, messages: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, str], dict[str, Any]]:
        url, headers, body = super().build_request(messages)
        if self._tools:
            body["tools"] = self._tools
            if not self._parallel:
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        return url, headers, body

    def parse_response(self, doc: Any) -> Completion:
        completion = super().parse_response(doc)
        for block in doc["content"]:
            if block["type"] == "tool_use" and not (isinstance(block["id"], str) and isinstance(block["name"], str)):
                raise TypeError("a tool_use block needs a string id and name")
        return completion


def _anthropic_answer(completion: Completion) -> ModelAnswer:
    calls = []
    for block in completion.raw["content"]:
        if block["type"] == "tool_use":
            arguments, error = _parse_arguments(block.get("input"))
            calls.append(ModelToolCall(id=block["id"], name=block["name"], arguments=arguments,
                                       arguments_error=error))
    return ModelAnswer(text=completion.text, tool_calls=tuple(calls), input_tokens=completion.input_tokens,
                       output_tokens=completion.output_tokens, model=completion.model,
                       finish_reason=str(completion.raw.get("stop_reason") or ""), raw=completion.raw)


# --- the model -----------------------------------------------------------------------------------------------


class ConnectorModel:
    """A chat model with tools, over the judge connector of its provider. A turn may name other tools than the
    harness's (a task whose environment runs MCP servers): those go through a connector of their own, sharing
    this model's HTTP session and limits, at most ``MAX_TOOL_SETS`` kept."""

    MAX_TOOL_SETS = 16

    def __init__(self, config: JudgeConfig, tools: Sequence[ToolSpec], *, parallel_tool_calls: bool = True,
                 **connector_kwargs: Any) -> None:
        self.config = config
        self._parallel = parallel_tool_calls
        self._kwargs = connector_kwargs
        self._tools_key = _tools_key(tools)
        self._connector = self._make(tools, connector_kwargs)
        if config.provider == "anthropic":
            self._convert, self._answer = to_anthropic, _anthropic_answer
        else:
            self._convert, self._answer = to_openai, _openai_answer
        self._by_tools: dict[str, Connector] = {}
        self._session: aiohttp.ClientSession | None = None  # the other tool sets' own, when none was given

    def _make(self, tools: Sequence[ToolSpec], kwargs: Mapping[str, Any]) -> Connector:
        if self.config.provider == "anthropic":
            return _AnthropicToolConnector(self.config, tools, self._parallel, **kwargs)
        return _OpenAIToolConnector(self.config, tools, self._parallel, **kwargs)

    def _for_tools(self, tools: Sequence[ToolSpec]) -> Connector:
        key = _tools_key(tools)
        if key == self._tools_key:
            return self._connector
        connector = self._by_tools.pop(key, None)
        if connector is None:
            kwargs = dict(self._kwargs)
            if kwargs.get("session") is None:
                if self._session is None:
                    self._session = aiohttp.ClientSession()
                kwargs["session"] = self._session
            connector = self._make(tools, kwargs)  # owns nothing: dropping it releases nothing
        self._by_tools[key] = connector  # most recently used last
        while len(self._by_tools) > self.MAX_TOOL_SETS:
            del self._by_tools[next(iter(self._by_tools))]
        return connector

    async def complete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None
                       ) -> ModelAnswer:
        """The model's next turn, told ``tools`` (the harness's by default); ``ProviderError`` (an InfraError)
        when the provider fails after retries."""
        connector = self._connector if tools is None else self._for_tools(tools)
        return self._answer(await connector.complete(self._convert(messages)))

    async def aclose(self) -> None:
        await self._connector.aclose()
        if self._session is not None:
            await self._session.close()


def _tools_key(tools: Sequence[ToolSpec]) -> str:
    return json.dumps([spec.to_dict() for spec in tools], sort_keys=True)
