"""What a handler knows about its call besides the request: project, request id, deadline, method."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from google.protobuf.message import Message

from evalsi.auth.principal import ANONYMOUS, Principal
from evalsi.errors import BadInputError
from evalsi.projects import DEFAULT_PROJECT, PROJECT_HEADER, check_project

if TYPE_CHECKING:
    from evalsi.api.access import CallAccess

REQUEST_ID_HEADER = "x-request-id"
TIMEOUT_HEADER = "x-evalsi-timeout"

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")


def new_request_id() -> str:
    return uuid.uuid4().hex


def request_id_from(value: str | None) -> str:
    """The caller's request id when it is sane, else a fresh one (ids end up in logs and headers)."""
    if value and _REQUEST_ID.fullmatch(value):
        return value
    return new_request_id()


@dataclass(frozen=True)
class CallContext:
    """Per-call facts shared by both transports.

    ``project`` is the header's project, else the request's ``project`` field, else ``default``;
    ``header_project`` keeps the header alone so handlers with more places to look (CreateRun reads
    the run document's metadata too) can resolve it themselves with :meth:`resolve_project`.
    ``deadline`` is a ``time.monotonic()`` instant, or None when the caller set none.

    With authentication on, the gate (``api/access.py``) fills ``principal``, the ``action`` it allowed and what
    decided, and pins ``project`` (and ``header_project``) to the project it allowed the call in, so a handler
    resolves no other; ``access`` decides again on a stored resource (:meth:`check_access`). Without it the
    principal is ``ANONYMOUS`` and every call passes, as on a loopback server without an ``auth`` section.
    """

    method: str
    request_id: str
    project: str = DEFAULT_PROJECT
    header_project: str = ""
    deadline: float | None = None
    transport: str = ""
    principal: Principal = ANONYMOUS
    action: str = ""
    deciding: str = ""
    # The caller's address as the gate saw it (audit entries record it); empty without a gate.
    source: str = ""
    access: CallAccess | None = field(default=None, repr=False, compare=False)

    async def check_access(self, resource: Mapping[str, Any], *, project: str | None = None) -> None:
        """Decide this call's action again with a stored resource's attributes (a run's ``created_by`` and
        ``labels``), or in another ``project`` (``*``: every project, for a list across them), raising
        PermissionDenied; nothing to do when authentication is off."""
        if self.access is not None:
            await self.access.check(self, resource, project=project)

    async def may_see(self, resource: Mapping[str, Any]) -> bool:
        """Whether a list may show an item with these attributes (a run's ``created_by`` and ``labels``, a
        policy's or trace's ``labels``): this call's action decided on it, without raising or auditing; always
        true when authentication is off."""
        return True if self.access is None else await self.access.allows(self, resource)

    def time_remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def resolve_project(self, request_project: str = "", *fallbacks: str) -> str:
        """Header, else ``request_project``, else the first non-empty fallback, else ``default``.

        A request field naming another project than the header is refused rather than silently
        ignored: the header is the boundary, and a mismatch is almost always a mistake.
        """
        if request_project:
            check_project(request_project, "project")
        if self.header_project:
            if request_project and request_project != self.header_project:
                raise BadInputError(
                    f"project: {request_project!r} differs from the {PROJECT_HEADER} header "
                    f"{self.header_project!r}; give one of them, or the same in both"
                )
            return self.header_project
        if request_project:
            return request_project
        for candidate in fallbacks:
            if candidate:
                return check_project(candidate, "run.metadata.project")
        return DEFAULT_PROJECT


def build_context(
    method: str,
    headers: Mapping[str, str],
    request: Message | None,
    *,
    transport: str,
    deadline: float | None = None,
    request_id: str | None = None,
) -> CallContext:
    """A context from transport headers (lower-case keys) and, for unary calls, the request."""
    header_project = (headers.get(PROJECT_HEADER) or "").strip()
    if header_project:
        check_project(header_project, f"{PROJECT_HEADER} header")
    ctx = CallContext(
        method=method,
        request_id=request_id or request_id_from(headers.get(REQUEST_ID_HEADER)),
        header_project=header_project,
        project=header_project or DEFAULT_PROJECT,
        deadline=deadline,
        transport=transport,
    )
    project = getattr(request, "project", None) if request is not None else None
    # An empty field, or the project the context already has, resolves to what it has: no second context to build.
    if isinstance(project, str) and project and project != ctx.project:
        ctx = replace(ctx, project=ctx.resolve_project(project))
    return ctx
