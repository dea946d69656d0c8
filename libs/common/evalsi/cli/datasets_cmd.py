"""``evalsi datasets``: upload a dataset file to a server as a stored version, and list a dataset's versions."""

from __future__ import annotations

import json
from pathlib import Path

import click

from evalsi.cli._common import client_for, handle_errors, message_dict, server_option
from evalsi.datasets import parse_mapping


@click.group("datasets")
def datasets() -> None:
    """Stored datasets on a server: what runs name with spec.dataset.ref (datasets/<name>[@<version>])."""


@datasets.command("push")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@server_option
@click.option("--name", default="", help="The dataset's name (default: the file's name without its extension).")
@click.option("--format", "fmt", default="", help="jsonl, json, csv or parquet (default: from the extension).")
@click.option("--map", "mapping", multiple=True, metavar="TARGET=SOURCE", help="Map a record field, as in a spec.")
@click.option("--limit", default=0, type=click.IntRange(min=0), help="Keep the first N records (0: all).")
@handle_errors
def push_command(
    file: Path, server: str, project: str | None, name: str, fmt: str, mapping: tuple[str, ...], limit: int
) -> None:
    """Upload FILE as a new version (or the latest, when it holds the same records); prints its ref."""

    pairs = {item.target: item.source for item in parse_mapping(list(mapping)).items}
    with client_for(server, project) as client:
        version = client.datasets.push(file, name=name, format=fmt, mapping=pairs, limit=limit)
    click.echo(f"{version.records} records as {version.ref}", err=True)
    click.echo(version.ref)


@datasets.command("list")
@click.argument("name")
@server_option
@click.option("--format", "out", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def list_command(name: str, server: str, project: str | None, out: str) -> None:
    """The versions of dataset NAME, oldest first."""
    with client_for(server, project) as client:
        versions = client.datasets.versions(name)
    if out == "json":
        click.echo(json.dumps([message_dict(v) for v in versions], indent=2))
        return
    for version in versions:
        created = version.create_time.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"{version.version[:12]}  {version.records:>10}  {created}  {version.ref}")
