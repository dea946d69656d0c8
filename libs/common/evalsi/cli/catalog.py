"""``evalsi catalog``: discover installed evaluators, their params, requirements and outputs."""

from __future__ import annotations

import json

import click
from google.protobuf import json_format

from evalsi.cli._common import handle_errors
from evalsi.evaluators import Registry
from evalsi.v1alpha1.evaluator_pb2 import Scope
from evalsi.v1alpha1.score_pb2 import ValueKind

# The registry and protobuf load inside the commands: `evalsi --help` must not pay for them.


@click.group("catalog")
def catalog() -> None:
    """List and describe the installed evaluators (packs come from the evalsi.packs entry points)."""


@catalog.command("list")
@click.option("--pack", help="Only this pack (core, judge, ...).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(pack: str | None, fmt: str) -> None:
    """Every installed evaluator, newest version of each."""


    registry = Registry.from_entry_points()
    evaluators = registry.evaluators(pack)
    if fmt == "json":
        click.echo(json.dumps([json_format.MessageToDict(e.manifest()) for e in evaluators], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(header_style="bold")
    for column in ("evaluator", "version", "pack", "scope", "description"):
        table.add_column(column, style="cyan" if column == "evaluator" else None, overflow="fold")
    for ev in evaluators:
        default = " (on)" if registry.packs[ev.pack].default_on else ""
        table.add_row(ev.name, ev.version, ev.pack + default, ev.scope, ev.description)
    Console(width=140).print(table)


@catalog.command("show")
@click.argument("name")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@handle_errors
def show_command(name: str, fmt: str) -> None:
    """Params, requirements and outputs of one evaluator (NAME as in --evaluators)."""


    ev = Registry.from_entry_points().resolve(name)
    manifest = ev.manifest()
    if fmt == "json":
        click.echo(json_format.MessageToJson(manifest))
        return
    lines = [
        f"{ev.ref}  (pack {ev.pack}, scope {Scope.Name(manifest.scope).removeprefix('SCOPE_').lower()}, "
        f"pool {ev.pool})",
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
        default = "required" if param.required else f"default {json.dumps(json_format.MessageToDict(param.default))}"
        choices = ""
        if param.choices:
            choices = ", one of " + ", ".join(json.dumps(json_format.MessageToDict(c)) for c in param.choices)
        lines.append(f"  {param.name} ({param.type}, {default}{choices}): {param.description}")
    click.echo("\n".join(lines))
