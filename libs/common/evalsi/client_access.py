"""``Client.auth``: AuthService from Python (who am I, projects, permissions, roles, bindings, API keys, audit)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from evalsi.v1alpha1 import auth_service_pb2 as pb

if TYPE_CHECKING:
    from evalsi.client_transports import Transport

SERVICE = "AuthService"


class Access:
    """The calls of AuthService; ``project`` empty means the client's project (else ``default``)."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    def whoami(self) -> pb.WhoAmIResponse:
        """The calling principal, its roles per project and the projects it can read."""
        return self._t.unary(SERVICE, "WhoAmI", pb.WhoAmIRequest(), pb.WhoAmIResponse)

    def projects(self) -> list[pb.Project]:
        return list(self._t.unary(SERVICE, "ListProjects", pb.ListProjectsRequest(), pb.ListProjectsResponse).projects)

    def create_project(self, name: str, *, description: str = "", labels: Mapping[str, str] | None = None,
                       ) -> pb.Project:
        request = pb.CreateProjectRequest(name=name, description=description, labels=dict(labels or {}))
        return self._t.unary(SERVICE, "CreateProject", request, pb.Project)

    def permissions(self) -> list[pb.Permission]:
        answer = self._t.unary(SERVICE, "ListPermissions", pb.ListPermissionsRequest(), pb.ListPermissionsResponse)
        return list(answer.permissions)

    def roles(self, *, project: str = "") -> list[pb.Role]:
        request = pb.ListRolesRequest(project=project)
        return list(self._t.unary(SERVICE, "ListRoles", request, pb.ListRolesResponse).roles)

    def create_role(self, role: pb.Role, *, project: str = "", install_wide: bool = False) -> pb.Role:
        request = pb.CreateRoleRequest(role=role, project=project, install_wide=install_wide)
        return self._t.unary(SERVICE, "CreateRole", request, pb.Role)

    def update_role(self, role: pb.Role, *, project: str = "", install_wide: bool = False) -> pb.Role:
        request = pb.UpdateRoleRequest(role=role, project=project, install_wide=install_wide)
        return self._t.unary(SERVICE, "UpdateRole", request, pb.Role)

    def delete_role(self, name: str, *, project: str = "", install_wide: bool = False) -> pb.Role:
        request = pb.DeleteRoleRequest(name=name, project=project, install_wide=install_wide)
        return self._t.unary(SERVICE, "DeleteRole", request, pb.Role)

    def bindings(self, *, project: str = "", role: str = "") -> list[pb.Binding]:
        request = pb.ListBindingsRequest(project=project, role=role)
        return list(self._t.unary(SERVICE, "ListBindings", request, pb.ListBindingsResponse).bindings)

    def create_binding(self, role: str, subject: str, *, project: str = "") -> pb.Binding:
        """Grant ``role`` to ``subject`` (``user:``, ``email:``, ``group:``, ``key:`` or ``cel:``) in the project
        (``*``: every project, owner only)."""
        binding = pb.Binding(role=role, subject=subject, project=project)
        return self._t.unary(SERVICE, "CreateBinding", pb.CreateBindingRequest(binding=binding, project=project),
                             pb.Binding)

    def delete_binding(self, binding_id: str, *, project: str = "") -> pb.Binding:
        return self._t.unary(SERVICE, "DeleteBinding", pb.DeleteBindingRequest(id=binding_id, project=project),
                             pb.Binding)

    def create_key(
        self, name: str, *, roles: Sequence[str] = (), labels: Mapping[str, str] | None = None,
        expires: datetime | None = None, project: str = "",
    ) -> pb.CreateApiKeyResponse:
        """A new API key; the answer's ``secret`` is the plaintext ``evk_`` key, shown this once."""
        request = pb.CreateApiKeyRequest(name=name, project=project, roles=list(roles), labels=dict(labels or {}))
        if expires is not None:
            request.expire_time.FromDatetime(expires)
        return self._t.unary(SERVICE, "CreateApiKey", request, pb.CreateApiKeyResponse)

    def keys(self, *, project: str = "", include_revoked: bool = False) -> list[pb.ApiKey]:
        request = pb.ListApiKeysRequest(project=project, include_revoked=include_revoked)
        return list(self._t.unary(SERVICE, "ListApiKeys", request, pb.ListApiKeysResponse).keys)

    def revoke_key(self, name: str, *, project: str = "") -> pb.ApiKey:
        return self._t.unary(SERVICE, "RevokeApiKey", pb.RevokeApiKeyRequest(name=name, project=project), pb.ApiKey)

    def audit(
        self, *, project: str = "", principal: str = "", action: str = "", decision: str = "",
        since: datetime | None = None, until: datetime | None = None, page_size: int = 100,
    ) -> Iterator[pb.AuditEvent]:
        """Audit events, newest first, page after page (stop iterating to stop reading)."""
        token = ""
        while True:
            request = pb.ListAuditEventsRequest(project=project, principal=principal, action=action,
                                                decision=decision, page_size=page_size, page_token=token)
            if since is not None:
                request.start_time.FromDatetime(since)
            if until is not None:
                request.end_time.FromDatetime(until)
            page = self._t.unary(SERVICE, "ListAuditEvents", request, pb.ListAuditEventsResponse)
            yield from page.events
            token = page.next_page_token
            if not token:
                return
