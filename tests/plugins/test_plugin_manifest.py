"""evalsi-plugin.yaml's checks, the venv cache, and the plugin socket's permissions."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import grpc
import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.evaluators import EvalContext, Registry, evaluator
from evalsi.plugin.v1alpha1 import plugin_pb2, plugin_pb2_grpc
from evalsi.plugins import PluginSet, read_manifest, start_server
from evalsi.plugins.loader import describe_plugins, plugin_manifests
from evalsi.plugins.venv import ensure_venv
from evalsi.v1alpha1.record_pb2 import Record

FIXTURES = Path(__file__).parent / "fixtures"


def _manifest(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evalsi-plugin.yaml"
    path.write_text(text)
    return path


def test_the_fixture_manifest_reads_with_its_limits() -> None:
    manifest = read_manifest(FIXTURES / "acme_plugin" / "evalsi-plugin.yaml")
    assert (manifest.name, manifest.version, manifest.entrypoint) == ("acme/checks", "1.0.0", "acme_checks:pack")
    assert manifest.path == (FIXTURES / "acme_plugin").resolve() and manifest.package == ""
    assert (manifest.timeout_s, manifest.max_batch, manifest.max_message_bytes) == (5.0, 8, 64 << 20)
    assert manifest.startup_timeout_s == 60.0 and manifest.share_host_packages


@pytest.mark.parametrize(("text", "problem"), [
    ("name: Acme\nversion: 1.0.0\n", "name 'Acme' must look like"),
    ("name: acme/x\nversion: one\n", "version 'one' must be semantic"),
    ("name: acme/x\nversion: 1.0.0\nkind: harness\n", "only 'evaluator' plugins are built"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {wasm: {module: a.wasm}}\n", "wasm and image runtimes are not built"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {entrypoint: 'a:b'}}\n", "exactly one of package"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {package: p, entrypoint: nope}}\n", "must be module:attribute"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {package: p, entrypoint: 'a:b', pip: x}}\n",
     "runtime.python: unknown key(s) pip"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {path: ./nowhere, entrypoint: 'a:b'}}\n", "no pyproject.toml"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {package: p, entrypoint: 'a:b'}}\nlimits: {timeout: 1h}\n",
     "limits.timeout: must be more than 0s and at most 600s"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {package: p, entrypoint: 'a:b'}}\nlimits: {max_batch: 0}\n",
     "limits.max_batch: must be an integer from 1 to 1024"),
    ("name: acme/x\nversion: 1.0.0\nruntime: {python: {package: p, entrypoint: 'a:b'}}\nextra: 1\n",
     "unknown key(s) extra"),
    ("name: acme/x\nversion: 1.0.0\ntier: native\nruntime: {python: {package: p, entrypoint: 'a:b'}}\n",
     "tier 'native': accepted: community, wrapped"),
    ("name: acme/x\nversion: 1.0.0\ntier: wrapped\nruntime: {python: {package: p, entrypoint: 'a:b'}}\n",
     "upstream: a wrapped plugin names its pinned upstream release"),
    ("name: acme/x\nversion: 1.0.0\nupstream: x==1\nruntime: {python: {package: p, entrypoint: 'a:b'}}\n",
     "only a wrapped one does"),
])

def test_a_bad_manifest_names_the_file_and_key(tmp_path: Path, text: str, problem: str) -> None:
    path = _manifest(tmp_path, text)
    with pytest.raises(BadInputError) as raised:
        read_manifest(path)
    assert problem in str(raised.value) and str(path) in str(raised.value)


def test_a_wrapped_plugin_names_its_upstream(tmp_path: Path) -> None:
    manifest = read_manifest(_manifest(tmp_path, "name: acme/x\nversion: 1.0.0\ntier: wrapped\n"
                                                 "upstream: deepeval==4.3.1\n"
                                                 "runtime: {python: {package: p, entrypoint: 'a:b'}}\n"))
    assert (manifest.tier, manifest.upstream) == ("wrapped", "deepeval==4.3.1")
    community = read_manifest(FIXTURES / "acme_plugin" / "evalsi-plugin.yaml")
    assert (community.tier, community.upstream) == ("community", "")


def test_the_venv_is_built_once_per_digest(plugins_dir: Path, venv_cache: Path,
                                           plugins: tuple[Registry, PluginSet]) -> None:
    manifest = read_manifest(plugins_dir / "acme" / "evalsi-plugin.yaml")
    venv = ensure_venv(manifest, venv_cache)  # built by the plugins fixture already
    ready = venv / ".evalsi-plugin-ready"
    built_at = ready.stat().st_mtime_ns
    started = time.monotonic()
    assert ensure_venv(manifest, venv_cache) == venv and ready.stat().st_mtime_ns == built_at
    assert time.monotonic() - started < 1.0  # reused: no pip, no network
    assert [p for p in venv_cache.iterdir() if p.name.startswith(".building-")] == []
    # Built from a copy: the plugin's own directory (read-only, or inside an installed package) is never written.
    assert sorted(p.name for p in (plugins_dir / "acme").iterdir()) == sorted(
        p.name for p in (FIXTURES / "acme_plugin").iterdir() if p.name != "build" and not p.name.endswith(".egg-info"))
    # Its own interpreter environment, with the plugin installed in it and not in this one.
    assert list(venv.glob("lib/python*/site-packages/acme_checks/__init__.py"))
    with pytest.raises(ModuleNotFoundError):
        __import__("acme_checks")


def test_a_changed_manifest_gets_its_own_venv(plugins_dir: Path, tmp_path: Path) -> None:
    manifest = read_manifest(plugins_dir / "acme" / "evalsi-plugin.yaml")
    other = _manifest(tmp_path, (plugins_dir / "acme" / "evalsi-plugin.yaml").read_text()
                      .replace("path: .", f"path: {plugins_dir / 'acme'}").replace("max_batch: 8", "max_batch: 9"))
    assert read_manifest(other).digest != manifest.digest


@evaluator("local/echo", version="1.0.0", requires=["output"])
def echo(record: Record) -> bool:
    return bool(record.output.text)


def test_the_plugin_socket_is_private_and_answers(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    server = start_server([echo], private / "p.sock")
    try:
        assert stat.S_IMODE((private / "p.sock").stat().st_mode) == 0o600
        with grpc.insecure_channel(f"unix:{private / 'p.sock'}") as channel:
            described = plugin_pb2_grpc.EvaluatorPluginServiceStub(channel).Describe(plugin_pb2.DescribeRequest())
        assert [m.name for m in described.evaluators] == ["local/echo"] and described.protocol == 1
    finally:
        server.stop(None)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    with pytest.raises(BadInputError, match="must be private \\(0700\\), is 0755"):
        start_server([echo], shared / "p.sock")


def test_a_plugins_dir_must_exist(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not a directory"):
        plugin_manifests(tmp_path / "missing")
    assert plugin_manifests(tmp_path) == []


async def test_described_plugins_resolve_but_run_on_workers(plugins_dir: Path, venv_cache: Path) -> None:
    registry = Registry.from_entry_points()
    describe_plugins(registry, plugins_dir, cache_dir=venv_cache)
    ev = registry.resolve("acme/has-word")
    assert ev.pool == "cpu" and registry.packs["acme/checks"].tier == "community"
    with pytest.raises(InfraError, match="only described here: workers run plugins"):
        await ev.fn(Record(id="a"), EvalContext(), word="ok")
