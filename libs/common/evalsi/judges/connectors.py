"""HTTP connectors for the two judge protocols: OpenAI-compatible chat completions and Anthropic messages.

A connector turns chat messages into one provider answer (``Completion``) and owns the per-request
policy: timeouts, which failures are worth retrying, and how long to wait between tries.

- 429: retry after the provider's ``Retry-After`` (seconds or HTTP-date; ``retry-after-ms`` too), or
  exponential backoff with jitter when absent; the shared limiter is told, so every caller of that model
  slows down, not only this one.
- 408, 5xx, connection errors, timeouts: retry with exponential backoff and jitter.
- Other 4xx (bad request, bad key, unknown model): retrying cannot help; ``ProviderError`` at once,
  with the status and the provider's own message.
- A 2xx whose body is not the protocol's JSON shape: ``ProviderError`` at once. It usually means
  ``base_url`` points at something else (a web page, a proxy), which retries will not fix, and it must
  never reach a metric as a score.

Sleeping and randomness are injected, so tests assert exact waits without waiting.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp

from evalsi.errors import BadInputError, InfraError

from .config import JudgeConfig
from .ratelimit import Clock, ModelLimiter, Sleep
from .redaction import redact

log = logging.getLogger(__name__)

Message = Mapping[str, Any]

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024

# 400 bad request (e.g. context too long), 413 too large, 422 unprocessable: about the request, not the
# provider. 401/403/404 are not here: a bad key or model fails every call, which the breaker should stop.
_REQUEST_SPECIFIC_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True)
class Completion:
    """One answer from a judge model. ``raw`` is the provider's response body, kept for provenance."""

    text: str
    input_tokens: int
    output_tokens: int
    model: str
    cached: bool = False
    raw: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class RetryPolicy:
    """Waits between attempts. The number of attempts comes from ``JudgeConfig.max_retries``."""

    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    max_retry_after_s: float = 120.0  # a provider asking for longer is capped: a run should not stall

    def backoff(self, retry: int, rng: random.Random) -> float:
        """Delay before retry number ``retry`` (1-based): exponential, with "equal jitter" (half fixed,
        half random) so concurrent callers that failed together do not come back together."""
        cap = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        return cap / 2 + rng.uniform(0, cap / 2)


class ProviderError(InfraError):
    """A judge call failed at the provider (or on the way there). ``status`` is None for timeouts and
    connection errors; ``attempts`` counts the HTTP requests made."""

    def __init__(self, message: str, *, provider: str, model: str, status: int | None, attempts: int) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.attempts = attempts

    @property
    def request_specific(self) -> bool:
        """The provider is up and rejected this one request (too long, refused content): other requests
        may well succeed, so this says nothing about the provider's health."""
        return self.status in _REQUEST_SPECIFIC_STATUSES


@dataclass(eq=False)
class _Failure(Exception):
    """One attempt's failure, before the retry loop decides what to do with it."""

    status: int | None
    detail: str
    retryable: bool
    retry_after: float | None = None

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.detail}" if self.status is not None else self.detail


