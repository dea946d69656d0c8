"""AuthService: who-am-i, projects, permissions, custom roles, bindings, API keys and the audit log.

The gate has already decided the call's action (``self.read``, ``access.manage``, ``audit.read``,
``projects.manage``) in ``ctx.project`` when a handler runs. What is left here: the privilege-escalation check
on what a role, binding or key would grant (``evalsi.authz.escalation``), the guardrails on the definitions,
and one audit entry per change with the old and new definitions. Without authentication (no authorizer) the
caller is the anonymous owner of a loopback server: everything is allowed and nothing is escalation-checked.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Protocol

import grpc

from evalsi.api.auth_messages import (
    DEFAULT_AUDIT_PAGE,
    KEY_PREFIX_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_SUBJECT_CHARS,
    audit_message,
    binding_message,
    check_items,
    check_key_name,
    check_labels,
    key_definition,
    key_message,
    project_message,
    role_message,
    seconds_of,
)
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.audit.entry import AuditEntry
from evalsi.audit.log import AuditLog
from evalsi.auth.api_keys import ApiKey, hash_api_key, new_api_key
from evalsi.auth.principal import ANY_PROJECT, PermissionDenied, Principal
from evalsi.authz.authorizer import ALL
from evalsi.authz.config import RbacConfig
from evalsi.authz.escalation import binding_grant, check_grant, role_grant
from evalsi.authz.permissions import PERMISSIONS
from evalsi.authz.roles import BUILTIN_ROLES, INSTALL, OWNER, RoleDefinition
from evalsi.errors import BadInputError
from evalsi.gate.stored_access import LiveAuthorizer, binding_definition, role_definition
from evalsi.limits import MAX_EXPRESSION_CHARS, check_length
from evalsi.projects import DEFAULT_PROJECT, check_project
from evalsi.stores.audit import MAX_AUDIT_PAGE, AuditQuery, AuditStore
from evalsi.stores.identity import (
    AlreadyExistsError,
    IdentityStore,
    StoredApiKey,
    StoredBinding,
    StoredProject,
    StoredRole,
    new_binding_id,
)
from evalsi.stores.identity_keys import database_key_name
from evalsi.v1alpha1 import auth_service_pb2 as pb


class AccessStore(IdentityStore, AuditStore, Protocol):
    """The metadata store in both roles AuthService uses."""


def _exists(exc: AlreadyExistsError) -> ApiError:
    return ApiError(grpc.StatusCode.ALREADY_EXISTS, str(exc))


def _configured(what: str) -> ApiError:
    return ApiError(grpc.StatusCode.FAILED_PRECONDITION,
                    f"{what} is defined in evalsi.yaml (or built in); change it there, not through AuthService")


class AuthHandlers:
    def __init__(
        self,
        store: AccessStore | None,
        *,
        rbac: RbacConfig | None = None,
        authorizer: LiveAuthorizer | None = None,
        audit: AuditLog | None = None,
        config_keys: Iterable[ApiKey] = (),
        clock: Any = time.time,
    ) -> None:
        self._stored = store
        self._rbac = authorizer.base.rbac if authorizer is not None else (rbac or RbacConfig())
        self._authorizer = authorizer
        self._audit = audit
        self._config_keys = tuple(config_keys)
        self._clock = clock

    @property
    def _store(self) -> AccessStore:
        if self._stored is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION,
                           "AuthService needs the metadata store; this server was assembled without one")
        return self._stored

    # --- who, where ------------------------------------------------------------------------------------------

    async def who_am_i(self, request: pb.WhoAmIRequest, ctx: CallContext) -> pb.WhoAmIResponse:
        principal = ctx.principal
        answer = pb.WhoAmIResponse(
            id=principal.id, kind=principal.kind, provider=principal.provider, subject=principal.subject,
            name=principal.name, email=principal.email, groups=list(principal.groups), key_name=principal.key_name,
            labels=dict(principal.labels), auth_enabled=self._authorizer is not None,
        )
        projects = await self._known_projects()
        if self._authorizer is None:
            answer.roles[ANY_PROJECT].roles.append(OWNER)
            answer.projects.extend(sorted(projects))
            return answer
        current = self._authorizer.current
        for project in sorted({ANY_PROJECT, *projects}):
            scope = INSTALL if project == ANY_PROJECT else project
            held = current.bound_roles(principal, scope)
            names = sorted({b.role for b in held if b.project == project})
            if names:
                answer.roles[project].roles.extend(names)
        answer.projects.extend(sorted(self._readable(principal, projects)))
        return answer

    async def list_projects(self, request: pb.ListProjectsRequest, ctx: CallContext) -> pb.ListProjectsResponse:
        stored = {p.name: p for p in await self._store.list_projects()}
        projects = await self._known_projects(stored)
        visible = self._readable(ctx.principal, projects) if self._authorizer is not None else set(projects)
        answer = pb.ListProjectsResponse()
        for name in sorted(visible):
            if name in stored:
                answer.projects.append(project_message(stored[name], "api"))
            else:
                source = "builtin" if name == DEFAULT_PROJECT else "config"
                answer.projects.append(pb.Project(name=name, source=source))
        return answer

    async def create_project(self, request: pb.CreateProjectRequest, ctx: CallContext) -> pb.Project:
        name = check_project(request.name, "name")
        if name in await self._known_projects():
            raise ApiError(grpc.StatusCode.ALREADY_EXISTS, f"project {name!r} already exists")
        project = StoredProject(name, check_length(request.description, "description", MAX_DESCRIPTION_CHARS),
                                check_labels(request.labels, "labels"), self._clock(), _creator(ctx))
        try:
            await self._store.create_project(project)
        except AlreadyExistsError as exc:
            raise _exists(exc) from None
        self._record(ctx, name, f"project {name}", None, {"name": name, "labels": dict(project.labels)})
        return project_message(project, "api")

    async def list_permissions(
        self, request: pb.ListPermissionsRequest, ctx: CallContext
    ) -> pb.ListPermissionsResponse:
        return pb.ListPermissionsResponse(permissions=[
            pb.Permission(name=p.name, description=p.description, install_wide=p.install_wide,
                          lowest_role=p.lowest_role) for p in PERMISSIONS.values()
        ])

    # --- roles -----------------------------------------------------------------------------------------------

    async def list_roles(self, request: pb.ListRolesRequest, ctx: CallContext) -> pb.ListRolesResponse:
        project = ctx.resolve_project(request.project)
        answer = pb.ListRolesResponse()
        for builtin in BUILTIN_ROLES:
            answer.roles.append(_definition_message(builtin, "builtin"))
        for definition in self._rbac.role_definitions:
            if definition.project in (INSTALL, project):
                answer.roles.append(_definition_message(definition, "config"))
        for role in await self._store.list_roles(project):
            answer.roles.append(role_message(role, "api"))
        return answer

    async def create_role(self, request: pb.CreateRoleRequest, ctx: CallContext) -> pb.Role:
        role = self._role_from(request.role, request.project, request.install_wide, ctx)
        if self._configured_role(role.name, role.project) is not None:
            raise ApiError(grpc.StatusCode.ALREADY_EXISTS,
                           f"role {role.name!r} is already defined in evalsi.yaml or built in")
        self._check_role(ctx, role)
        try:
            await self._store.create_role(role)
        except AlreadyExistsError as exc:
            raise _exists(exc) from None
        await self._changed(ctx, role.project, f"role {role.name}", None, role.definition())
        return role_message(role, "api")

    async def update_role(self, request: pb.UpdateRoleRequest, ctx: CallContext) -> pb.Role:
        role = self._role_from(request.role, request.project, request.install_wide, ctx)
        if await self._store.get_role(role.project, role.name) is None:
            if self._configured_role(role.name, role.project) is not None:
                raise _configured(f"role {role.name!r}")
            raise NotFoundError(f"role {role.name!r} not found in {_where(role.project)}")
        self._check_role(ctx, role)
        changed = await self._store.update_role(role)
        if changed is None:  # deleted meanwhile
            raise NotFoundError(f"role {role.name!r} not found in {_where(role.project)}")
        old, new = changed
        await self._changed(ctx, role.project, f"role {role.name}", old.definition(), new.definition())
        return role_message(new, "api")

    async def delete_role(self, request: pb.DeleteRoleRequest, ctx: CallContext) -> pb.Role:
        project = INSTALL if request.install_wide else ctx.resolve_project(request.project)
        name = check_length(request.name, "name", 64)
        existing = await self._store.get_role(project, name)
        if existing is None:
            if self._configured_role(name, project) is not None:
                raise _configured(f"role {name!r}")
            raise NotFoundError(f"role {name!r} not found in {_where(project)}")
        if project == INSTALL:
            self._require_owner(ctx, f"delete the install-wide role {name!r}")
        holders = [b for b in await self._store.list_bindings(None, role=name)
                   if project == INSTALL or b.project in (project, ANY_PROJECT)]
        if holders:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION,
                           f"role {name!r} is still bound ({', '.join(b.id for b in holders[:5])}); delete those "
                           f"bindings first")
        deleted = await self._store.delete_role(project, name)
        if deleted is None:
            raise NotFoundError(f"role {name!r} not found in {_where(project)}")
        await self._changed(ctx, project, f"role {name}", deleted.definition(), None)
        return role_message(deleted, "api")

    # --- bindings --------------------------------------------------------------------------------------------

    async def list_bindings(self, request: pb.ListBindingsRequest, ctx: CallContext) -> pb.ListBindingsResponse:
        project = ctx.project
        answer = pb.ListBindingsResponse()
        for definition in self._rbac.binding_definitions:
            if definition.project in (project, ANY_PROJECT) and (not request.role or definition.role == request.role):
                answer.bindings.append(pb.Binding(id=definition.origin, project=definition.project,
                                                  role=definition.role, subject=definition.subject, source="config"))
        for binding in await self._store.list_bindings(project, role=request.role):
            answer.bindings.append(binding_message(binding, "api"))
        return answer

    async def create_binding(self, request: pb.CreateBindingRequest, ctx: CallContext) -> pb.Binding:
        given = request.binding
        project = given.project if given.project == ANY_PROJECT else _project_of(ctx, request.project,
                                                                                   given.project, "binding")
        binding = StoredBinding(new_binding_id(), project, check_length(given.role, "binding.role", 64),
                                check_length(given.subject, "binding.subject", MAX_SUBJECT_CHARS),
                                self._clock(), _creator(ctx))
        if self._authorizer is not None:
            grant = binding_grant(self._authorizer.current, binding_definition(binding))
            self._check_grant(ctx, project, grant)
        else:
            self._rbac_check_binding(binding)
        try:
            await self._store.create_binding(binding)
        except AlreadyExistsError as exc:
            raise _exists(exc) from None
        await self._changed(ctx, project, f"binding {binding.id}", None, binding.definition())
        return binding_message(binding, "api")

    async def delete_binding(self, request: pb.DeleteBindingRequest, ctx: CallContext) -> pb.Binding:
        binding_id = check_length(request.id, "id", 64)
        project = ctx.resolve_project(request.project)
        deleted = await self._store.delete_binding(project, binding_id)
        if deleted is None and any(b.id == binding_id for b in await self._store.list_bindings(ANY_PROJECT)):
            # Not the project's: a binding in every project, which only an owner may remove.
            self._require_owner(ctx, "delete a binding in every project (*)")
            deleted = await self._store.delete_binding(ANY_PROJECT, binding_id)
        if deleted is None:
            raise NotFoundError(f"binding {binding_id!r} not found in project {project!r}")
        await self._changed(ctx, deleted.project, f"binding {binding_id}", deleted.definition(), None)
        return binding_message(deleted, "api")

    # --- API keys --------------------------------------------------------------------------------------------

    async def create_api_key(self, request: pb.CreateApiKeyRequest, ctx: CallContext) -> pb.CreateApiKeyResponse:
        project = ctx.resolve_project(request.project)
        name = check_key_name(request.name)
        roles = check_items(request.roles, "roles")
        if not roles:
            raise BadInputError("roles: a key needs at least one role in its project (e.g. ingest, runner)")
        now = self._clock()
        expires = seconds_of(request.expire_time) if request.HasField("expire_time") else None
        if expires is not None and expires <= now:
            raise BadInputError("expire_time: must be in the future")
        for index, role in enumerate(roles):
            if role == OWNER:
                raise BadInputError(f"roles[{index}]: owner is install-wide; an API key's roles are project roles")
            if self._authorizer is not None:
                subject = f"key:{database_key_name(project, name)}"
                grant = binding_grant(self._authorizer.current, binding_definition(
                    StoredBinding("", project, role, subject)))
                self._check_grant(ctx, project, grant)
            elif self._rbac.roles.find(role, project) is None and await self._store.get_role(project, role) is None:
                raise BadInputError(f"roles[{index}]: unknown role {role!r} in project {project!r}")
        secret = new_api_key()
        key = StoredApiKey(project=project, name=name, key_hash=hash_api_key(secret),
                           prefix=secret[:KEY_PREFIX_CHARS], roles=roles,
                           labels=check_labels(request.labels, "labels"), expires_at=expires, created_at=now,
                           created_by=_creator(ctx))
        try:
            await self._store.create_api_key(key)
        except AlreadyExistsError as exc:
            raise _exists(exc) from None
        self._record(ctx, project, f"key {name}", None, key_definition(key))
        return pb.CreateApiKeyResponse(key=key_message(key), secret=secret)

    async def list_api_keys(self, request: pb.ListApiKeysRequest, ctx: CallContext) -> pb.ListApiKeysResponse:
        project = ctx.project
        answer = pb.ListApiKeysResponse()
        for configured in self._config_keys:
            roles = [*configured.roles.get(project, ()), *configured.roles.get(ANY_PROJECT, ())]
            if roles:
                answer.keys.append(pb.ApiKey(name=configured.name, project=project, roles=roles,
                                             labels=dict(configured.labels), source="config"))
        for key in await self._store.list_api_keys(project, include_revoked=request.include_revoked):
            answer.keys.append(key_message(key))
        return answer

    async def revoke_api_key(self, request: pb.RevokeApiKeyRequest, ctx: CallContext) -> pb.ApiKey:
        project = ctx.resolve_project(request.project)
        name = check_key_name(request.name)
        before = await self._store.get_api_key(project, name)
        if before is None:
            if any(k.name == name for k in self._config_keys):
                raise _configured(f"API key {name!r}")
            raise NotFoundError(f"API key {name!r} not found in project {project!r}")
        revoked = await self._store.revoke_api_key(project, name, self._clock())
        assert revoked is not None  # keys are never deleted
        if before.revoked_at is None:
            self._record(ctx, project, f"key {name}", key_definition(before), key_definition(revoked))
        return key_message(revoked)

    # --- audit -----------------------------------------------------------------------------------------------

    async def list_audit_events(
        self, request: pb.ListAuditEventsRequest, ctx: CallContext
    ) -> pb.ListAuditEventsResponse:
        if request.decision and request.decision not in ("allow", "deny"):
            raise BadInputError(f"decision: {request.decision!r}; accepted: allow, deny")
        page_size = request.page_size or DEFAULT_AUDIT_PAGE
        if not 1 <= page_size <= MAX_AUDIT_PAGE:
            raise BadInputError(f"page_size: {page_size} is outside 1..{MAX_AUDIT_PAGE}")
        if request.all_projects:
            self._require_owner(ctx, "read every project's audit log")
        query = AuditQuery(
            project="" if request.all_projects else ctx.project,
            principal=check_length(request.principal, "principal", 512),
            action=check_length(request.action, "action", 64),
            decision=request.decision,
            start=seconds_of(request.start_time) if request.HasField("start_time") else None,
            end=seconds_of(request.end_time) if request.HasField("end_time") else None,
        )
        entries, token = await self._store.list_audit(query, page_size=page_size, page_token=request.page_token)
        return pb.ListAuditEventsResponse(events=[audit_message(e) for e in entries], next_page_token=token)

    # --- helpers ---------------------------------------------------------------------------------------------

    async def _known_projects(self, stored: Mapping[str, StoredProject] | None = None) -> set[str]:
        names = {DEFAULT_PROJECT}
        names |= {b.project for b in self._rbac.binding_definitions if b.project != ANY_PROJECT}
        if stored is None and self._stored is not None:
            stored = {p.name: p for p in await self._stored.list_projects()}
        names |= set(stored or ())
        return names

    def _readable(self, principal: Principal, projects: set[str]) -> set[str]:
        assert self._authorizer is not None
        current = self._authorizer.current
        readable: set[str] = set()
        for action in ("runs.read", "traces.read"):
            found = current.projects_readable(principal, action, projects)
            if found is ALL:
                return set(projects)
            assert isinstance(found, frozenset)
            readable |= found & projects
        return readable

    def _role_from(self, given: pb.Role, project_field: str, install_wide: bool, ctx: CallContext) -> StoredRole:
        project = INSTALL if install_wide else _project_of(ctx, project_field, given.project, "role")
        now = self._clock()
        return StoredRole(
            project=project,
            name=check_length(given.name, "role.name", 64),
            permissions=check_items(given.permissions, "role.permissions"),
            inherits=check_items(given.inherits, "role.inherits"),
            condition=check_length(given.condition, "role.condition", MAX_EXPRESSION_CHARS),
            description=check_length(given.description, "role.description", MAX_DESCRIPTION_CHARS),
            created_at=now, updated_at=now, created_by=_creator(ctx),
        )

    def _configured_role(self, name: str, project: str) -> RoleDefinition | None:
        for definition in (*BUILTIN_ROLES, *self._rbac.role_definitions):
            if definition.name == name and definition.project in (INSTALL, project):
                return definition
        return None

    def _check_role(self, ctx: CallContext, role: StoredRole) -> None:
        """The role's guardrails (BadInputError naming the field) and, with auth on, the escalation check."""
        definition = replace(role_definition(role), origin="role")
        if self._authorizer is None:
            from evalsi.authz.roles import build_roles

            build_roles([definition], base=self._rbac.roles.without(role.project, role.name))
            return
        grant = role_grant(self._authorizer.current, definition)
        self._check_grant(ctx, grant.project, grant)

    def _rbac_check_binding(self, binding: StoredBinding) -> None:
        from evalsi.authz.bindings import build_binding

        build_binding(replace(binding_definition(binding), origin="binding"), self._rbac.roles)

    def _check_grant(self, ctx: CallContext, project: str, grant: Any) -> None:
        assert self._authorizer is not None
        principal = ctx.principal
        try:
            check_grant(self._authorizer.current.granter_view(principal, project), grant)
        except PermissionDenied as exc:
            self._record(ctx, project, grant.what, None, None, denied=f"escalation check: {exc}")
            raise

    def _require_owner(self, ctx: CallContext, what: str) -> None:
        if self._authorizer is None:
            return
        if not self._authorizer.current.granter_view(ctx.principal, ANY_PROJECT).owner:
            self._record(ctx, ANY_PROJECT, what, None, None, denied=f"only an owner may {what}")
            raise PermissionDenied(f"only an owner may {what}")

    async def _changed(self, ctx: CallContext, project: str, resource: str, old: Mapping[str, Any] | None,
                       new: Mapping[str, Any] | None) -> None:
        """Audit a role or binding change and make it take effect on the next request."""
        self._record(ctx, project, resource, old, new)
        if self._authorizer is not None:
            await self._authorizer.reload()

    def _record(self, ctx: CallContext, project: str, resource: str, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None, *, denied: str = "") -> None:
        if self._audit is None:
            return
        principal = ctx.principal
        self._audit.record(AuditEntry(
            principal=principal.id, principal_kind=principal.kind, action=ctx.action or _action_of(ctx.method),
            project=project or ANY_PROJECT, decision="deny" if denied else "allow",
            deciding=denied or ctx.deciding or ("no authentication" if self._authorizer is None else ""),
            resource=resource, request_id=ctx.request_id, method=ctx.method.lstrip("/"),
            source=ctx.source, old_value=old, new_value=new,
        ))


def _project_of(ctx: CallContext, field: str, inner: str, what: str) -> str:
    """The call's project (header, else ``project``, else ``<what>.project``); an inner project naming another one
    is refused rather than ignored, as a request field differing from the header is."""
    project = ctx.resolve_project(field, inner)
    if inner and inner != project:
        raise BadInputError(f"{what}.project: {inner!r} differs from the call's project {project!r}; give one of "
                            "them, or the same in both")
    return project


def _creator(ctx: CallContext) -> str:
    """Who creates something: the principal's provider/subject, empty without authentication."""
    return ctx.principal.id if ctx.principal.authenticated else ""


def _action_of(method: str) -> str:
    from evalsi.authz.actions import endpoint

    try:
        return endpoint(method).permission or ""
    except KeyError:
        return ""


def _where(project: str) -> str:
    return f"project {project!r}" if project else "the install"


def _definition_message(definition: RoleDefinition, source: str) -> pb.Role:
    return pb.Role(name=definition.name, project=definition.project, permissions=list(definition.permissions),
                   inherits=list(definition.inherits), condition=definition.condition,
                   description=definition.description, source=source)
