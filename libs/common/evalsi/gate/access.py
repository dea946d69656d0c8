"""The one enforcement point: a credential becomes a principal, a call becomes an action on a project, and the
authorizer's decision lets it through or refuses it, the same way on every surface (the api's gRPC and
HTTP/JSON ports, reflection, ``/metrics`` and both OTLP receivers).

The transports only gather :class:`~evalsi.auth.principal.Credentials` and the request; what a call means
(its action and resource attributes) comes from the action table (``evalsi.authz.actions``), who may do it
from the authorizer (and, when ``authorization.ext_authz`` is configured, from an external authorizer asked after
it: ``evalsi.authz.external``). A refusal names the action and the project, never the rule behind it (the audit
log has that). No gate at all (``None`` where a transport takes one) is the unauthenticated server: every call
passes, as before issue 13.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from evalsi.auth.principal import (
    ANY_PROJECT,
    Credentials,
    PermissionDenied,
    Principal,
    Unauthenticated,
    visible_headers,
)
from evalsi.authz.actions import ACTION_TABLE, Endpoint
from evalsi.authz.attributes import DEFAULT_SOURCES, AttributeSources
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.projects import DEFAULT_PROJECT


class Authenticating(Protocol):
    async def authenticate(self, credentials: Credentials) -> Principal: ...

    def www_authenticate(self, error: Unauthenticated | None = None) -> str: ...


class Authorizing(Protocol):
    def decide(self, request: AccessRequest) -> Decision: ...


class ExternalAuthorizing(Protocol):
    """``evalsi.authz.external.ExternalAuthorizer``: asked after the local decision (authorization.ext_authz)."""

    async def check(self, access: AccessRequest, local: Decision) -> Decision: ...

    async def aclose(self) -> None: ...


# Told of every refused call and every allowed mutating one (the audit log): the request, the decision, the
# call's request id. Called inline, so it must not block (``AuditLog.record`` buffers).
DecisionHook = Callable[[AccessRequest, Decision, str], None]


@dataclass(frozen=True)
class Admission:
    """A call let through: who made it, the action and project it was allowed, what decided, and the resource
    attributes it was decided on (a second decision on a stored resource starts from them)."""

    principal: Principal
    action: str | None
    project: str
    deciding: str
    resource: Mapping[str, Any]


def credential_project(principal: Principal) -> str:
    """The one project a credential is bound to (an ingest key's ``roles: {support: [ingest]}``), else ''."""
    if ANY_PROJECT in principal.roles or len(principal.roles) != 1:
        return ""
    return next(iter(principal.roles))



class Gate:
    """Authenticate, look the call up in the action table, decide. Built once per process; holds nothing per call.

    A method the table lacks is refused (deny by default), never let through. ``sources`` tell the attribute
    extractors what the request alone cannot (whether an evaluator runs code, what a named connection is).
    """

    def __init__(
        self,
        authenticator: Authenticating,
        authorizer: Authorizing,
        *,
        table: Mapping[str, Endpoint] = ACTION_TABLE,
        sources: AttributeSources = DEFAULT_SOURCES,
        on_decision: DecisionHook | None = None,
        external: ExternalAuthorizing | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.external = external
        self.table = table
        self.sources = sources
        self._on_decision = on_decision

    def challenge(self, error: BaseException | None = None) -> str:
        """The ``WWW-Authenticate`` value of an HTTP 401."""
        return self.authenticator.www_authenticate(error if isinstance(error, Unauthenticated) else None)

    async def authenticate(self, credentials: Credentials, method: str = "") -> Principal:
        """The caller's principal; raises ``Unauthenticated`` (401 / UNAUTHENTICATED), audited as a refusal."""
        try:
            return await self.authenticator.authenticate(credentials)
        except Unauthenticated as exc:
            if self._on_decision is not None:
                endpoint = self.table.get(method.lstrip("/"))
                refused = AccessRequest(principal=Principal(kind="anonymous", subject="anonymous"),
                                        action=(endpoint.permission if endpoint else None) or "",
                                        project="", method=method, protocol=credentials.transport,
                                        source=credentials.peer)
                self._on_decision(refused, Decision(False, f"unauthenticated: {exc}"), "")
            raise

    def endpoint(self, method: str) -> Endpoint:
        endpoint = self.table.get(method.lstrip("/"))
        if endpoint is None:
            # A surface the action table does not know is a bug of ours; refusing it keeps the default deny.
            raise PermissionDenied(f"{method} has no entry in the action table; refused")
        return endpoint

    async def admit(
        self,
        method: str,
        credentials: Credentials,
        request: Any = None,
        *,
        project: str = "",
        request_id: str = "",
        principal: Principal | None = None,
    ) -> Admission:
        """Authenticate (unless ``principal`` was already) and authorize one call. ``project`` is what the call
        names (its header or field); without one, the request's resource attributes name it (a run document's
        ``metadata.project``), else the project the credential is bound to, else ``default``."""
        if principal is None:
            principal = await self.authenticate(credentials, method)
        endpoint = self.endpoint(method)
        if endpoint.permission is None:
            return Admission(principal, None, project or DEFAULT_PROJECT, "open endpoint", {})
        resource = endpoint.attributes(request, self.sources)
        chosen = project or str(resource.get("project") or "") or credential_project(principal) or DEFAULT_PROJECT
        # A call the handler decides again on the stored resource is decided partially here (authz partial).
        return await self.decide(principal, endpoint.permission, chosen, resource, credentials, method, request_id,
                                 audit_allowed=endpoint.mutating, partial=endpoint.needs_stored_resource)

    async def decide(
        self,
        principal: Principal,
        action: str,
        project: str,
        resource: Mapping[str, Any],
        credentials: Credentials,
        method: str,
        request_id: str = "",
        *,
        audit_allowed: bool = False,
        partial: bool = False,
    ) -> Admission:
        """One decision; raises ``PermissionDenied`` naming the action and the project when it is a refusal."""
        access = AccessRequest(
            principal=principal,
            action=action,
            project=project,
            resource={**resource, "project": project},
            method=method,
            protocol=credentials.transport,
            headers=visible_headers(credentials.headers),
            source=credentials.peer,
            partial=partial,
        )
        decision = self.authorizer.decide(access)
        if self.external is not None:  # a network call, only when authorization.ext_authz is configured
            decision = await self.external.check(access, decision)
        # An allowed partial decision is not the final one: the handler's decision on the stored resource is audited.
        if self._on_decision is not None and ((audit_allowed and not partial) or not decision.allowed):
            self._on_decision(access, decision, request_id)
        if not decision.allowed:
            raise PermissionDenied(f"{principal.id or principal.kind} may not {action} in project {project!r}")
        return Admission(principal, action, project, decision.deciding, access.resource)
