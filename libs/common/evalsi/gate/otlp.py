"""OTLP export behind the gate: the project comes from the credential, and a batch may name another project
(the ``x-evalsi-project`` header, a resource's ``evalsi.project``) only where the principal may write traces.

An ingest key bound to one project (``roles: {support: [ingest]}``) sends to that project without naming it;
a resource naming a project the principal cannot write refuses the whole batch (403 / PERMISSION_DENIED),
so spans cannot be injected into another team's traces and policies. A name that is not a project at all is
left to the export handler, which rejects those spans as a partial success, as without authentication.

Labels: the credential's own (an API key's ``labels``) are written onto every resource of the batch as
``evalsi.label.<key>``, over the resource's, before the decision, which reads ``resource.labels`` from the batch
(``attributes.otlp_export``): a caller stores only traces labelled as its roles' conditions allow.
"""

from __future__ import annotations

from typing import Any

from evalsi.auth.principal import Credentials, Principal
from evalsi.gate.access import Gate, credential_project
from evalsi.labels import stamp_resource_labels
from evalsi.projects import PROJECT_ATTRIBUTE, PROJECT_HEADER, check_project, is_project


def named_projects(request: Any) -> tuple[set[str], bool]:
    """The valid projects the batch's resources name with ``evalsi.project``, and whether any resource names
    none (its spans go to the fallback project)."""
    named: set[str] = set()
    unnamed = False
    groups: Any = getattr(request, "resource_spans", None)
    for group in groups if groups is not None else getattr(request, "resource_logs", ()):
        value = ""
        for attribute in group.resource.attributes:
            if attribute.key == PROJECT_ATTRIBUTE:
                value = attribute.value.string_value
        if not value:
            unnamed = True
        elif is_project(value):
            named.add(value)
    return named, unnamed


def _resources(request: Any) -> list[Any]:
    groups: Any = getattr(request, "resource_spans", None)
    return [group.resource for group in (groups if groups is not None else getattr(request, "resource_logs", ()))]


async def admit_export(
    gate: Gate,
    method: str,
    credentials: Credentials,
    request: Any,
    *,
    header_project: str,
    default_project: str,
    principal: Principal | None = None,
) -> str:
    """Authorize ``traces.write`` in every project the batch will be stored in; returns the project of its
    resources that name none (the header's, else the credential's, else ``default_project``). Raises
    Unauthenticated, PermissionDenied, or BadInputError for a header that names no project."""
    if principal is None:
        principal = await gate.authenticate(credentials, method)
    if header_project:
        check_project(header_project, f"{PROJECT_HEADER} header")  # a bad name is a 400, as without the gate
    endpoint = gate.endpoint(method)
    fallback = header_project or credential_project(principal) or default_project
    # The header overrides every resource's attribute (as the export handler applies it): only it is stored.
    if header_project:
        projects = {header_project}
    else:
        projects, unnamed = named_projects(request)
        if unnamed or not projects:  # an empty batch is still decided: no write without traces.write somewhere
            projects.add(fallback)
    # The credential's labels (an API key's) go onto every resource before the decision, which is so taken on the
    # labels the traces will be stored with: a caller attaches only labels its roles' conditions allow.
    stamp_resource_labels(_resources(request), principal.labels)
    if endpoint.permission is not None:
        resource = endpoint.attributes(request, gate.sources)
        for project in sorted(projects):
            await gate.decide(principal, endpoint.permission, project, resource, credentials, method)
    return fallback
