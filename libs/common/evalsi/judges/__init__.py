"""Model providers for LLM judges: config, connectors, rate limits, circuit breakers and the answer cache.

Typical use (one limiter, cache and breaker set per process, shared by every judge)::

    limiter, cache, breakers = RateLimiter(), JudgeCache(), CircuitBreakers()
    async with JudgeClient(JudgeConfig.from_mapping(spec, where="judges.default"),
                           limiter=limiter, cache=cache, breakers=breakers) as client:
        answer = await client.complete([{"role": "user", "content": "..."}], template_hash=h)
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

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

# Public name -> submodule, loaded on first use (PEP 562): the connectors pull aiohttp (~1 s to import) and
# kv_buckets nats-py, while judges.config alone is what connection files, specs and the CLI's start need.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("BreakerState", "CircuitBreaker", "CircuitBreakers", "CircuitOpenError"), "breaker"),
    **dict.fromkeys(("JudgeCache", "cache_key", "default_cache_dir"), "cache"),
    **dict.fromkeys(("JudgeClient", "JudgeStats"), "client"),
    **dict.fromkeys(("DEFAULT_API_KEY_ENVS", "DEFAULT_BASE_URLS", "PROVIDERS", "JudgeConfig"), "config"),
    **dict.fromkeys(
        (
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
        "connectors",
    ),
    "NatsKVBucketStore": "kv_buckets",
    **dict.fromkeys(
        ("BucketState", "BucketStore", "InMemoryBucketStore", "Limits", "ModelLimiter", "RateLimiter"), "ratelimit"
    ),
}

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
