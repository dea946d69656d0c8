"""The one enforcement point: a credential becomes a principal, a call becomes an action on a project, and the
authorizer's decision lets it through or refuses it, the same way on every surface (the api's gRPC and
HTTP/JSON ports, reflection, ``/metrics`` and both OTLP receivers).

The transports only gather :class:`~evalsi.auth.principal.Credentials` and the request; what a call means
(its action and resource attributes) comes from the action table, who may do it from the authorizer. A
refusal names the action and the project, never the rule behind it (the audit log has that). No gate at all
(``None`` where a transport takes one) is the unauthenticated server: every call passes, as before issue 13.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from evalsi.auth.principal import ANY_PROJECT, Credentials, PermissionDenied, Principal
from evalsi.authz.decision import AccessRequest, Decision
from evalsi.projects import DEFAULT_PROJECT

# Request headers never shown to CEL rules (``request.headers``) nor written anywhere: they carry credentials.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "x-evalsi-api-key"})


class Authenticating(Protocol):
    async def authenticate(self, credentials: Credentials) -> Principal: ...


class Authorizing(Protocol):
    def decide(self, request: AccessRequest) -> Decision: ...


@dataclass(frozen=True)
class Route:
    """What a call is, from the action table: its action (None: open to anyone, as health checks are) and the
    resource attributes its request gives CEL (``project`` among them when the request names one)."""

    action: str | None
    resource: Callable[[Any], Mapping[str, Any]] = lambda request: {}


# Told of every decision (the audit log): the request, the decision and the call's request id.
DecisionHook = Callable[[AccessRequest, Decision, str], Awaitable[None] | None]


@dataclass(frozen=True)
class Admission:
    """A call let through: who made it, the project it acts in and what decided."""

    principal: Principal
    action: str | None
    project: str
    deciding: str
    resource: Mapping[str, Any]


def credential_project(principal: Principal) -> str:
    """The one project a credential is bound to (an ingest key's ``roles: {support: [ingest]}``), else ''."""
    projects = [project for project in principal.roles if project != ANY_PROJECT]
    if len(projects) == 1 and ANY_PROJECT not in principal.roles:
        return projects[0]
    return ""


def visible_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name not in CREDENTIAL_HEADERS}


class Gate:
    """Authenticate, route, decide. Built once per process; holds nothing per call.

    ``routes`` maps a method (``evalsi.v1alpha1.RunService/CreateRun``, ``/metrics``, an OTLP export's
    ``opentelemetry.proto.collector.trace.v1.TraceService/Export``) to its :class:`Route`; a method the table
    lacks is refused (deny by default), never let through. ``challenge`` is the ``WWW-Authenticate`` value of
    an HTTP 401.
    """

    def __init__(
        self,
        authenticator: Authenticating,
        authorizer: Authorizing,
        routes: Mapping[str, Route],
        *,
        challenge: str = 'Bearer realm="evalsi"',
        on_decision: DecisionHook | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.routes = dict(routes)
        self.challenge = challenge
        self._on_decision = on_decision

    async def authenticate(self, credentials: Credentials) -> Principal:
        """The caller's principal; raises ``Unauthenticated`` (401 / UNAUTHENTICATED)."""
        return await self.authenticator.authenticate(credentials)

    def route(self, method: str) -> Route:
        route = self.routes.get(method)
        if route is None:
            # A surface the action table does not know is a bug of ours; refusing it keeps the default deny.
            raise PermissionDenied(f"{method} has no entry in the action table; refused")
        return route

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
            principal = await self.authenticate(credentials)
        route = self.route(method)
        if route.action is None:
            return Admission(principal, None, project or DEFAULT_PROJECT, "open", {})
        resource = route.resource(request) if request is not None else {}
        chosen = project or str(resource.get("project") or "") or credential_project(principal) or DEFAULT_PROJECT
        return await self.decide(principal, route.action, chosen, resource, credentials, method, request_id)

    async def decide(
        self,
        principal: Principal,
        action: str,
        project: str,
        resource: Mapping[str, Any],
        credentials: Credentials,
        method: str,
        request_id: str = "",
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
        )
        decision = self.authorizer.decide(access)
        if self._on_decision is not None:
            pending = self._on_decision(access, decision, request_id)
            if pending is not None:
                await pending
        if not decision.allowed:
            raise PermissionDenied(
                f"{principal.id or principal.kind} may not {action} in project {project!r}"
            )
        return Admission(principal, action, project, decision.deciding, access.resource)