def parse_retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds to wait from ``Retry-After`` (delta-seconds or HTTP-date, RFC 9110) or the
    ``retry-after-ms`` header OpenAI sends; None when absent or unparseable. ``now`` is wall-clock time."""
    headers = {k.lower(): v for k, v in headers.items()}
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def estimate_tokens(messages: Sequence[Message], max_output_tokens: int | None) -> int:
    """A cheap upper-ish estimate for the tokens-per-minute bucket, before the provider counts:
    ~4 characters per token plus a few per message, plus the output allowance (providers count
    ``max_tokens`` against TPM too). The limiter is corrected with the real usage afterwards."""
    chars = sum(len(json.dumps(m.get("content", ""), ensure_ascii=False)) for m in messages)
    return math.ceil(chars / 4) + 4 * len(messages) + (max_output_tokens or 0)


class Connector(ABC):
    """Shared HTTP, retry and error handling; subclasses only know their protocol's shapes."""

    provider: ClassVar[str]

    def __init__(
        self,
        config: JudgeConfig,
        *,
        session: aiohttp.ClientSession | None = None,
        limiter: ModelLimiter | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
        wall_clock: Clock = time.time,
    ) -> None:
        if config.provider != self.provider:
            raise ValueError(f"{type(self).__name__} cannot serve provider {config.provider!r}")
        self.config = config
        self._session = session
        self._owns_session = session is None
        self._limiter = limiter
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        # A configured credential that is missing fails each call as an infrastructure error (the operator's to
        # fix), not the construction: a worker builds its judges before it knows whether they will be called.
        self._credential_problem = ""
        try:
            self._api_key = config.api_key(environ)
        except BadInputError as exc:
            self._api_key, self._credential_problem = None, str(exc)
        self._wall_clock = wall_clock
        self.requests = 0  # HTTP requests sent
        self.retries = 0  # of which retries

    # --- protocol specifics ------------------------------------------------------------------------

    @abstractmethod
    def build_request(self, messages: Sequence[Message]) -> tuple[str, dict[str, str], dict[str, Any]]:
        """URL, headers and JSON body for one call."""

    @abstractmethod
    def parse_response(self, doc: Any) -> Completion:
        """The Completion in a 2xx body; raises KeyError/TypeError/ValueError/IndexError on a bad shape."""

    # --- the call ----------------------------------------------------------------------------------

    async def complete(self, messages: Sequence[Message]) -> Completion:
        """One answer, retrying per the policy above; ``ProviderError`` (an InfraError) if there is none."""
        msgs = check_messages(messages)
        if self._credential_problem:
            raise self._error(f"no credential: {self._credential_problem}", None, 0)
        url, headers, body = self.build_request(msgs)
        estimate = estimate_tokens(msgs, body.get("max_tokens") or body.get("max_completion_tokens"))
        attempts = self.config.max_retries + 1
        last: _Failure | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self.retries += 1
            if self._limiter is not None:
                await self._limiter.acquire(estimate)
            self.requests += 1
            try:
                completion = await self._send(url, headers, body)
            except _Failure as failure:
                if not failure.retryable:
                    raise self._error(f"{failure.describe()} (from {url})", failure.status, attempt) from None
                last = failure
                delay = self._delay(failure, attempt)
                if failure.status == 429 and self._limiter is not None:
                    await self._limiter.penalize(delay)
                if attempt == attempts:
                    break
                log.info("%s %s: attempt %d failed (%s); retrying in %.2f s",
                         self.provider, self.config.model, attempt, self._redact(failure.describe()), delay)
                await self._sleep(delay)
                continue
            if self._limiter is not None:
                await self._limiter.settle(estimate, completion.input_tokens + completion.output_tokens)
            return completion
        assert last is not None
        what = f"gave up after {attempts} attempts; last status: {last.describe()}"
        raise self._error(what, last.status, attempts)

    def _delay(self, failure: _Failure, attempt: int) -> float:
        if failure.retry_after is not None:
            return min(failure.retry_after, self._retry.max_retry_after_s)
        return self._retry.backoff(attempt, self._rng)

    def _error(self, what: str, status: int | None, attempts: int) -> ProviderError:
        # The message becomes a result's reason and a log line: never the key, whatever the provider echoed.
        return ProviderError(f"{self.provider} {self.config.model}: {self._redact(what)}", provider=self.provider,
                             model=self.config.model, status=status, attempts=attempts)

    def _redact(self, text: str) -> str:
        return redact(text, (self._api_key,))

    async def _send(self, url: str, headers: dict[str, str], body: dict[str, Any]) -> Completion:
        session = self._get_session()
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_s)
        try:
            async with session.post(url, json=body, headers=headers, timeout=timeout) as resp:
                status, resp_headers = resp.status, resp.headers
                payload = await resp.read()
        except TimeoutError:  # also aiohttp's ServerTimeoutError
            raise _Failure(None, f"timeout after {self.config.timeout_s:g} s", retryable=True) from None
        except aiohttp.InvalidURL as e:
            raise _Failure(None, f"invalid URL {e}", retryable=False) from None
        except aiohttp.ClientError as e:
            raise _Failure(None, f"connection error: {type(e).__name__}: {e}", retryable=True) from None

        if 200 <= status < 300:
            try:
                return self.parse_response(json.loads(payload))
            except (ValueError, KeyError, TypeError, IndexError) as e:
                raise _Failure(status, f"malformed response body ({type(e).__name__}: {e}); "
                               f"body starts {_snippet(payload)!r}", retryable=False) from None
        detail = _error_message(payload)
        if status in (408, 429) or status >= 500:
            retry_after = parse_retry_after(resp_headers, self._wall_clock())
            raise _Failure(status, detail, retryable=True, retry_after=retry_after)
        raise _Failure(status, detail, retryable=False)

    def _get_session(self) -> aiohttp.ClientSession:
        # Created lazily because a ClientSession must be made inside the running event loop.
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    async def aclose(self) -> None:
        if self._owns_session and self._session is not None and not self._session.closed:
            await self._session.close()

    def _params(self) -> dict[str, Any]:
        # None means "leave this param out of the request" (see JudgeConfig).
        return {k: v for k, v in self.config.params.items() if v is not None}


