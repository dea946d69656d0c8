"""Loading a directory of plugins into a Registry: each ``<dir>/<plugin>/evalsi-plugin.yaml`` gets its venv (built
once, cached by the manifest's digest), a supervised process, and proxies registered as the pack it names.

The directory comes from server configuration (``--plugins-dir``, ``EVALSI_PLUGINS_DIR``); no request names a
plugin path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from evalsi.errors import BadInputError
from evalsi.evaluators import Pack, Registry
from evalsi.plugins.host import PluginHost
from evalsi.plugins.manifest import MANIFEST_NAME, PluginManifest, read_manifest
from evalsi.plugins.process import PluginProcess
from evalsi.plugins.proxies import proxy_evaluators
from evalsi.plugins.venv import ensure_venv, venv_python
from evalsi.service.settings import Option

# Read by every service (EVALSI_PLUGINS_DIR): workers run the plugins, the api, scheduler and policy engine know
# their evaluators (refs, pools, requirements) from their Describe answers.
PLUGINS_DIR = Option("--plugins-dir", default="", shared=True, metavar="DIR",
                     help="a directory of subprocess evaluator plugins (<dir>/<plugin>/evalsi-plugin.yaml), each "
                          "in its own virtualenv cached under EVALSI_PLUGINS_CACHE (docs/plugins.md)")
PLUGINS_DIR_ENV = PLUGINS_DIR.variable("")
PLUGINS_CACHE_ENV = "EVALSI_PLUGINS_CACHE"
# Plugins one directory may hold: each is a process.
MAX_PLUGINS = 64


def default_cache_dir() -> Path:
    """Where plugin venvs are kept: ``EVALSI_PLUGINS_CACHE``, else ``~/.cache/evalsi/plugins``."""
    configured = os.environ.get(PLUGINS_CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "evalsi" / "plugins"


def plugin_manifests(directory: Path) -> list[Path]:
    """``<directory>/*/evalsi-plugin.yaml``, sorted; a missing directory is an error naming it."""
    if not directory.is_dir():
        raise BadInputError(f"plugins directory {directory}: not a directory")
    found = sorted(directory.glob(f"*/{MANIFEST_NAME}"))
    if len(found) > MAX_PLUGINS:
        raise BadInputError(f"plugins directory {directory}: {len(found)} plugins, at most {MAX_PLUGINS}")
    return found


def start_host(manifest: PluginManifest, cache_dir: Path) -> PluginHost:
    venv = ensure_venv(manifest, cache_dir)
    return PluginHost(manifest, lambda: PluginProcess(manifest, [str(venv_python(venv)), "-m", "evalsi.plugins.main"]))


class PluginSet:
    """Started plugins, their evaluators added to a registry; ``close()`` stops every process."""

    def __init__(self) -> None:
        self.hosts: list[PluginHost] = []

    def add(self, registry: Registry, host: PluginHost) -> None:
        self.hosts.append(host)
        # Community unless the manifest says it wraps a pinned framework release (an adapter): like a pack from
        # another distribution, a plugin's code is not Evals.si's to vouch for as native.
        manifest = host.manifest
        registry.add_pack(Pack(name=manifest.pack, evaluators=tuple(proxy_evaluators(host)), tier=manifest.tier,
                               upstream=manifest.upstream,
                               description=manifest.description or f"plugin {manifest.source}"))

    def __enter__(self) -> PluginSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for host in self.hosts:
            host.close()
        self.hosts.clear()


def load_plugins(registry: Registry, directory: str | Path, *, cache_dir: Path | None = None,
                 start: Callable[[PluginManifest, Path], PluginHost] = start_host) -> PluginSet:
    """Start every plugin under ``directory`` and register its evaluators; on any failure, stop those started."""
    plugins = PluginSet()
    try:
        for path in plugin_manifests(Path(directory)):
            plugins.add(registry, start(read_manifest(path), cache_dir or default_cache_dir()))
    except BaseException:
        plugins.close()
        raise
    return plugins


def describe_plugins(registry: Registry, directory: str | Path, *, cache_dir: Path | None = None) -> None:
    """Register the evaluators of every plugin under ``directory`` from its Describe answer, without keeping its
    process: for services that resolve and route evaluators but never call them (the api, the scheduler). A call
    to one of these proxies is an infrastructure error saying the plugin runs on workers."""
    load_plugins(registry, directory, cache_dir=cache_dir).close()
