"""``evalsi whoami``: the principal a server sees for this command's credential, and its roles per project."""

from __future__ import annotations

import click

from evalsi.cli._common import client_for, handle_errors, message_json, server_option


@click.command("whoami")
@server_option
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def whoami_command(server: str, project: str | None, fmt: str) -> None:
    """Who the server says you are: the principal your credential proves, its roles in each project and the
    projects it can read (AuthService.WhoAmI)."""
    with client_for(server, project) as client:
        me = client.auth.whoami()
    if fmt == "json":
        click.echo(message_json(me))
        return
    roles = "; ".join(f"{where}: {', '.join(names.roles)}" for where, names in sorted(me.roles.items()))
    rows = [
        ("id", me.id), ("kind", me.kind), ("name", me.name), ("email", me.email),
        ("groups", ", ".join(me.groups)), ("api key", me.key_name),
        ("labels", ", ".join(f"{k}={v}" for k, v in sorted(me.labels.items()))),
        ("roles", roles or "(none)"), ("projects", ", ".join(me.projects) or "(none)"),
        ("server", server + ("" if me.auth_enabled else " (authenticates nobody: --no-auth or no auth section)")),
    ]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        if value:
            click.echo(f"{label:<{width}}  {value}")