class OpenAIConnector(Connector):
    """POST {base_url}/chat/completions with Bearer auth (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM, ...)."""

    provider = "openai"

    def build_request(self, messages: Sequence[Message]) -> tuple[str, dict[str, str], dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {"model": self.config.model, "messages": [dict(m) for m in messages], **self._params()}
        return f"{self.config.base_url}/chat/completions", headers, body

    def parse_response(self, doc: Any) -> Completion:
        message = doc["choices"][0]["message"]
        content = message.get("content")
        if content is None:  # a refusal or tool call: still an answer, one the judge cannot score
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            raise TypeError(f"choices[0].message.content is {type(content).__name__}, not a string")
        # Some OpenAI-compatible servers omit usage; that is no reason to lose the answer.
        usage = doc.get("usage") or {}
        return Completion(
            text=content,
            input_tokens=_tokens(usage.get("prompt_tokens", 0), "usage.prompt_tokens"),
            output_tokens=_tokens(usage.get("completion_tokens", 0), "usage.completion_tokens"),
            model=str(doc.get("model") or self.config.model),
            raw=doc,
        )


class AnthropicConnector(Connector):
    """POST {base_url}/v1/messages with ``x-api-key`` and ``anthropic-version``."""

    provider = "anthropic"

    def build_request(self, messages: Sequence[Message]) -> tuple[str, dict[str, str], dict[str, Any]]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        # Anthropic takes the system prompt as a top-level field and rejects role "system" in messages.
        system = [m["content"] for m in messages if m["role"] == "system"]
        if any(not isinstance(s, str) for s in system):
            raise BadInputError("judge messages: a system message's content must be a string for anthropic")
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(m) for m in messages if m["role"] != "system"],
            **self._params(),
        }
        body.setdefault("max_tokens", ANTHROPIC_DEFAULT_MAX_TOKENS)  # required by the API
        if system:
            body["system"] = "\n\n".join(system)
        return f"{self.config.base_url}/v1/messages", headers, body

    def parse_response(self, doc: Any) -> Completion:
        if doc["type"] != "message":
            raise ValueError(f"type is {doc['type']!r}, not 'message'")
        blocks = doc["content"]
        if not isinstance(blocks, list):
            raise TypeError(f"content is {type(blocks).__name__}, not a list of blocks")
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        usage = doc["usage"]
        return Completion(
            text=text,
            input_tokens=_tokens(usage["input_tokens"], "usage.input_tokens"),
            output_tokens=_tokens(usage["output_tokens"], "usage.output_tokens"),
            model=str(doc.get("model") or self.config.model),
            raw=doc,
        )


CONNECTORS: Mapping[str, type[Connector]] = {"openai": OpenAIConnector, "anthropic": AnthropicConnector}


def make_connector(config: JudgeConfig, **kwargs: Any) -> Connector:
    """The connector for ``config.provider``; ``kwargs`` as for ``Connector``."""
    return CONNECTORS[config.provider](config, **kwargs)


def check_messages(messages: Sequence[Message]) -> list[Message]:
    """Reject what no provider would accept, with a message that says what is wrong (not an HTTP 400)."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise BadInputError("judge messages: must be a non-empty list of {role, content} mappings")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or "content" not in m:
            raise BadInputError(f"judge messages[{i}]: must be a mapping with a string role and a content")
    return list(messages)


def _tokens(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise TypeError(f"{path} is {v!r}, not a token count")
    return v


def _error_message(payload: bytes) -> str:
    """The provider's own words: both protocols put them at ``error.message``; else the body's start."""
    try:
        doc = json.loads(payload)
        message = doc["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return _snippet(payload) or "(empty body)"


def _snippet(payload: bytes, limit: int = 200) -> str:
    return payload[:limit].decode("utf-8", errors="replace")
