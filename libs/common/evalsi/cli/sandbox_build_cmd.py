"""``evalsi sandbox image build --file Dockerfile``: an environment's Dockerfile image built ahead, without a Docker
engine (docs/sandbox.md, "Images from a Dockerfile").

The same build a harness environment's ``root: {dockerfile: ...}`` gets when its first sandbox opens
(``evalsi.sandbox.image_build``): every RUN in a bwrap sandbox, each step cached by its digest chain in
``sandbox.cache_dir``, so a later build or sandbox finds it there and runs nothing. Prints the image's digest.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import cast

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError
from evalsi.sandbox.access import local_sandbox_config
from evalsi.sandbox.checks import MAX_ALLOW, check_bound, parse_endpoint
from evalsi.sandbox.config import MAX_MEMORY_BYTES, check_timeout
from evalsi.sandbox.image_build import BuildDriver, BuiltImage, build_image
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import NetworkPolicy, RootFilesystem

__all__ = ["build_command"]


@click.command("build", help="Build the image of a Dockerfile (FROM evalsi/runtime, scratch or an OCI image; RUN, "
                             "COPY, ADD, ENV, WORKDIR, ARG, USER, LABEL) into the sandbox cache and print its digest. "
                             "Every RUN runs in a bubblewrap sandbox with the network denied (--allow opens "
                             "endpoints through the logging egress proxy); each step is cached, so building again "
                             "runs nothing. Environments use it with root: {dockerfile: FILE, context: DIR}.")
@click.option("--file", "-f", "dockerfile", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The Dockerfile.")
@click.option("--context", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The build context COPY reads from (default: the Dockerfile's directory).")
@click.option("--allow", multiple=True, metavar="HOST:PORT",
              help=f"An endpoint RUN steps may reach (repeatable, at most {MAX_ALLOW}); default: no network.")
@click.option("--timeout", type=float, default=None,
              help="Wall-clock seconds of each RUN (default: sandbox.resources.timeout).")
@click.option("--memory", type=int, default=None, help="Memory bound of each RUN in bytes (default: "
                                                       "sandbox.resources.memory).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The evalsi.yaml whose sandbox section names the cache, bwrap and the image bounds (default: "
                   "./evalsi.yaml when present).")
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def build_command(dockerfile: Path, context: Path | None, allow: tuple[str, ...], timeout: float | None,
                  memory: int | None, config_path: Path | None, output_format: str) -> None:
    if config_path is not None and not config_path.is_file():
        raise BadInputError(f"--config: {config_path}: no such file")
    config = local_sandbox_config(config_path or Path("evalsi.yaml"))
    if len(allow) > MAX_ALLOW:
        raise BadInputError(f"--allow: {len(allow)} endpoints is over the limit of {MAX_ALLOW}")
    network = NetworkPolicy(tuple(parse_endpoint(item, "--allow") for item in allow))
    resources = config.resources
    if timeout is not None:
        resources = replace(resources, timeout_s=check_timeout(timeout, "--timeout"))
    if memory is not None:
        resources = replace(resources, memory_bytes=check_bound(memory, "--memory", 1 << 20, MAX_MEMORY_BYTES))
    root = RootFilesystem("dockerfile", str(dockerfile), str(context) if context is not None else "")
    driver = cast(BuildDriver, Ladder(config).driver("bwrap"))
    image = asyncio.run(build_image(root, config, driver, network=network, resources=resources))
    if output_format == "json":
        click.echo(json.dumps(image_json(image), indent=2))
        return
    click.echo(f"digest:   {image.digest}")
    click.echo(f"steps:    {image.steps_run} run, {image.steps_cached} cached")
    click.echo(f"workdir:  {image.config.workdir or '/'}")
    click.echo(f"env:      {' '.join(f'{name}={value}' for name, value in image.config.env) or '(none)'}")
    click.echo(f"path:     {image.path}")


def image_json(image: BuiltImage) -> dict[str, object]:
    return {"digest": image.digest, "path": str(image.path), "steps_run": image.steps_run,
            "steps_cached": image.steps_cached, **image.config.to_json()}
