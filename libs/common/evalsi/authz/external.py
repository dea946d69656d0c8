"""External authorization: an AuthZEN PDP or an Envoy ext_authz server asked after the local decision.

The local authorizer stays pure and synchronous; the gate awaits :meth:`ExternalAuthorizer.check` with the
local decision only when ``authorization.ext_authz`` is configured (otherwise the gate has no external
authorizer and pays nothing). Two modes:

- ``require`` (the default): local and external must both allow. A local refusal is final without a call.
- ``decide``: the external decision is final once the local ``deny`` and ``require`` rules passed
  (``Decision.final``): an external allow grants without a local role, an external deny refuses a local allow.

Answers are cached by a digest of the whole question (principal, action, project, resource attributes,
context) for ``cache_ttl``, bounded; a timeout, a transport error or a malformed answer denies (fails closed),
with ``deciding`` naming the external authorizer and the failure, and is never cached. The gate audits the
combined decision like any other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import structlog

from evalsi.authz.decision import AccessRequest, Decision
from evalsi.authz.external_answer import DecisionPoint, ExternalAnswer
from evalsi.authz.external_cache import DecisionCache
from evalsi.authz.external_config import AuthzenEndpoint, ExternalAuthzConfig
from evalsi.authz.external_metrics import ExternalAuthzMetrics
from evalsi.authz.external_query import cache_key, external_query

log = structlog.get_logger("evalsi.authz")


class ExternalAuthorizer:
    """The mode, the cache and one transport (``point``); built once per process, shared by every call."""

    def __init__(self, config: ExternalAuthzConfig, point: DecisionPoint, *,
                 cache: DecisionCache[ExternalAnswer] | None = None,
                 metrics: ExternalAuthzMetrics | None = None) -> None:
        self.config = config
        self.point = point
        self.cache = cache if cache is not None else DecisionCache(config.cache_ttl_s, config.max_cache_entries)
        self.metrics = metrics

    @classmethod
    def from_config(cls, config: ExternalAuthzConfig, *,
                    metrics: ExternalAuthzMetrics | None = None) -> ExternalAuthorizer:
        if isinstance(config.endpoint, AuthzenEndpoint):
            from evalsi.authz.external_authzen import AuthzenDecisionPoint

            return cls(config, AuthzenDecisionPoint(config.endpoint), metrics=metrics)
        from evalsi.authz.external_envoy import EnvoyDecisionPoint

        return cls(config, EnvoyDecisionPoint(config.endpoint), metrics=metrics)

    def consulted(self, local: Decision) -> bool:
        """Whether ``local`` still needs the external authorizer (False: it is the answer)."""
        return local.allowed if self.config.mode == "require" else not local.final

    async def check(self, access: AccessRequest, local: Decision) -> Decision:
        """The combined decision for ``access`` given the local one."""
        if not self.consulted(local):
            return local
        name = self.point.describe()
        query = external_query(access)
        try:
            answer, cached = await self.cache.answer(cache_key(query), lambda: self._ask(query))
        except Exception as exc:  # fail closed: the call is refused, and nothing is cached
            why = _failure(exc, self.config.timeout_s)
            if self.metrics is not None:
                self.metrics.decided(name, "error", cached=False)
            log.warning("external authorizer failed; denied", authorizer=name, action=access.action,
                        project=access.project, error=why)
            line = f"{name} failed ({why}): denied (fail closed)"
            return Decision(False, line, (*local.trace, line))
        if self.metrics is not None:
            self.metrics.decided(name, "allowed" if answer.allowed else "denied", cached=cached)
        said = f"{name} {'allowed' if answer.allowed else 'denied'}" + (f": {answer.reason}" if answer.reason else "")
        line = said + (" (cached)" if cached else "")
        trace = (*local.trace, line)
        if self.config.mode == "decide":
            return Decision(answer.allowed, f"{said} (ext_authz mode decide)", trace)
        if answer.allowed:
            return Decision(True, f"{local.deciding}; {said}", trace)
        return Decision(False, f"{said} (ext_authz mode require)", trace)

    async def _ask(self, query: Mapping[str, Any]) -> ExternalAnswer:
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.config.timeout_s):
                return await self.point.evaluate(query, self.config.timeout_s)
        finally:
            if self.metrics is not None:
                self.metrics.asked(self.point.describe(), time.monotonic() - started)

    async def aclose(self) -> None:
        await self.point.aclose()


def _failure(error: Exception, timeout_s: float) -> str:
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout_s * 1000:g}ms"
    text = " ".join(str(error).split())[:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
