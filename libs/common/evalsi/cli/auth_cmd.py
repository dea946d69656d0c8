"""``evalsi auth``: API key helpers (``hash-key``, ``new-key``), ``check`` (a decision explained offline from an
evalsi.yaml), and AuthService's keys, roles, bindings, projects and audit log (``auth_manage_cmd``)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from evalsi.cli._common import EXIT_GATE_FAILED, EXIT_OK, handle_errors
from evalsi.cli.auth_manage_cmd import audit_command, bindings, keys, projects, roles
from evalsi.errors import BadInputError

if TYPE_CHECKING:
    from evalsi.auth.principal import Principal


@click.group("auth")
def auth() -> None:
    """Identity and access: API key hashes, decisions explained offline, and a server's keys, roles, bindings,
    projects and audit log (docs/auth.md)."""


auth.add_command(keys)
auth.add_command(roles)
auth.add_command(bindings)
auth.add_command(projects)
auth.add_command(audit_command)


@auth.command("hash-key")
@click.option("--key", default=None, metavar="KEY",
              help="The evk_ key to hash (default: read from stdin, which keeps it out of `ps` and the history).")
@handle_errors
def hash_key_command(key: str | None) -> None:
    """Print the sha256:<hex> hash of an API key, the only form evalsi.yaml holds it in (auth.api_keys.keys[].key).

    \b
    Example:
      printf %s "$EVALSI_API_KEY" | evalsi auth hash-key
    """
    from evalsi.auth.api_keys import hash_api_key, looks_like_api_key

    value = (key if key is not None else sys.stdin.readline()).strip()
    if not looks_like_api_key(value):
        raise BadInputError("not an Evals.si API key (they start with 'evk_'; `evalsi auth new-key` makes one)")
    click.echo(hash_api_key(value))


@auth.command("new-key")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def new_key_command(fmt: str) -> None:
    """Make a fresh evk_ API key and print it with its hash: the key for the client (EVALSI_API_KEY), the hash
    for evalsi.yaml's auth.api_keys.keys[].key. Nothing is stored; the key is shown this once."""
    from evalsi.auth.api_keys import hash_api_key, new_api_key

    key = new_api_key()
    if fmt == "json":
        click.echo(json.dumps({"key": key, "hash": hash_api_key(key)}))
        return
    click.echo(f"key   {key}\nhash  {hash_api_key(key)}")
    click.echo("Give the key to the client (EVALSI_API_KEY) and put the hash in evalsi.yaml "
               "(auth.api_keys.keys[].key); the key is not shown again.", err=True)


PRINCIPAL_KEYS = ("kind", "provider", "subject", "name", "email", "email_verified", "groups", "claims", "roles",
                  "labels", "key_name")


def principal_from_json(text: str) -> Principal:
    """``--principal '{"kind": "user", "provider": "corp", "subject": "alice", "groups": ["eng"]}'``."""
    from evalsi.auth.principal import Principal

    try:
        document = json.loads(text)
    except ValueError as exc:
        raise BadInputError(f"--principal: not JSON ({exc})") from None
    if not isinstance(document, Mapping):
        raise BadInputError("--principal: expected a JSON object like {\"kind\": \"user\", \"provider\": \"corp\", "
                            "\"subject\": \"alice\"}")
    unknown = sorted(set(document) - set(PRINCIPAL_KEYS))
    if unknown:
        raise BadInputError(f"--principal: unknown key {unknown[0]!r}; accepted: {', '.join(PRINCIPAL_KEYS)}")
    kind = document.get("kind", "user")
    if kind not in ("user", "service", "apikey", "anonymous"):
        raise BadInputError(f"--principal: kind {kind!r}; accepted: user, service, apikey, anonymous")
    roles = document.get("roles") or {}
    if not isinstance(roles, Mapping) or not all(isinstance(v, list) for v in roles.values()):
        raise BadInputError('--principal: roles must map a project to a list of roles, e.g. {"support": ["viewer"]}')
    fields: dict[str, Any] = {key: document[key] for key in PRINCIPAL_KEYS if key in document}
    fields.update(kind=kind, groups=tuple(document.get("groups") or ()),
                  roles={project: tuple(names) for project, names in roles.items()})
    try:
        return Principal(**fields)
    except TypeError as exc:
        raise BadInputError(f"--principal: {exc}") from None


