"""``evalsi sandbox probe``, ``evalsi sandbox run`` and ``evalsi sandbox image``: the isolation ladder in this
process, for operators and tests.

All read the ``sandbox:`` section of evalsi.yaml (``--config``, else ./evalsi.yaml when present). ``run`` walks the
ladder strongest first, takes the first usable rung meeting ``--min-isolation``, and runs the command there; when no
rung meets it, it prints SANDBOX_UNAVAILABLE and exits non-zero, and nothing runs. ``image`` builds the runtime image
(the default root) when it is missing and describes it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import EXIT_INTERNAL, handle_errors
from evalsi.cli.sandbox_build_cmd import build_command
from evalsi.cli.sandbox_image_cmd import ls_command, pull_command
from evalsi.cli.sandbox_kernel_cmd import kernel_group
from evalsi.errors import BadInputError
from evalsi.sandbox.access import local_sandbox_config
from evalsi.sandbox.checks import MAX_ALLOW, check_bound, parse_endpoint
from evalsi.sandbox.config import (
    MAX_MEMORY_BYTES,
    MAX_PIDS,
    SandboxConfig,
    check_timeout,
    root_from_path,
)
from evalsi.sandbox.ladder import DRIVERS, Ladder
from evalsi.sandbox.model import (
    EgressEvent,
    ExecResult,
    IsolationReport,
    Level,
    NetworkPolicy,
    Outcome,
    ProbeVerdict,
    SandboxSpec,
    SandboxUnavailable,
)
from evalsi.sandbox.runtime_image import ensure_runtime_image, image_summary

# Exit codes of `sandbox run` besides the program's own (as timeout(1) and env(1) use them).
EXIT_TIMEOUT = 124
EXIT_DENIED = 125
_LEVELS = [level.label for level in sorted(Level, reverse=True) if level is not Level.NONE]


@click.group(help="Sandboxes for untrusted code: probe the isolation ladder, run a command on it (docs/sandbox.md).")
def sandbox() -> None:
    pass


def _config_option(fn: Any) -> Any:
    return click.option(
        "--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
        help="The evalsi.yaml whose sandbox section configures the ladder (default: ./evalsi.yaml when present).",
    )(fn)


def _ladder_option(fn: Any) -> Any:
    return click.option(
        "--ladder", default=None, metavar="D1,D2",
        help=f"Driver names to try, strongest first (default: sandbox.ladder). Registered: {', '.join(DRIVERS)}.",
    )(fn)


@sandbox.command("probe", help="Probe each rung functionally (its real profile against `true`) and print its "
                               "verdict, level and enforcement. Default: every registered driver.")
@_config_option
@_ladder_option
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def probe_command(config_path: Path | None, ladder: str | None, output_format: str) -> None:
    config = _load_config(config_path)
    names = _parse_ladder(ladder) if ladder else tuple(DRIVERS)
    instance = Ladder(config)
    verdicts = asyncio.run(instance.probe_all(names))
    if output_format == "json":
        click.echo(json.dumps({"ladder": list(instance.names), "on_demand": list(instance.on_demand),
                               "rungs": [_verdict_json(v) for v in verdicts]}, indent=2))
        return
    click.echo(f"{'driver':<12} {'level':<11} {'available':<10} {'enforcement':<12} reason")
    for verdict in verdicts:
        click.echo(f"{verdict.driver:<12} {verdict.level.label:<11} {'yes' if verdict.available else 'no':<10} "
                   f"{verdict.enforcement if verdict.available else '-':<12} "
                   f"{verdict.reason or '; '.join(verdict.not_enforced)}")
    click.echo(f"ladder: {', '.join(instance.names) or '(empty)'}"
               + (f"; on demand (a minimum above the ladder's): {', '.join(instance.on_demand)}"
                  if instance.on_demand else ""))


@sandbox.command("run", help="Run CMD ARGS... on the strongest usable rung meeting --min-isolation. The program's "
                             "stdout and stderr pass through (table) or come in one JSON object (json: outcome, "
                             "isolation, stdout, stderr). Exit status: the program's own for an exit; 124 for a "
                             "timeout; the program's status (125 when it has none) for a denial; 1 for a runner "
                             "failure or when no rung meets the minimum (SANDBOX_UNAVAILABLE: nothing ran); 2 for "
                             "bad input.")
@click.option("--min-isolation", type=click.Choice(_LEVELS), default=None,
              help="The weakest isolation acceptable (default: sandbox.min_isolation, namespaced).")
@_ladder_option
@click.option("--network", default="deny", show_default=True, metavar="deny|allow:HOST:PORT,...",
              help="Egress: deny (loopback only), or an allowlist of HOST:PORT through the egress proxy.")
@click.option("--timeout", type=float, default=None, help="Wall-clock seconds (default: sandbox.resources.timeout).")
@click.option("--memory", type=int, default=None, help="Memory bound in bytes (default: 536870912).")
@click.option("--pids", type=int, default=None, help="Process bound (default: 256).")
@click.option("--root", default=None, metavar="runtime|host|PATH|oci:REF",
              help="Root filesystem: runtime (the runtime image: the host's Python and busybox, nothing else of the "
                   "host; see `evalsi sandbox image`), host (the host's /usr read-only, for trusted code only), or "
                   "an image directory or a tarball, or oci:REF / oci:PATH (an OCI image: `evalsi sandbox image "
                   "pull`) (default: sandbox.root, else runtime).")
@_config_option
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.argument("command", nargs=-1, required=True)
@handle_errors
def run_command(min_isolation: str | None, ladder: str | None, network: str, timeout: float | None,
                memory: int | None, pids: int | None, root: str | None, config_path: Path | None,
                output_format: str, command: tuple[str, ...]) -> None:
    config = _load_config(config_path)
    resources = config.resources
    if timeout is not None:
        resources = replace(resources, timeout_s=check_timeout(timeout, "--timeout"))
    if memory is not None:
        resources = replace(resources, memory_bytes=check_bound(memory, "--memory", 1 << 20, MAX_MEMORY_BYTES))
    if pids is not None:
        resources = replace(resources, pids=check_bound(pids, "--pids", 1, MAX_PIDS))
    spec = SandboxSpec(
        min_isolation=Level.parse(min_isolation, "--min-isolation") if min_isolation else config.min_isolation,
        ladder=_parse_ladder(ladder) if ladder else None, network=parse_network(network), resources=resources,
        root=root_from_path(root, "--root") if root is not None else config.root)
    streaming = output_format == "table"
    try:
        # Probed with the root the command runs under: a rung that cannot show it is unavailable (Landlock).
        result, egress = asyncio.run(_run(Ladder(replace(config, root=spec.root)), spec, list(command), streaming))
    except SandboxUnavailable as exc:
        _unavailable(exc, output_format)
        sys.exit(EXIT_INTERNAL)
    if output_format == "json":
        shown = result_json(result)
        if spec.network.allow:  # the egress proxy's log: every connection the program made or tried
            shown["egress"] = [egress_json(event) for event in egress]
        click.echo(json.dumps(shown, indent=2))
    else:
        click.echo(_summary(result), err=True)
        for event in egress:
            click.echo(f"  egress: {'allowed' if event.allowed else 'denied'} {event.host}:{event.port}"
                       f"{f' ({event.reason})' if event.reason else ''}", err=True)
    sys.exit(exit_status(result.outcome))


@sandbox.group("image", invoke_without_command=True,
               help="The runtime image, the default root of every sandbox: build it when missing (about a second) and "
                    "print its path, digest, size and contents. It holds the host's Python with its standard library "
                    "and shared libraries, busybox's sh and core utilities, a minimal /etc, /tmp and /workspace; "
                    "nothing else of the host. Give your own with sandbox.root: an image directory, a tarball, or "
                    "an OCI image (oci:REF or oci:PATH), which `pull` fetches into the cache and `ls` lists; "
                    "`build` builds an image from a Dockerfile.")
@_config_option
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.pass_context
@handle_errors
def image_group(ctx: click.Context, config_path: Path | None, output_format: str) -> None:
    if ctx.invoked_subcommand is not None:
        return
    config = _load_config(config_path)
    summary = image_summary(ensure_runtime_image(config.cache_dir))
    if output_format == "json":
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"path:     {summary['path']}")
    click.echo(f"digest:   {summary['digest']}")
    click.echo(f"size:     {summary['size_bytes']} bytes in {summary['files']} files")
    click.echo(f"python:   {summary['python']} (standard library, {len(summary['shared_libraries'])} shared "
               "libraries)")
    click.echo(f"shell:    {summary['shell']} ({summary['busybox_applets']} busybox applets)")
    click.echo(f"/etc:     {', '.join(summary['etc'])}")
    if config.root.kind != "runtime":
        click.echo(f"note: sandbox.root is {config.root.kind} {config.root.path}".rstrip()
                   + "; sandboxes of this configuration do not use the runtime image")


async def _run(ladder: Ladder, spec: SandboxSpec, argv: list[str],
               streaming: bool) -> tuple[ExecResult, tuple[EgressEvent, ...]]:
    session = await ladder.create(spec)
    try:
        result = await session.exec(argv, on_output=_pass_through if streaming else None)
        logged = getattr(session, "egress_log", None)  # sessions behind the egress proxy (EgressLogging)
        return result, tuple(logged()) if callable(logged) else ()
    finally:
        await session.destroy()


def egress_json(event: EgressEvent) -> dict[str, Any]:
    return {"time": event.time, "host": event.host, "port": event.port, "allowed": event.allowed,
            "address": event.address, "bytes_sent": event.bytes_sent, "bytes_received": event.bytes_received,
            "duration_s": event.duration_s, "reason": event.reason}


async def _pass_through(stream: str, chunk: bytes) -> None:
    target = sys.stdout.buffer if stream == "stdout" else sys.stderr.buffer
    target.write(chunk)
    target.flush()


def exit_status(outcome: Outcome) -> int:
    if outcome.kind == "exit":
        return outcome.code or 0
    if outcome.kind == "timeout":
        return EXIT_TIMEOUT
    if outcome.kind == "denied":
        return outcome.code if outcome.code else EXIT_DENIED
    return EXIT_INTERNAL


def parse_network(text: str) -> NetworkPolicy:
    """``deny`` or ``allow:HOST:PORT,HOST:PORT`` (IPv6 hosts in brackets)."""
    if text == "deny":
        return NetworkPolicy()
    if not text.startswith("allow:") or not text[len("allow:"):]:
        raise BadInputError(f"--network: {text!r}; accepted: deny, or allow:HOST:PORT,... such as "
                            "allow:pypi.org:443,files.pythonhosted.org:443")
    items = text[len("allow:"):].split(",")
    if len(items) > MAX_ALLOW:
        raise BadInputError(f"--network: {len(items)} endpoints is over the limit of {MAX_ALLOW}")
    return NetworkPolicy(tuple(parse_endpoint(item.strip(), "--network") for item in items))


def result_json(result: ExecResult) -> dict[str, Any]:
    return {"outcome": outcome_json(result.outcome), "isolation": isolation_json(result.isolation),
            "stdout": result.stdout.decode("utf-8", "replace"), "stderr": result.stderr.decode("utf-8", "replace"),
            "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
            "duration_s": round(result.duration_s, 6)}


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    shown: dict[str, Any] = {"kind": outcome.kind}
    if outcome.code is not None:
        shown["code"] = outcome.code
    if outcome.kind == "denied":
        shown["effect"] = outcome.effect
    if outcome.kind == "runner_failure":
        shown["signature"] = outcome.signature
    return shown


def isolation_json(report: IsolationReport) -> dict[str, Any]:
    return {"driver": report.driver, "level": report.level.label, "enforcement": report.enforcement,
            "bounds": dict(report.bounds), "not_enforced": list(report.not_enforced),
            "requested": report.requested.label}


def _verdict_json(verdict: ProbeVerdict) -> dict[str, Any]:
    return {"driver": verdict.driver, "level": verdict.level.label, "available": verdict.available,
            "enforcement": verdict.enforcement if verdict.available else None, "reason": verdict.reason,
            "not_enforced": list(verdict.not_enforced)}


def _unavailable(exc: SandboxUnavailable, output_format: str) -> None:
    error = {"code": exc.code, "message": str(exc), "requested": exc.requested.label,
             "tried": [_verdict_json(verdict) for verdict in exc.verdicts]}
    if output_format == "json":
        click.echo(json.dumps({"error": error}, indent=2))
    else:
        click.echo(f"error: {exc}", err=True)


def _summary(result: ExecResult) -> str:
    outcome = ", ".join(f"{key}={value}" for key, value in outcome_json(result.outcome).items())
    report = result.isolation
    lines = [f"outcome: {outcome}", f"isolation: {report.driver} ({report.level.label}, {report.enforcement})"]
    lines += [f"  {name}: {value}" for name, value in report.bounds.items()]
    lines += [f"  not enforced: {item}" for item in report.not_enforced]
    return "\n".join(lines)


def _parse_ladder(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if name not in DRIVERS:
            raise BadInputError(f"--ladder: {name!r} is not a sandbox driver; accepted: {', '.join(DRIVERS)}")
    if not names:
        raise BadInputError(f"--ladder: empty; accepted: driver names such as {', '.join(DRIVERS)}")
    return names


def _load_config(path: Path | None) -> SandboxConfig:
    """--config FILE (which must exist), else ./evalsi.yaml when there is one: the one reader the code pack uses."""
    if path is not None and not path.is_file():
        raise BadInputError(f"--config: {path}: no such file")
    return local_sandbox_config(path or Path("evalsi.yaml"))


image_group.add_command(pull_command)  # OCI images: sandbox_image_cmd.py
image_group.add_command(ls_command)
image_group.add_command(build_command)  # images from a Dockerfile: sandbox_build_cmd.py
sandbox.add_command(kernel_group)  # the vm rung's small guest kernel: sandbox_kernel_cmd.py

__all__ = ["egress_json", "image_group", "parse_network", "result_json", "run_command", "sandbox"]
