"""The ``evalsi-sandboxd`` process: SandboxService over gRPC, persistent sandboxes on the isolation ladder.

    evalsi-sandboxd [--listen unix:.evalsi/sandboxd/sandboxd.sock | --listen 127.0.0.1:7070]
                    [--config evalsi.yaml] [--max-sandboxes N] [--lease 300] [--image-root DIR ...]

By default it listens on a Unix socket in a directory only its user can enter (0700): the sandbox launcher is
internal (§17), reached by the workers on this machine. ``--listen HOST:PORT`` serves TCP; beyond loopback only
with evalsi.yaml's ``auth`` section (or ``--no-auth``), whose credentials every call then presents to the gate
(the action table's ``sandboxes.use``; health stays open). The ladder, the default minimum and the default bounds
come from evalsi.yaml's ``sandbox`` section (docs/sandbox.md); each rung is probed at start, and a ladder with no
usable rung still starts (every Create then fails closed with SANDBOX_UNAVAILABLE) so ``Probe`` can say why.

Every flag has an ``EVALSI_SANDBOXD_*`` variable (``--help`` names them). The address bound is printed as one JSON
line on stdout (``{"event": "listening", "sandboxd": ...}``) once it accepts calls. Exit codes: 0 after a clean
stop (every sandbox destroyed), 1 on an internal error, 2 on bad flags or configuration.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from prometheus_client import Gauge

from evalsi.api.health import Readiness
from evalsi.api.metrics import ApiMetrics
from evalsi.errors import BadInputError
from evalsi.gate.exposure import AccessSettings
from evalsi.sandbox.config import SandboxConfig, load_sandbox_config
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.manager import ManagerLimits, SandboxManager
from evalsi.service.kit import parse_flags, run_service, serve_health
from evalsi.service.lifecycle import Lifecycle
from evalsi.service.settings import LOGGING, METRICS_PORT, Option, option
from evalsi.yaml_files import read_yaml_file

from .server import SandboxServer, check_listen, prepare_socket

log = logging.getLogger("evalsi.sandboxd")

DEFAULT_LISTEN = "unix:.evalsi/sandboxd/sandboxd.sock"
DESCRIPTION = "Run persistent sandboxes on the isolation ladder, failing closed (SandboxService over gRPC)."

OPTIONS = (
    Option("--listen", default=DEFAULT_LISTEN, config="sandboxd.listen", metavar="ADDRESS",
           help="unix:PATH (a Unix socket, mode 0600; a directory made for it is 0700, an existing one others can "
                "write is refused) or HOST:PORT (TCP; beyond loopback only with an auth section); port 0 picks a "
                "free one"),
    Option("--no-auth", switch=True, default=False, shared=True,
           help="authenticate nobody although evalsi.yaml has an auth section; logs a warning at every start"),
    Option("--max-sandboxes", int, 0, "sandboxes alive at once (0: the CPU count); a Create past it waits, then is "
           "refused", config="sandboxd.max_sandboxes"),
    Option("--lease", float, 300.0, "seconds a sandbox lives without a call before it is reaped (a Create may ask "
           "for another, up to --max-lease)", config="sandboxd.lease_s"),
    Option("--max-lease", float, 24 * 3600.0, "the longest lease a Create may ask for, in seconds"),
    Option("--image-root", repeat=True, metavar="DIR",
           help="a directory under which a Create may name an image directory, a tarball, or an OCI image layout or "
                "archive (kind oci) as the sandbox's root"),
    Option("--state-dir", default=".evalsi/sandboxd", config="sandboxd.state_dir",
           help="where snapshots are kept while sandboxd runs (made 0700)"),
    option(METRICS_PORT, help="port for /healthz, /readyz and /metrics (0: none)"),
    *LOGGING,
)


def settings_from_args(argv: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> tuple[
        argparse.Namespace, SandboxConfig, AccessSettings]:
    args = parse_flags("sandboxd", OPTIONS, argv, description=DESCRIPTION,
                       environ=os.environ if environ is None else environ)
    document = read_yaml_file(args.config) if args.config else {}
    where = args.config or "evalsi.yaml"
    try:
        config = load_sandbox_config(document.get("sandbox"), f"{where}: sandbox")
    except BadInputError as exc:
        raise BadInputError(str(exc)) from None
    # A server pulls images only from registries its operator lists (none by default): callers get cached images.
    config = replace(config, images=config.images.for_server())
    access = AccessSettings.from_document(document, no_auth=args.no_auth, where=args.config or "")
    check_listen(args.listen, access)
    if args.max_sandboxes < 0:
        raise BadInputError(f"--max-sandboxes {args.max_sandboxes}: 0 (the CPU count) or more")
    limits(args).check()
    return args, config, access


def limits(args: argparse.Namespace) -> ManagerLimits:
    return ManagerLimits(max_sandboxes=args.max_sandboxes or os.cpu_count() or 1, default_lease_s=args.lease,
                         max_lease_s=args.max_lease)


async def assemble(args: argparse.Namespace, config: SandboxConfig, access: AccessSettings, life: Lifecycle) -> None:
    """Health first, then the ladder's probes, the manager (its stop destroys every sandbox) and its reaper, then
    the gRPC server (stopped first: no call reaches a manager that is closing)."""
    metrics = ApiMetrics()
    await serve_health(life, args.metrics_port, metrics.registry)
    warning = access.check("127.0.0.1" if args.listen.startswith("unix:") else args.listen.rpartition(":")[0])
    if warning:
        log.warning(warning)
    ladder = Ladder(config)
    verdicts = await ladder.probe_all()
    for verdict in verdicts:
        log.info("rung probed", extra={"driver": verdict.driver, "level": verdict.level.label,
                                       "available": verdict.available, "reason": verdict.reason})
    state_dir = Path(args.state_dir).resolve()
    manager = SandboxManager(ladder, state_dir / "snapshots", limits(args))
    Gauge("evalsi_sandboxd_sandboxes", "Sandboxes alive now.", registry=metrics.registry).set_function(
        lambda: manager.count)
    await life.enter("sandboxes", _started(manager), lambda m: m.close())
    await life.spawn("reaper", manager.run_reaper(life.stopping))
    listen = prepare_socket(args.listen)
    image_roots = tuple(Path(root).resolve() for root in args.image_root)
    server = SandboxServer(manager, config, image_roots=image_roots, gate=access.gate(), tls=access.tls(),
                           readiness=Readiness(), metrics=metrics)
    address = await life.enter("grpc", server.start(listen), lambda _: server.stop(5.0))
    print(json.dumps({"event": "listening", "sandboxd": address,
                      "rungs": {v.driver: v.available for v in verdicts}}), flush=True)


async def _started(manager: SandboxManager) -> SandboxManager:
    return manager


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args, config, access = settings_from_args(argv)
    except BadInputError as exc:
        print(f"evalsi-sandboxd: {exc}", file=sys.stderr)
        return 2
    return run_service("sandboxd", partial(assemble, args, config, access), args.log_level, args.log_format)


if __name__ == "__main__":
    sys.exit(main())
