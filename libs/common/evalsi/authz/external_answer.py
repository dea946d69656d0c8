"""What a transport to an external authorizer answers, and how it fails (``external_authzen``, ``external_envoy``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ExternalAnswer:
    """The external authorizer's verdict and its reason, when it gave one (AuthZEN ``context.reason``, the
    ext_authz status message or denied body)."""

    allowed: bool
    reason: str = ""


class ExternalAuthorizerError(Exception):
    """The external authorizer could not be asked or answered something that is not a decision."""


class DecisionPoint(Protocol):
    """One transport to an external authorizer; ``query`` is ``evalsi.authz.external_query``'s."""

    def describe(self) -> str: ...

    async def evaluate(self, query: Mapping[str, Any], timeout_s: float) -> ExternalAnswer: ...

    async def aclose(self) -> None: ...
