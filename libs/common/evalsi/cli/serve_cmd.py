"""``evalsi serve``: NATS and every service on this machine, supervised."""

from __future__ import annotations

import os
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError
from evalsi.evaluators import ENTRY_POINT_GROUP
from evalsi.gate.exposure import NO_AUTH_ENV
from evalsi.service.config import Config


@click.command("serve")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="evalsi.yaml (defaults otherwise).")
@click.option(
    "--state-dir",
    default=".evalsi/serve",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the bundled NATS store, logs and (by default) SQLite and objects live.",
)
@click.option(
    "--datasets-dir",
    type=click.Path(file_okay=False, exists=True),
    help="Run specs may read datasets only below this directory (default: evalsi.yaml's, else the current directory).",
)
@click.option("--host", help="Listen address of the API and OTLP ports; beyond loopback only with an auth section "
              "(or --no-auth).")
@click.option("--http-port", type=int, help="HTTP/JSON API port (default 8080).")
@click.option("--grpc-port", type=int, help="gRPC API port (default 8081).")
@click.option("--otlp-http-port", type=int, help="OTLP/HTTP port of evalsi-ingest (default 4318, ingest.http_port).")
@click.option("--otlp-grpc-port", type=int, help="OTLP/gRPC port of evalsi-ingest (default 4317, ingest.grpc_port).")
@click.option("--no-auth", is_flag=True, default=False,
              help="Authenticate nobody although evalsi.yaml has an auth section (also EVALSI_NO_AUTH=1); warns at "
              "every start.")
@handle_errors
def serve_command(
    config_path: str | None,
    state_dir: str,
    datasets_dir: str | None,
    host: str | None,
    http_port: int | None,
    grpc_port: int | None,
    otlp_http_port: int | None,
    otlp_grpc_port: int | None,
    no_auth: bool,
) -> None:
    """Run Evals.si standalone: nats-server with JetStream, the api, the scheduler, the workers (cpu, judge,
    harness), evalsi-ingest (OTLP on 4318/4317) and evalsi-policy (online policies).

    Every service is its own process on loopback; a crashed one is restarted, and one that keeps crashing
    (more than 5 times in a row within a minute of starting) stops everything with its last log lines
    (exit 1). Every port is checked first: a taken one is exit 2, naming it. One "ready" line says when every
    service answers its /readyz, with the addresses (API, OTLP, metrics). State is SQLite and a local
    directory unless evalsi.yaml points at Postgres and S3; store URLs reach the services through their
    environment, never their command lines. Ctrl-C stops everything cleanly, and no service outlives
    `evalsi serve`, however it ends. A non-loopback --host needs evalsi.yaml's auth section (docs/auth.md), or
    --no-auth to serve unauthenticated on purpose.
    """

    from evalsi.service.supervisor import Supervisor

    state = Path(state_dir)
    config = Config.load(config_path, state_dir=state)  # a database or objects the file leaves out: in state_dir
    api = replace(
        config.api,
        host=config.api.host if host is None else host,
        http_port=config.api.http_port if http_port is None else http_port,
        grpc_port=config.api.grpc_port if grpc_port is None else grpc_port,
    )
    ingest = replace(
        config.ingest,
        http_port=config.ingest.http_port if otlp_http_port is None else otlp_http_port,
        grpc_port=config.ingest.grpc_port if otlp_grpc_port is None else otlp_grpc_port,
    )
    no_auth = no_auth or os.environ.get(NO_AUTH_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    config = replace(config, api=api, ingest=ingest, datasets_dir=datasets_dir or config.datasets_dir,
                     access=replace(config.access, no_auth=no_auth))
    config.validate("the flags" if config_path is None else f"{config_path} with the flags")
    config.access.check(config.api.host, "--host" if host is not None else "api.host")  # refused before anything starts
    # A pack evaluators: names that is not installed: exit 2 now, not an api that exits at every restart. The
    # entry points' names, not the packs (importing them here would slow the start); the api checks the packs.
    unknown = config.connections.packs.unknown_packs({e.name for e in entry_points(group=ENTRY_POINT_GROUP)},
                                                     where=str(config_path or "evalsi.yaml"))
    if unknown:
        raise BadInputError("; ".join(unknown))
    # This process is single-threaded and holds no gRPC channel: the services can be its forks (fast start).
    Supervisor(config, state, echo=lambda line: click.echo(line, err=True), fork_services=True).run()
