"""The api's side of the gate (``evalsi.gate``): a call's context admitted, or refused before its handler runs.

Both transports call :func:`admit_call` once the request is decoded (streams: before the first message, with
the header's project). The admitted context carries the principal and pins the project the gate allowed, so
the handler cannot act in another one (a stream's first message naming a different project is refused as a
mismatch with it). Handlers that read a stored resource (GetRun, CancelRun: the run's ``created_by`` and
labels) decide again through ``ctx.check_access``; lists keep the items ``ctx.may_see`` allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from evalsi.api.context import CallContext
from evalsi.auth.principal import Credentials, Principal
from evalsi.authz.decision import AccessRequest
from evalsi.gate.access import Gate, visible_headers


class CallAccess:
    """The second decision of one call, on a stored resource, under the same principal, action and project."""

    __slots__ = ("_credentials", "_gate", "_resource")

    def __init__(self, gate: Gate, credentials: Credentials, resource: Mapping[str, Any]) -> None:
        self._gate = gate
        self._credentials = credentials
        self._resource = resource

    async def check(self, ctx: CallContext, resource: Mapping[str, Any], *, project: str | None = None) -> None:
        if not ctx.action:
            return
        where = ctx.project if project is None else project
        await self._gate.decide(ctx.principal, ctx.action, where, {**self._resource, **resource}, self._credentials,
                                ctx.method, ctx.request_id, audit_allowed=self._gate.endpoint(ctx.method).mutating)

    async def allows(self, ctx: CallContext, resource: Mapping[str, Any]) -> bool:
        """Whether a list may show one item: this call's decision on the item's attributes, neither raising nor
        audited (a list leaves out what the caller may not read; the call itself was decided and audited)."""
        if not ctx.action:
            return True
        gate = self._gate
        # The item's own project (a list across projects decides each run where it is), else the call's.
        project = str(resource.get("project") or ctx.project)
        access = AccessRequest(principal=ctx.principal, action=ctx.action, project=project,
                               resource={**self._resource, **resource, "project": project}, method=ctx.method,
                               protocol=self._credentials.transport,
                               headers=visible_headers(self._credentials.headers), source=self._credentials.peer)
        decision = gate.authorizer.decide(access)
        if gate.external is not None:  # ext_authz in mode decide is asked about each item, as about the call
            decision = await gate.external.check(access, decision)
        return decision.allowed


def requested_project(ctx: CallContext, request: Any) -> str:
    """The project the call itself names: the header, else the request's ``project`` field ('' for neither)."""
    if ctx.header_project:
        return ctx.header_project
    project = getattr(request, "project", None) if request is not None else None
    return project if isinstance(project, str) else ""


async def admit_call(
    gate: Gate, ctx: CallContext, credentials: Credentials, request: Any, principal: Principal | None = None
) -> CallContext:
    """The context of a call the gate let through; raises Unauthenticated or PermissionDenied."""
    admission = await gate.admit(ctx.method, credentials, request, project=requested_project(ctx, request),
                                 request_id=ctx.request_id, principal=principal)
    return replace(
        ctx,
        principal=admission.principal,
        project=admission.project,
        header_project=admission.project,
        action=admission.action or "",
        deciding=admission.deciding,
        source=credentials.peer,
        access=CallAccess(gate, credentials, admission.resource),
    )
