"""``evalsi sandbox kernel build`` and ``evalsi sandbox kernel show``: the vm rung's small guest kernel, for operators.

``build`` compiles Linux from Debian's ``linux-source-6.1`` with the guest's config fragment (minutes on two cores,
once: the result is cached by digest under ``sandbox.cache_dir``/vm/kernel); ``show`` says what is cached and which
kernel the vm rung will boot (``sandbox.drivers.qemu.kernel``: auto, small or debian).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from evalsi.cli._common import handle_errors
from evalsi.errors import BadInputError, EvalsiError
from evalsi.sandbox.access import local_sandbox_config
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.vm.boot_kernel import choose_kernel
from evalsi.sandbox.vm.driver import NAME, parse_options
from evalsi.sandbox.vm.small_kernel import FRAGMENT, SmallKernel, build_small_kernel, find_small_kernel, kernel_inputs

__all__ = ["kernel_group"]

_CONFIG_HELP = "The evalsi.yaml whose sandbox section names the cache and the qemu rung's options (default: " \
               "./evalsi.yaml)."
_CACHE_HELP = "The sandbox cache directory (default: sandbox.cache_dir); the kernel goes under its vm/kernel."


def _config(path: Path | None, cache_dir: Path | None) -> SandboxConfig:
    if path is not None and not path.is_file():
        raise BadInputError(f"--config: {path}: no such file")
    config = local_sandbox_config(path or Path("evalsi.yaml"))
    return replace(config, cache_dir=cache_dir) if cache_dir is not None else config


def kernel_json(kernel: SmallKernel) -> dict[str, Any]:
    return {"path": str(kernel.path), "digest": kernel.digest, "version": kernel.version,
            "size_bytes": kernel.size_bytes, "fragment_digest": kernel.fragment_digest, "config": str(kernel.config),
            "build_seconds": kernel.build_seconds, "toolchain": kernel.toolchain}


@click.group("kernel", help="The vm rung's small guest kernel: Linux from Debian's linux-source-6.1 with only what "
                            "the microVM guest uses built in (under TCG it cold-boots in about half the time and "
                            "CPU of Debian's packaged kernel). Build it once; the rung boots it by default when it is "
                            "built.")
def kernel_group() -> None:
    pass


@kernel_group.command("build", help="Build the small guest kernel into the sandbox cache when it is not there: "
                                    "make allnoconfig plus the guest's config fragment (every option it asks for "
                                    "is checked in the final .config), then make vmlinux. Minutes on two cores, "
                                    "once: the result is cached by the digest of the source tarball, the fragment "
                                    "and the compiler. Needs `apt-get install -y --no-install-recommends "
                                    "linux-source-6.1 build-essential flex bison bc libelf-dev`.")
@click.option("--jobs", type=click.IntRange(1, 256), default=None,
              help="Parallel compile jobs (default: the CPU count).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=_CONFIG_HELP)
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def build_command(jobs: int | None, config_path: Path | None, cache_dir: Path | None, output_format: str) -> None:
    config = _config(config_path, cache_dir)
    kernel, built = build_small_kernel(config.cache_dir / "vm", jobs=jobs,
                                       progress=lambda step: click.echo(f"kernel: {step}", err=True))
    if output_format == "json":
        click.echo(json.dumps({**kernel_json(kernel), "built_now": built}, indent=2))
        return
    click.echo(f"{'built' if built else 'cached'}:   small {kernel.version} ({kernel.size_bytes} bytes"
               + (f", {kernel.build_seconds:g} s)" if built else ")"))
    click.echo(f"digest:   {kernel.digest}")
    click.echo(f"path:     {kernel.path}")


@kernel_group.command("show", help="Where the small guest kernel is cached (path, digest, version, size, config "
                                   "fragment digest) and which kernel the vm rung will boot under this "
                                   "configuration's sandbox.drivers.qemu.kernel (auto: the small one when built, "
                                   "else Debian's).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help=_CONFIG_HELP)
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help=_CACHE_HELP)
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def show_command(config_path: Path | None, cache_dir: Path | None, output_format: str) -> None:
    config = _config(config_path, cache_dir)
    options = parse_options(config.driver_options(NAME))
    vm_cache = config.cache_dir / "vm"
    inputs, small, absent = None, None, ""
    try:
        inputs = kernel_inputs()
        small = find_small_kernel(vm_cache, inputs)
    except EvalsiError as exc:
        absent = str(exc)
    try:
        boots = choose_kernel(options.kernel, vm_cache, options.kernel_version).label
    except EvalsiError as exc:
        boots = f"none: {exc}"
    facts: dict[str, Any] = {
        "small": kernel_json(small) if small is not None else None,
        "expected_digest": inputs.digest() if inputs is not None else None,
        "fragment": str(FRAGMENT), "fragment_digest": inputs.fragment_digest() if inputs is not None else None,
        "cache": str(vm_cache / "kernel"), "option": options.kernel, "vm_rung_boots": boots}
    if absent:
        facts["reason"] = absent
    if output_format == "json":
        click.echo(json.dumps(facts, indent=2))
        return
    if small is not None:
        click.echo(f"small:    {small.version}, {small.size_bytes} bytes, built in {small.build_seconds:g} s")
        click.echo(f"path:     {small.path}")
        click.echo(f"digest:   {small.digest}")
    else:
        click.echo(f"small:    not built ({absent or 'run `evalsi sandbox kernel build`'})")
        click.echo(f"cache:    {facts['cache']}")
    click.echo(f"fragment: {FRAGMENT} (digest {facts['fragment_digest'] or '-'})")
    click.echo(f"vm rung:  {options.kernel} -> {boots}")
