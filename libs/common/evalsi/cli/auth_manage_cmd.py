"""``evalsi auth keys|roles|bindings|projects|audit``: AuthService on a server, as tables or ``--format json``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

import click

from evalsi.cli._common import client_for, handle_errors, message_dict, message_json, parse_key_values, server_option
from evalsi.errors import BadInputError

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from google.protobuf.timestamp_pb2 import Timestamp

    from evalsi.v1alpha1.auth_service_pb2 import Role

F = TypeVar("F", bound=Callable[..., Any])
_FORMAT = click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
_EXPIRY = re.compile(r"^(\d+)([hd])$")


def _time(stamp: Timestamp) -> str:
    if not stamp.seconds and not stamp.nanos:
        return ""
    return stamp.ToDatetime(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _show(fmt: str, items: Sequence[Message], columns: Sequence[str], row: Callable[[Any], Sequence[str]],
          empty: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([message_dict(item) for item in items], indent=2))
        return
    if not items:
        click.echo(empty, err=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in columns:
        table.add_column(column)
    for item in items:
        table.add_row(*row(item))
    Console(width=200).print(table)


def _one(fmt: str, message: Message, line: str) -> None:
    click.echo(message_json(message) if fmt == "json" else line)


def _labels(pairs: Iterable[str]) -> dict[str, str]:
    return {key: str(value) for key, value in parse_key_values(pairs, "--label").items()}


# --- keys ---------------------------------------------------------------------------------------------------------

@click.group("keys")
def keys() -> None:
    """API keys stored on the server (hashed; the key itself is shown once, at creation)."""


def parse_expiry(text: str, now: datetime | None = None) -> datetime:
    """``90d``, ``12h`` from now, or an ISO 8601 time (UTC when it names no zone)."""
    match = _EXPIRY.match(text.strip())
    if match:
        unit = "days" if match.group(2) == "d" else "hours"
        return (now or datetime.now(UTC)) + timedelta(**{unit: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInputError(f"--expires {text!r}: expected a duration such as 90d or 12h, or an ISO time such as "
                            "2027-01-31T00:00") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@keys.command("create")
@click.argument("name")
@click.option("--role", "role_names", multiple=True, metavar="ROLE", help="A role the key grants in its project "
              "(repeatable).")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label on the key (repeatable).")
@click.option("--expires", default=None, metavar="WHEN", help="90d, 12h, or an ISO time (default: never).")
@server_option
@_FORMAT
@handle_errors
def create_key_command(name: str, role_names: tuple[str, ...], labels: tuple[str, ...], expires: str | None,
                       server: str, project: str | None, fmt: str) -> None:
    """Create an API key; the key alone goes to stdout (shown this once: store it now), what it is to stderr.

    \b
    Example:
      KEY=$(evalsi auth keys create otel-collector --role ingest --project support)
    """
    expiry = parse_expiry(expires) if expires else None
    with client_for(server, project) as client:
        created = client.auth.create_key(name, roles=role_names, labels=_labels(labels), expires=expiry)
    if fmt == "json":
        click.echo(message_json(created))
        return
    key = created.key
    when = f", expires {_time(key.expire_time)}" if key.HasField("expire_time") else ""
    click.echo(f"key {key.name} in project {key.project} ({', '.join(key.roles) or 'no roles'}{when}); it is shown "
               "this once:", err=True)
    click.echo(created.secret)


@keys.command("list")
@click.option("--revoked", is_flag=True, help="Include revoked keys.")
@server_option
@_FORMAT
@handle_errors
def list_keys_command(revoked: bool, server: str, project: str | None, fmt: str) -> None:
    """The project's API keys (names and prefixes; never the keys)."""
    with client_for(server, project) as client:
        found = client.auth.keys(include_revoked=revoked)
    _show(fmt, found, ("name", "prefix", "roles", "labels", "expires", "last used", "revoked", "source"),
          lambda k: (k.name, k.prefix, ", ".join(k.roles), ", ".join(f"{a}={b}" for a, b in sorted(k.labels.items())),
                     _time(k.expire_time), _time(k.last_used_time), _time(k.revoke_time), k.source),
          "no API keys in this project")


