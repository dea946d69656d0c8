"""``evalsi catalog``: discover installed evaluators, their params, requirements and outputs."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

import click
from google.protobuf import json_format

from evalsi.cli._common import (
    PROJECT_HELP,
    F,
    check_project_flag,
    client_for,
    credential_options,
    handle_errors,
    server_option,
    split_list,
)
from evalsi.cli._plugins import plugins_dir_option, registry_with_plugins
from evalsi.evaluators import Registry
from evalsi.v1alpha1.catalog_service_pb2 import PackInfo, ProjectPacks
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorManifest, Scope
from evalsi.v1alpha1.score_pb2 import ValueKind

# The registry and protobuf load inside the commands: `evalsi --help` must not pay for them.


@click.group("catalog")
def catalog() -> None:
    """List and describe the installed evaluators and packs, with tiers; --server: a project's catalog.

    Packs come from the evalsi.packs entry points; on a server a project enables packs and an owner may restrict it
    to an allowlist (docs/packs.md)."""


_SERVER_HELP = (
    "Ask this server for the project's catalog: the evaluators of the packs the project has enabled, and which "
    "packs those are (server: grpc://HOST:8081 or http://HOST:8080). Without it: what is installed here, where "
    "naming an evaluator is the opt-in and no pack is off."
)
_FORMATS = click.Choice(["table", "json"])
_PLUGINS = plugins_dir_option("are listed with the installed ones (tier community; without --server)")


def _server_options(fn: F) -> F:
    """``--server`` (optional: absent lists what is installed here), ``--project``, ``--token``, ``--api-key``."""
    fn = credential_options(fn)
    fn = click.option("--project", default=None, metavar="NAME", callback=check_project_flag, help=PROJECT_HELP)(fn)
    return click.option("--server", default=None, metavar="URL", help=_SERVER_HELP)(fn)


@catalog.command("list")
@click.option("--pack", help="Only this pack (core, judge, ...), whether or not the project enables it.")
@click.option("--all", "all_packs", is_flag=True,
              help="With --server: the evaluators of every pack the project is allowed, not only those it enables.")
@_server_options
@_PLUGINS
@click.option("--format", "fmt", type=_FORMATS, default="table", show_default=True)
@handle_errors
def list_command(pack: str | None, all_packs: bool, server: str | None, project: str | None, plugins_dir: str | None,
                 fmt: str) -> None:
    """Every installed evaluator (newest version of each) with its pack and tier, or with --server the project's
    catalog on that server. "(on)" marks a pack the project has enabled (here: the packs on by default).

    \b
    Examples:
      evalsi catalog list --pack core
      evalsi catalog list --server http://127.0.0.1:8080 --project support --all
    """
    manifests, packs = _catalog(pack, all_packs, server, project, plugins_dir)
    if fmt == "json":
        click.echo(json.dumps([json_format.MessageToDict(m) for m in manifests], indent=2))
        return
    on = {info.name for info in packs if info.enabled}
    rows = [
        (m.name, m.version, m.pack + (" (on)" if m.pack in on else ""), m.tier,
         Scope.Name(m.scope).removeprefix("SCOPE_").lower(), m.description)
        for m in manifests
    ]
    _print_table(("evaluator", "version", "pack", "tier", "scope", "description"), rows)


@catalog.command("packs")
@_server_options
@_PLUGINS
@click.option("--format", "fmt", type=_FORMATS, default="table", show_default=True)
@handle_errors
def packs_command(server: str | None, project: str | None, plugins_dir: str | None, fmt: str) -> None:
    """Every installed pack: its tier (native, wrapped with the pinned upstream release, community), how many
    evaluators it has, and with --server whether the project has it enabled (online policies run it, the catalog
    lists it) and allowed (requests may name its evaluators).

    \b
    Examples:
      evalsi catalog packs
      evalsi catalog packs --server http://127.0.0.1:8080 --project support
    """
    _, packs = _catalog(None, False, server, project, plugins_dir)
    if fmt == "json":
        click.echo(json.dumps([json_format.MessageToDict(p, always_print_fields_with_no_presence=True)
                               for p in packs], indent=2))
        return
    rows = [
        (p.name, p.tier, p.upstream or "-", "yes" if p.enabled else "no", "yes" if p.allowed else "no",
         str(p.evaluators), p.description)
        for p in packs
    ]
    _print_table(("pack", "tier", "upstream", "on", "allowed", "evaluators", "description"), rows)


_INHERIT = click.option("--inherit", is_flag=True,
                        help="Remove the stored list: the project goes back to the server's evalsi.yaml.")


@catalog.command("set-packs")
@click.argument("packs", required=False, default="")
@_INHERIT
@server_option
@handle_errors
def set_packs_command(packs: str, inherit: bool, server: str, project: str | None) -> None:
    """Enable PACKS (comma-separated) for the project on the server: its online policies may run them and its
    catalog lists them. Each must be installed there and in the project's allowlist. Needs policies.write.

    \b
    Examples:
      evalsi catalog set-packs core,judge,rag --project support --server http://127.0.0.1:8080
      evalsi catalog set-packs --inherit --project support --server http://127.0.0.1:8080
    """
    names = _pack_names(packs, inherit)
    with client_for(server, project) as client:
        _echo_project_packs(client.set_project_packs(names))


@catalog.command("allow-packs")
@click.argument("packs", required=False, default="")
@_INHERIT
@server_option
@handle_errors
def allow_packs_command(packs: str, inherit: bool, server: str, project: str | None) -> None:
    """Restrict the project to PACKS (comma-separated): its requests may name evaluators of these packs only
    (403 otherwise). The owner's (install.manage).

    \b
    Example:
      evalsi catalog allow-packs core,judge --project sandbox-team --server http://127.0.0.1:8080
    """
    names = _pack_names(packs, inherit)
    with client_for(server, project) as client:
        _echo_project_packs(client.set_pack_allowlist(names))


def _pack_names(packs: str, inherit: bool) -> list[str] | None:
    if inherit and packs:
        raise click.UsageError("give PACKS or --inherit, not both")
    if inherit:
        return None
    if not packs:
        raise click.UsageError("PACKS: a comma-separated list such as core,judge (or --inherit)")
    return split_list(packs)


def _echo_project_packs(answer: ProjectPacks) -> None:
    enabled = "stored" if answer.enabled_stored else "from evalsi.yaml"
    allowed = "stored" if answer.allowed_stored else "from evalsi.yaml"
    click.echo(f"project {answer.project}: enabled {', '.join(answer.enabled) or 'none'} ({enabled}); "
               f"allowed {', '.join(answer.allowed) or 'none'} ({allowed})")


def _catalog(pack: str | None, all_packs: bool, server: str | None, project: str | None,
             plugins_dir: str | None) -> tuple[list[EvaluatorManifest], list[PackInfo]]:
    """The manifests and packs a server offers ``project``, or (no server) what this environment has installed,
    with the plugins under ``plugins_dir``: every pack allowed, the default-on ones on."""
    if server is None:
        if all_packs:
            raise click.UsageError("--all: only with --server (without one, every installed pack is listed)")
        registry = _local_registry(plugins_dir)
        evaluators = registry.evaluators(pack)
        packs = [
            PackInfo(name=name, description=info.description, default_on=info.default_on,
                     evaluators=len(registry.evaluators(name)), tier=info.tier, upstream=info.upstream,
                     enabled=info.default_on, allowed=True)
            for name, info in sorted(registry.packs.items())
        ]
        return [registry.manifest(ev) for ev in evaluators], packs
    from evalsi.client_config import client_defaults

    defaults = client_defaults(server, project)
    with client_for(defaults.require_server(), defaults.project or None) as client:
        response = client.list_evaluators(pack or "", all_packs=all_packs)
    return list(response.evaluators), list(response.packs)


def _local_registry(plugins_dir: str | None) -> Registry:
    """The installed packs and, described once and stopped, the plugins under ``plugins_dir``."""
    with contextlib.ExitStack() as stack:
        return registry_with_plugins(plugins_dir, stack, run=False)


def _print_table(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(header_style="bold")
    for column in columns:
        table.add_column(column, style="cyan" if column == columns[0] else None, overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # plain text: a description's [doc-id] is not console markup
    Console(width=160).print(table)


@catalog.command("show")
@click.argument("name")
@_PLUGINS
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def show_command(name: str, plugins_dir: str | None, fmt: str) -> None:
    """Params, requirements and outputs of one evaluator (NAME as in --evaluators)."""
    registry = _local_registry(plugins_dir)
    ev = registry.resolve(name)
    manifest = registry.manifest(ev)
    if fmt == "json":
        click.echo(json_format.MessageToJson(manifest))
        return
    lines = [
        f"{ev.ref}  (pack {ev.pack}, tier {manifest.tier}, "
        f"scope {Scope.Name(manifest.scope).removeprefix('SCOPE_').lower()}, pool {ev.pool})",
        "",
        ev.description or "(no description)",
        "",
    ]
    requires = [
        f
        for f in ("input", "output", "reference", "context", "trajectory", "usage", "judge")
        if getattr(manifest.requires, f)
    ]
    lines.append("requires: " + (", ".join(requires) or "nothing"))
    lines.append("outputs:")
    for output in manifest.outputs:
        kind = ValueKind.Name(output.type).removeprefix("VALUE_KIND_").lower()
        bounds = f" [{output.min:g}, {output.max:g}]" if output.HasField("min") and output.HasField("max") else ""
        direction = "higher is better" if output.higher_is_better else "lower is better"
        lines.append(
            f"  {output.name}: {kind}{bounds}, {direction}" + (f" — {output.description}" if output.description else "")
        )
    lines.append("params:" if manifest.params else "params: none")
    for param in manifest.params:
        default = "required" if param.required else f"default {_param_value(param.type, param.default)}"
        choices = ""
        if param.choices:
            choices = ", one of " + ", ".join(_param_value(param.type, c) for c in param.choices)
        lines.append(f"  {param.name} ({param.type}, {default}{choices}): {param.description}")
    click.echo("\n".join(lines))


def _param_value(kind: str, value: Any) -> str:
    """A param's default or choice as JSON; an int param's number without the ".0" protobuf's double gives it."""
    plain = json_format.MessageToDict(value)
    if kind == "int" and isinstance(plain, float) and plain.is_integer():
        plain = int(plain)
    return json.dumps(plain)
