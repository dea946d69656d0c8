"""``evalsi bus``: the bus's users for a nats-server that ``evalsi serve`` does not run (docker compose's)."""

from __future__ import annotations

from pathlib import Path

import click

from evalsi.bus.subjects import POOLS, check_pool
from evalsi.cli._common import handle_errors
from evalsi.service.bus_users_files import Owner, write_bus_users


@click.group("bus")
def bus() -> None:
    """The bus's NATS users for a nats-server you run yourself (docker compose): one per service (docs/server.md)."""


def _pools(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise click.BadParameter(f"name at least one pool; pools are {', '.join(POOLS)}")
    try:
        return tuple(dict.fromkeys(check_pool(name) for name in names))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@bus.command("credentials")
@click.option("--pools", required=True, callback=_pools, metavar="POOL,...",
              help=f"The worker pools the deployment runs, comma-separated ({', '.join(POOLS)}): a worker-<pool> user "
                   "each, consuming work.<pool> only.")
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The directory to write (created 0700 when missing): a volume the nats-server and the services "
                   "mount.")
@click.option("--rotate", is_flag=True,
              help="New passwords for every user; without it, passwords already in --out are kept.")
@click.option("--owner", default="", metavar="USER[:GROUP]",
              help="Give each service's file to this user (a name or a uid): the services' user, when the command "
                   "runs as root (a named user's files go to its group too). nats-server's and admin's stay yours.")
@handle_errors
def credentials_command(pools: tuple[str, ...], out: Path, rotate: bool, owner: str) -> None:
    """Write one NATS user per service with a random password, and nats-server's authorization for them.

    \b
    OUT/nats-server/authorization.conf   for `nats-server -c` (or an `include` in your own configuration)
    OUT/<identity>/nats.credentials      user:password, for that service's --nats-credentials
                                          (api, ingest, policy, scheduler, worker-<pool>; admin: the operator's)

    Each user may publish and subscribe only to what its service needs (a worker consumes only work.<its pool>).
    Files are 0600, directories 0700. Run again, it keeps the passwords already there (services holding them still
    connect) and adds what is missing; --rotate replaces them all (then restart nats-server and the services).
    No password is printed.
    """
    written = write_bus_users(out, pools, rotate=rotate, owner=Owner.parse(owner) if owner else None)
    for identity in written.files:
        state = "kept" if identity in written.kept else ("rotated" if rotate else "new")
        click.echo(f"{identity:<16} {state:<8} {written.files[identity]}", err=True)
    for identity in written.removed:
        click.echo(f"{identity:<16} removed  (its pool is not in --pools)", err=True)
    click.echo(f"{'nats-server':<16} {'written':<8} {written.authorization}", err=True)