@keys.command("revoke")
@click.argument("name")
@server_option
@_FORMAT
@handle_errors
def revoke_key_command(name: str, server: str, project: str | None, fmt: str) -> None:
    """Revoke an API key: it stops authenticating on the next request."""
    with client_for(server, project) as client:
        key = client.auth.revoke_key(name)
    _one(fmt, key, f"key {key.name} in project {key.project} revoked at {_time(key.revoke_time)}")


# --- roles --------------------------------------------------------------------------------------------------------

@click.group("roles")
def roles() -> None:
    """Roles: built-in, from evalsi.yaml, and custom ones stored on the server."""


def _role_options(fn: F) -> F:
    for decorator in reversed((
        click.argument("name"),
        click.option("--permission", "permissions", multiple=True, metavar="ACTION",
                     help="A permission (an action such as runs.create, or a wildcard such as runs.*), repeatable."),
        click.option("--inherits", multiple=True, metavar="ROLE", help="A role this one extends, repeatable."),
        click.option("--condition", default="", metavar="CEL", help="A CEL condition that must hold for the role "
                     "to grant anything, e.g. 'resource.target.model in [\"qwen3\"]'."),
        click.option("--description", default="", help="What the role is for."),
        click.option("--install-wide", is_flag=True, help="An install-wide role (owner only) instead of the "
                     "project's."),
    )):
        fn = decorator(fn)
    return fn


def _role(name: str, permissions: tuple[str, ...], inherits: tuple[str, ...], condition: str,
          description: str) -> Role:
    from evalsi.v1alpha1.auth_service_pb2 import Role

    return Role(name=name, permissions=list(permissions), inherits=list(inherits), condition=condition,
                description=description)


@roles.command("list")
@server_option
@_FORMAT
@handle_errors
def list_roles_command(server: str, project: str | None, fmt: str) -> None:
    """Roles visible in the project (install-wide ones included)."""
    with client_for(server, project) as client:
        found = client.auth.roles()
    _show(fmt, found, ("name", "project", "permissions", "inherits", "condition", "source"),
          lambda r: (r.name, r.project or "*", ", ".join(r.permissions), ", ".join(r.inherits), r.condition,
                     r.source), "no roles")


@roles.command("create")
@_role_options
@server_option
@_FORMAT
@handle_errors
def create_role_command(name: str, permissions: tuple[str, ...], inherits: tuple[str, ...], condition: str,
                        description: str, install_wide: bool, server: str, project: str | None, fmt: str) -> None:
    """Create a custom role; refused when it grants what you do not hold yourself."""
    with client_for(server, project) as client:
        role = client.auth.create_role(_role(name, permissions, inherits, condition, description),
                                       install_wide=install_wide)
    _one(fmt, role, f"role {role.name} created in {role.project or 'the install'}")


@roles.command("update")
@_role_options
@server_option
@_FORMAT
@handle_errors
def update_role_command(name: str, permissions: tuple[str, ...], inherits: tuple[str, ...], condition: str,
                        description: str, install_wide: bool, server: str, project: str | None, fmt: str) -> None:
    """Replace a stored role's definition (takes effect on the next request)."""
    with client_for(server, project) as client:
        role = client.auth.update_role(_role(name, permissions, inherits, condition, description),
                                       install_wide=install_wide)
    _one(fmt, role, f"role {role.name} updated in {role.project or 'the install'}")


@roles.command("delete")
@click.argument("name")
@click.option("--install-wide", is_flag=True, help="The install-wide role of that name.")
@server_option
@_FORMAT
@handle_errors
def delete_role_command(name: str, install_wide: bool, server: str, project: str | None, fmt: str) -> None:
    """Delete a stored role (refused while a binding names it)."""
    with client_for(server, project) as client:
        role = client.auth.delete_role(name, install_wide=install_wide)
    _one(fmt, role, f"role {role.name} deleted from {role.project or 'the install'}")


# --- bindings -----------------------------------------------------------------------------------------------------

@click.group("bindings")
def bindings() -> None:
    """Role bindings: who holds which role in a project."""


