"""Model providers for LLM judges: config, connectors, rate limits, circuit breakers and the answer cache.

Typical use (one limiter, cache and breaker set per process, shared by every judge)::

    limiter, cache, breakers = RateLimiter(), JudgeCache(), CircuitBreakers()
    async with JudgeClient(JudgeConfig.from_mapping(spec, where="judges.default"),
                           limiter=limiter, cache=cache, breakers=breakers) as client:
        answer = await client.complete([{"role": "user", "content": "..."}], template_hash=h)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalsi._lazy import lazy_exports

if TYPE_CHECKING:
    from .breaker import BreakerState, CircuitBreaker, CircuitBreakers, CircuitOpenError
    from .cache import JudgeCache, cache_key, default_cache_dir
    from .client import JudgeClient, JudgeStats
    from .config import DEFAULT_API_KEY_ENVS, DEFAULT_BASE_URLS, PROVIDERS, JudgeConfig
    from .connectors import (
        AnthropicConnector,
        Completion,
        Connector,
        Message,
        OpenAIConnector,
        ProviderError,
        RetryPolicy,
        make_connector,
        parse_retry_after,
    )
    from .kv_buckets import NatsKVBucketStore
    from .ratelimit import BucketState, BucketStore, InMemoryBucketStore, Limits, ModelLimiter, RateLimiter

# Loaded on first use: the connectors pull aiohttp (~1 s to import) and kv_buckets nats-py, while judges.config
# alone is what connection files, specs and the CLI's start need.
__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {
        ".breaker": ("BreakerState", "CircuitBreaker", "CircuitBreakers", "CircuitOpenError"),
        ".cache": ("JudgeCache", "cache_key", "default_cache_dir"),
        ".client": ("JudgeClient", "JudgeStats"),
        ".config": ("DEFAULT_API_KEY_ENVS", "DEFAULT_BASE_URLS", "PROVIDERS", "JudgeConfig"),
        ".connectors": (
            "AnthropicConnector",
            "Completion",
            "Connector",
            "Message",
            "OpenAIConnector",
            "ProviderError",
            "RetryPolicy",
            "make_connector",
            "parse_retry_after",
        ),
        ".kv_buckets": ("NatsKVBucketStore",),
        ".ratelimit": ("BucketState", "BucketStore", "InMemoryBucketStore", "Limits", "ModelLimiter", "RateLimiter"),
    },
)

__all__ = [  # noqa: RUF022 - grouped by topic, not alphabetically, for readers
    # configuration
    "DEFAULT_API_KEY_ENVS",
    "DEFAULT_BASE_URLS",
    "PROVIDERS",
    "JudgeConfig",
    # the call judges make
    "Completion",
    "JudgeClient",
    "JudgeStats",
    "Message",
    # connectors and retry policy
    "AnthropicConnector",
    "Connector",
    "OpenAIConnector",
    "ProviderError",
    "RetryPolicy",
    "make_connector",
    "parse_retry_after",
    # rate limiting
    "BucketState",
    "BucketStore",
    "InMemoryBucketStore",
    "Limits",
    "ModelLimiter",
    "RateLimiter",
    "NatsKVBucketStore",  # shared between processes
    # circuit breaking
    "BreakerState",
    "CircuitBreaker",
    "CircuitBreakers",
    "CircuitOpenError",
    # caching
    "JudgeCache",
    "cache_key",
    "default_cache_dir",
]
