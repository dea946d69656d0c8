"""``evalsi sandbox image pull REF`` and ``evalsi sandbox image ls``: OCI images as sandbox roots, for operators.

``pull`` fetches an image from a registry listed in evalsi.yaml's ``sandbox.images.registries`` (embedded default:
docker.io) into the sandbox cache (``sandbox.cache_dir``), unpacked and keyed by its manifest's digest; a tag is
resolved afresh. ``evalsi-sandboxd`` serves images from the same cache even when it may pull from no registry
itself (its default). ``ls`` lists the cached images with the references that resolve to them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError
from evalsi.sandbox.access import local_sandbox_config
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.oci import CachedImage, ImageCache

__all__ = ["ls_command", "pull_command"]

_CONFIG_HELP = "The evalsi.yaml whose sandbox section names the cache and the registries (default: ./evalsi.yaml)."


def _config(path: Path | None) -> SandboxConfig:
    if path is not None and not path.is_file():
        raise BadInputError(f"--config: {path}: no such file")
    return local_sandbox_config(path or Path("evalsi.yaml"))


def image_json(image: CachedImage) -> dict[str, Any]:
    return {"references": list(image.references), "digest": image.digest, "size_bytes": image.bytes,
            "files": image.files, "path": str(image.path)}


@click.command("pull", help="Pull REF (such as python:3.12-slim or ghcr.io/org/image@sha256:...) from its registry "
                            "into the sandbox cache, so sandboxes can use it as their root (root: oci:REF). Only "
                            "registries listed in sandbox.images.registries are contacted (default: docker.io); "
                            "every blob's digest is verified.")
@click.argument("reference")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=_CONFIG_HELP)
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def pull_command(reference: str, config_path: Path | None, output_format: str) -> None:
    config = _config(config_path)
    image = ImageCache(config.cache_dir, config.images).pull(reference, "REF")
    if output_format == "json":
        click.echo(json.dumps(image_json(image), indent=2))
        return
    click.echo(f"pulled:   {', '.join(image.references)}")
    click.echo(f"digest:   {image.digest}")
    click.echo(f"size:     {image.bytes} bytes in {image.files} files")
    click.echo(f"path:     {image.path}")


@click.command("ls", help="List the OCI images in the sandbox cache: references, digest, unpacked size.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=_CONFIG_HELP)
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def ls_command(config_path: Path | None, output_format: str) -> None:
    config = _config(config_path)
    images = ImageCache(config.cache_dir, config.images).images()
    if output_format == "json":
        click.echo(json.dumps([image_json(image) for image in images], indent=2))
        return
    rows = [(", ".join(image.references) or "(by path or digest)", image.digest[:19], f"{image.bytes}")
            for image in images]
    widths = [max([len(header), *(len(row[index]) for row in rows)])
              for index, header in enumerate(("REFERENCE", "DIGEST", "BYTES"))]
    for row in [("REFERENCE", "DIGEST", "BYTES"), *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
