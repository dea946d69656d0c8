"""The judges of one evaluation: named JudgeClients sharing one rate limiter, cache, breakers and HTTP session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from evalsi.errors import BadInputError
from evalsi.judges import CircuitBreakers, JudgeCache, JudgeClient, JudgeConfig, RateLimiter

JudgeInput = JudgeConfig | Mapping[str, Any]


def judge_configs(
    judge: JudgeInput | None = None, judges: Mapping[str, JudgeInput] | None = None
) -> dict[str, JudgeConfig]:
    """Named judge configs from ``judge=`` (the default judge) and ``judges=`` (several, by name)."""
    configs: dict[str, JudgeConfig] = {}
    if judge is not None:
        configs["default"] = _config(judge, "judge", "default")
    for name, spec in (judges or {}).items():
        if name in configs:
            raise BadInputError(f"judges.{name}: defined twice (judge= is the judge named 'default')")
        configs[name] = _config(spec, f"judges.{name}", name)
    return configs


def _config(spec: JudgeInput, where: str, name: str) -> JudgeConfig:
    if isinstance(spec, JudgeConfig):
        return spec
    if not isinstance(spec, Mapping):
        raise BadInputError(f"{where}: must be a mapping of judge settings or a JudgeConfig")
    return JudgeConfig.from_mapping({"name": name, **spec}, where=where)


class JudgeSet:
    """Opens one client per named judge; use as ``async with JudgeSet(configs, ...) as judges``."""

    def __init__(
        self,
        configs: Mapping[str, JudgeConfig],
        *,
        cache: bool = True,
        cache_dir: str | Path | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self._configs = dict(configs)
        self._cache = JudgeCache(cache_dir) if cache else JudgeCache.disabled()
        self._limiter = limiter or RateLimiter()
        self._breakers = CircuitBreakers()
        self._session: aiohttp.ClientSession | None = None
        self.clients: dict[str, JudgeClient] = {}

    async def __aenter__(self) -> JudgeSet:
        if self._configs:
            self._session = aiohttp.ClientSession()
        for name, config in self._configs.items():
            self.clients[name] = JudgeClient(
                config, limiter=self._limiter, cache=self._cache, breakers=self._breakers, session=self._session
            )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for client in self.clients.values():
            await client.aclose()
        if self._session is not None:
            await self._session.close()

    def get(self, name: str) -> JudgeClient | None:
        return self.clients.get(name)

    def stats(self) -> dict[str, dict[str, int]]:
        return {name: asdict(client.stats()) for name, client in self.clients.items()}
