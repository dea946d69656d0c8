"""The judges of one evaluation: named JudgeClients sharing one rate limiter, cache, breakers and HTTP session."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp
from google.protobuf import json_format

from evalsi.errors import BadInputError
from evalsi.judges import CircuitBreakers, JudgeCache, JudgeClient, JudgeConfig, RateLimiter
from evalsi.judges.cache import CompletionCache, SharedJudgeCache
from evalsi.v1alpha1.evaluator_pb2 import JudgeSpec

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


def judge_spec_from_config(config: JudgeConfig) -> JudgeSpec:
    """The wire form of a judge (in run specs, saved results and tasks on the bus)."""
    spec = JudgeSpec(
        connector=config.provider,
        model=config.model,
        base_url=config.base_url,
        api_key_env=config.api_key_env,
        template=config.template or "",
        timeout_s=config.timeout_s,
        max_retries=config.max_retries,
        rpm=config.rpm or 0,
        tpm=config.tpm or 0,
    )
    spec.params.update({k: v for k, v in config.params.items() if v is not None})
    return spec


def judge_config_from_spec(name: str, spec: JudgeSpec, *, where: str = "") -> JudgeConfig:
    """A JudgeConfig from its wire form; zero values mean the defaults (proto3 cannot tell them apart)."""
    mapping: dict[str, Any] = {"name": name, "model": spec.model, "provider": spec.connector or "openai"}
    for key in ("base_url", "api_key_env", "template"):
        if getattr(spec, key):
            mapping[key] = getattr(spec, key)
    for key in ("timeout_s", "max_retries", "rpm", "tpm"):
        if getattr(spec, key):
            mapping[key] = getattr(spec, key)
    if spec.HasField("params"):
        mapping["params"] = json_format.MessageToDict(spec.params)
    return JudgeConfig.from_mapping(mapping, where=where or f"judges.{name}")


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
        shared_cache: SharedJudgeCache | None = None,
    ) -> None:
        """``shared_cache`` (workers of a deployment) replaces the on-disk cache; ``cache=False`` is --no-cache."""
        self._configs = dict(configs)
        self._cache: CompletionCache = (
            shared_cache if shared_cache is not None else JudgeCache(cache_dir) if cache else JudgeCache.disabled()
        )
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

    @property
    def limiter(self) -> RateLimiter:
        """The rate limiter every client of this set draws on (targets on the same models should too)."""
        return self._limiter

    def get(self, name: str) -> JudgeClient | None:
        return self.clients.get(name)

    def client_for(self, config: JudgeConfig) -> JudgeClient:
        """A client for ``config``, created on first use and reused (a worker sees the same judges task after task)."""
        # The credential is part of the key: two connections to one endpoint and model (two projects' keys) must
        # never share a client, whose connector holds the key it was built with.
        credential = f"{config.secret}|{config.api_key_env}"
        key = f"{config.name}|{config.template}|{sorted(config.identity().items())}|{credential}"
        client = self.clients.get(key)
        if client is None:
            if self._session is None:
                self._session = aiohttp.ClientSession()
            client = JudgeClient(
                config, limiter=self._limiter, cache=self._cache, breakers=self._breakers, session=self._session
            )
            self.clients[key] = client
        return client

    def stats(self) -> dict[str, dict[str, int]]:
        return {name: asdict(client.stats()) for name, client in self.clients.items()}
