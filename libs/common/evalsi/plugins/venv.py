"""The plugin's own virtualenv: built once per manifest digest, then reused without touching the network.

``uv`` builds it when on PATH, else ``python -m venv`` and pip. A build goes to a staging directory renamed into
place only when complete, so a crashed or concurrent build never leaves a half-built venv that looks ready.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

from evalsi.errors import InfraError
from evalsi.plugins.manifest import PluginManifest

_READY = ".evalsi-plugin-ready"
# A build that takes longer than this (a huge dependency tree on a slow mirror) is stopped.
BUILD_TIMEOUT_S = 900.0
# How much of a failed build's output goes into the error.
_OUTPUT_TAIL = 4000


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise InfraError(f"{what}: did not finish within {BUILD_TIMEOUT_S:g}s") from None
    if done.returncode != 0:
        raise InfraError(f"{what} failed (exit {done.returncode}): {(done.stdout + done.stderr)[-_OUTPUT_TAIL:]}")


def _host_paths() -> list[str]:
    """Where this interpreter finds evalsi and its dependencies: shared with a plugin that asks for them."""
    import evalsi

    return [str(Path(evalsi.__file__).resolve().parent.parent), *site.getsitepackages()]


def _install(manifest: PluginManifest, staging: Path) -> None:
    python = str(venv_python(staging))
    uv = shutil.which("uv")
    if uv:
        _run([uv, "venv", "--python", sys.executable, str(staging)], f"plugin {manifest.name}: uv venv")
        pip = [uv, "pip", "install", "--python", python]
    else:
        _run([sys.executable, "-m", "venv", str(staging)], f"plugin {manifest.name}: python -m venv")
        pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
    if manifest.share_host_packages:
        # Appended after the venv's own site-packages, so the plugin's pins win over the host's copies. Written
        # before installing, so pip sees what the host already has and installs only what is missing or pinned
        # differently (a framework's large dependency tree is mostly the host's own: minutes less per build).
        site_dir = next(staging.glob("lib/python*/site-packages"))
        (site_dir / "evalsi-host-packages.pth").write_text("\n".join(_host_paths()) + "\n")
    if manifest.path is not None:
        # A local package's wheel is built offline by this interpreter's own build backend (setuptools), not one
        # fetched into an isolated build environment; its dependencies, if any, resolve as pip resolves them. It is
        # built from a copy: setuptools writes build/ and *.egg-info beside the sources, and the plugin's directory
        # may be read-only or inside an installed package (the adapters Evals.si ships).
        wheels, source = staging / ".wheels", staging / ".source"
        shutil.copytree(manifest.path, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
              "--disable-pip-version-check", "-w", str(wheels), str(source)],
             f"plugin {manifest.name}: building a wheel of {manifest.path}")
        _run([*pip, *map(str, sorted(wheels.glob("*.whl")))], f"plugin {manifest.name}: installing {manifest.path}")
        shutil.rmtree(wheels)
        shutil.rmtree(source)
    else:
        _run([*pip, manifest.package], f"plugin {manifest.name}: installing {manifest.package}")


def ensure_venv(manifest: PluginManifest, cache_dir: Path) -> Path:
    """The plugin's venv under ``cache_dir``, built now if no complete one exists for this manifest digest."""
    venv = cache_dir / f"{manifest.name.replace('/', '--')}-{manifest.digest[:16]}"
    if (venv / _READY).is_file():
        return venv
    cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_dir))
    try:
        _install(manifest, staging)
        (staging / _READY).write_text(manifest.digest + "\n")
        try:
            os.rename(staging, venv)
        except OSError:
            if not (venv / _READY).is_file():  # another process built it first: theirs is as good
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return venv