def _principal_lines(principal: Principal) -> list[str]:
    verified = " (verified)" if principal.email and principal.email_verified else ""
    details = (
        ("name", principal.name),
        ("email", principal.email + verified),
        ("groups", ", ".join(principal.groups)),
        ("roles", "; ".join(f"{project}: {', '.join(names)}" for project, names in sorted(principal.roles.items()))),
    )
    return [f"principal  {principal.id} ({principal.kind})",
            *(f"  {label:<7} {value}" for label, value in details if value)]


async def _authenticate(settings: Any, token: str | None, api_key: str | None) -> Principal:
    from evalsi.auth.authenticator import Authenticator
    from evalsi.auth.principal import Credentials

    if settings.auth is None:
        raise BadInputError("the config has no auth section, so a token or key proves nothing; pass --principal")
    authenticator = Authenticator(settings.auth)
    try:
        value = token if token is not None else api_key
        return await authenticator.authenticate(
            Credentials(transport="http", headers={"authorization": f"Bearer {value}"}, peer="127.0.0.1"))
    finally:
        await authenticator.aclose()


@auth.command("check")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The evalsi.yaml whose auth, rbac and authorization sections decide.")
@click.option("--token", default=None, metavar="JWT", help="A bearer token, verified as the server would (its "
              "provider's JWKS is fetched).")
@click.option("--api-key", default=None, metavar="KEY", help="An evk_ key from the config's auth.api_keys.")
@click.option("--principal", "principal_json", default=None, metavar="JSON",
              help="The principal itself, unverified: kind, provider, subject, name, email, email_verified, groups, "
              "claims, roles, labels, key_name.")
@click.option("--action", required=True, metavar="ACTION", help="An action of the action table, e.g. runs.create.")
@click.option("--project", required=True, metavar="NAME", help="The project the call is in.")
@click.option("--resource", "resource_json", default=None, metavar="JSON",
              help='The resource attributes CEL sees, e.g. \'{"target": {"model": "qwen3"}, "labels": {"app": "x"}}\'.')
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def check_command(config_path: Path, token: str | None, api_key: str | None, principal_json: str | None, action: str,
                  project: str, resource_json: str | None, fmt: str) -> None:
    """Explain a decision offline: the principal a credential proves under an evalsi.yaml, every rule and role
    considered with its result, and the decision. Exits 0 when allowed, 3 when denied.

    \b
    Example:
      evalsi auth check --config evalsi.yaml --api-key "$KEY" --action runs.create --project support
    """
    from evalsi.authz.authorizer import Authorizer
    from evalsi.authz.decision import AccessRequest
    from evalsi.gate.exposure import AccessSettings
    from evalsi.yaml_files import read_yaml_file

    given = [flag for flag, value in (("--token", token), ("--api-key", api_key), ("--principal", principal_json))
             if value is not None]
    if len(given) != 1:
        raise click.UsageError("give one of --token, --api-key or --principal"
                               + (f" (got {' and '.join(given)})" if given else ""))
    document = read_yaml_file(config_path)
    settings = AccessSettings.from_document(document if isinstance(document, Mapping) else {}, where=str(config_path))
    resource: Any = {}
    if resource_json is not None:
        try:
            resource = json.loads(resource_json)
        except ValueError as exc:
            raise BadInputError(f"--resource: not JSON ({exc})") from None
        if not isinstance(resource, Mapping):
            raise BadInputError("--resource: expected a JSON object of attributes")
    if principal_json is not None:
        principal = principal_from_json(principal_json)
    else:
        from evalsi.auth.principal import Unauthenticated

        try:
            principal = asyncio.run(_authenticate(settings, token, api_key))
        except Unauthenticated as exc:  # the server would answer 401: a deny, before any rule
            click.echo(f"decision   DENY: unauthenticated: {exc}")
            sys.exit(EXIT_GATE_FAILED)
    authorizer = Authorizer.from_config(settings.rbac, settings.authorization)
    decision = authorizer.decide(AccessRequest(principal, action, project, resource=dict(resource),
                                               protocol="offline", source="127.0.0.1"))
    if fmt == "json":
        click.echo(json.dumps({"principal": principal.id, "kind": principal.kind, "action": action,
                               "project": project, "allowed": decision.allowed, "deciding": decision.deciding,
                               "trace": list(decision.trace)}, indent=2))
    else:
        click.echo("\n".join(_principal_lines(principal)))
        click.echo(f"action     {action} in project {project}")
        for line in decision.trace:
            click.echo(f"  {line}")
        click.echo(f"decision   {'ALLOW' if decision.allowed else 'DENY'}: {decision.deciding}")
    sys.exit(EXIT_OK if decision.allowed else EXIT_GATE_FAILED)
