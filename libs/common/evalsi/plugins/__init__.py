"""Evaluator plugins in their own processes: the SDK a plugin serves with, and the host that runs plugins.

Plugin side: ``serve(pack_or_evaluators, socket_path)``. Host side: ``load_plugins(registry, directory)`` starts
each ``<directory>/<plugin>/evalsi-plugin.yaml`` in its own virtualenv and registers proxies for its evaluators.
The protocol is ``proto/evalsi/plugin/v1alpha1/plugin.proto``; docs/plugins.md is the guide.
"""

from evalsi.plugins.host import PluginHost
from evalsi.plugins.loader import (
    PLUGINS_DIR,
    PLUGINS_DIR_ENV,
    PluginSet,
    default_cache_dir,
    describe_plugins,
    load_plugins,
    start_host,
)
from evalsi.plugins.manifest import MANIFEST_NAME, PluginManifest, read_manifest
from evalsi.plugins.server import serve, start_server

__all__ = ["MANIFEST_NAME", "PLUGINS_DIR", "PLUGINS_DIR_ENV", "PluginHost", "PluginManifest", "PluginSet",
           "default_cache_dir", "describe_plugins", "load_plugins", "read_manifest", "serve", "start_host",
           "start_server"]
