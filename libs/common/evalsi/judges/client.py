"""``JudgeClient``: the one call judges make, ``await client.complete(messages)``.

Order of a call: cache (a hit costs nothing and needs no healthy provider) -> circuit breaker (fail fast
while the provider is down) -> connector, which takes rate-limit capacity per attempt and retries ->
cache the answer. Only answers are cached; failures are retried on the next run.

The limiter, cache and breakers are passed in so that all judges of a process share them: two judges on
the same model must draw from the same quota and trip the same breaker.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType

import aiohttp

from evalsi.errors import InfraError

from .breaker import CircuitBreakers
from .cache import CompletionCache
from .config import JudgeConfig
from .connectors import Completion, Message, ProviderError, RetryPolicy, check_messages, make_connector
from .ratelimit import RateLimiter, Sleep


@dataclass(frozen=True)
class JudgeStats:
    """Counters for run reports. Tokens are the provider-reported usage of live calls (not cache hits)."""

    calls: int = 0  # complete() calls that went to the provider (cache misses the breaker let through)
    cache_hits: int = 0
    retries: int = 0  # extra HTTP attempts after a 429, 5xx, timeout or connection error
    failures: int = 0  # complete() calls that ended in InfraError, including circuit-open fast failures
    input_tokens: int = 0
    output_tokens: int = 0


class JudgeClient:
    def __init__(
        self,
        config: JudgeConfig,
        *,
        limiter: RateLimiter,
        cache: CompletionCache,
        breakers: CircuitBreakers | None = None,
        session: aiohttp.ClientSession | None = None,
        retry: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        """``breakers`` defaults to a private set; pass a shared ``CircuitBreakers`` like the limiter.
        ``session``, ``retry``, ``sleep``, ``rng`` and ``environ`` go to the connector (see there)."""
        self.config = config
        self._cache = cache
        self._breaker = (breakers or CircuitBreakers()).for_model(config.provider, config.model)
        self._connector = make_connector(
            config,
            session=session,
            limiter=limiter.for_model(config.provider, config.model, rpm=config.rpm, tpm=config.tpm),
            retry=retry,
            sleep=sleep,
            rng=rng,
            environ=environ,
        )
        self._identity = config.identity()
        self._calls = self._cache_hits = self._failures = self._input_tokens = self._output_tokens = 0

    async def complete(self, messages: Sequence[Message], *, template_hash: str = "") -> Completion:
        """The judge model's answer to ``messages`` (``cached=True`` when served from the cache).

        ``template_hash`` identifies the prompt template the messages were rendered from, so a changed
        template never reuses answers to the old one even if it renders identical text for some record.
        Raises ``InfraError`` when no answer could be had; ``BadInputError`` for malformed messages.
        """
        msgs = check_messages(messages)
        key = self._cache.key(self._identity, template_hash, msgs) if self._cache.enabled else None
        if key is not None:
            hit = await self._cache.get(key)
            if hit is not None:
                self._cache_hits += 1
                return replace(hit, cached=True)
        try:
            # Raises CircuitOpenError (an InfraError) while open. A 400 for one over-long prompt must not
            # open the breaker for every other record, hence the predicate.
            with self._breaker.guard(is_failure=_provider_unhealthy):
                self._calls += 1
                completion = await self._connector.complete(msgs)
        except InfraError:
            self._failures += 1
            raise
        self._input_tokens += completion.input_tokens
        self._output_tokens += completion.output_tokens
        if key is not None:
            await self._cache.put(key, completion)
        return completion

    def stats(self) -> JudgeStats:
        """A snapshot of the counters (a new object each call; safe to keep or ``asdict``)."""
        return JudgeStats(
            calls=self._calls,
            cache_hits=self._cache_hits,
            retries=self._connector.retries,
            failures=self._failures,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
        )

    async def aclose(self) -> None:
        """Close the HTTP session if the client created it."""
        await self._connector.aclose()

    async def __aenter__(self) -> JudgeClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _provider_unhealthy(error: InfraError) -> bool:
    return not (isinstance(error, ProviderError) and error.request_specific)