@bindings.command("list")
@click.option("--role", default="", metavar="ROLE", help="Only this role's bindings.")
@server_option
@_FORMAT
@handle_errors
def list_bindings_command(role: str, server: str, project: str | None, fmt: str) -> None:
    """The project's bindings, from evalsi.yaml and stored."""
    with client_for(server, project) as client:
        found = client.auth.bindings(role=role)
    _show(fmt, found, ("id", "project", "role", "subject", "source", "created by"),
          lambda b: (b.id, b.project, b.role, b.subject, b.source, b.created_by), "no bindings")


@bindings.command("create")
@click.argument("role")
@click.argument("subject")
@server_option
@_FORMAT
@handle_errors
def create_binding_command(role: str, subject: str, server: str, project: str | None, fmt: str) -> None:
    """Grant ROLE to SUBJECT (user:<provider>/<subject>, email:<address>, group:<provider>/<group>, key:<name> or
    cel:<expression>) in the project."""
    with client_for(server, project) as client:
        binding = client.auth.create_binding(role, subject)
    _one(fmt, binding, f"binding {binding.id}: {binding.subject} is {binding.role} in {binding.project}")


@bindings.command("delete")
@click.argument("binding_id", metavar="ID")
@server_option
@_FORMAT
@handle_errors
def delete_binding_command(binding_id: str, server: str, project: str | None, fmt: str) -> None:
    """Delete a stored binding by its id (`evalsi auth bindings list`)."""
    with client_for(server, project) as client:
        binding = client.auth.delete_binding(binding_id)
    _one(fmt, binding, f"binding {binding.id} deleted ({binding.subject} was {binding.role} in {binding.project})")


# --- projects -----------------------------------------------------------------------------------------------------

@click.group("projects")
def projects() -> None:
    """Projects: declared in evalsi.yaml or created by an owner."""


@projects.command("list")
@server_option
@_FORMAT
@handle_errors
def list_projects_command(server: str, project: str | None, fmt: str) -> None:
    """The projects you can read."""
    with client_for(server, project) as client:
        found = client.auth.projects()
    _show(fmt, found, ("name", "description", "source", "created", "created by"),
          lambda p: (p.name, p.description, p.source, _time(p.create_time), p.created_by), "no projects")


@projects.command("create")
@click.argument("name")
@click.option("--description", default="")
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE", help="A label, repeatable.")
@server_option
@_FORMAT
@handle_errors
def create_project_command(name: str, description: str, labels: tuple[str, ...], server: str, project: str | None,
                           fmt: str) -> None:
    """Create a project (owner only)."""
    with client_for(server, project) as client:
        created = client.auth.create_project(name, description=description, labels=_labels(labels))
    _one(fmt, created, f"project {created.name} created")


# --- audit --------------------------------------------------------------------------------------------------------

@click.command("audit")
@click.option("--principal", default="", metavar="PROVIDER/SUBJECT", help="Only this principal's calls.")
@click.option("--action", default="", metavar="ACTION", help="Only this action (runs.create ...).")
@click.option("--decision", type=click.Choice(["allow", "deny"]), default=None, help="Only allowed or denied calls.")
@click.option("--since", default=None, metavar="WHEN", help="Events since 30m, 2h, 7d ago, or an ISO time.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1), help="At most this many events.")
@server_option
@_FORMAT
@handle_errors
def audit_command(principal: str, action: str, decision: str | None, since: str | None, limit: int, server: str,
                  project: str | None, fmt: str) -> None:
    """The audit log of the project, newest first: every mutating and every denied call, with what decided it."""
    from evalsi.cli.traces_cmd import parse_since

    start = parse_since(since) if since else None
    with client_for(server, project) as client:
        events = list(islice(client.auth.audit(principal=principal, action=action, decision=decision or "",
                                               since=start, page_size=min(limit, 1000)), limit))
    _show(fmt, events, ("time", "principal", "action", "project", "resource", "decision", "deciding"),
          lambda e: (_time(e.time), e.principal, e.action, e.project, e.resource, e.decision, e.deciding),
          "no audit events match")
