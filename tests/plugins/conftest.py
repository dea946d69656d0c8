"""A real plugin (fixtures/acme_plugin) installed into its own fresh virtualenv, offline, once per test session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalsi.evaluators import Registry
from evalsi.plugins import PluginSet, load_plugins
from evalsi.plugins.manifest import MANIFEST_NAME

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def plugins_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plugins directory holding a copy of the acme plugin (building a wheel writes beside its sources)."""
    root = tmp_path_factory.mktemp("plugins")
    shutil.copytree(FIXTURES / "acme_plugin", root / "acme", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    assert (root / "acme" / MANIFEST_NAME).is_file()
    return root


@pytest.fixture(scope="session")
def venv_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugin-venvs")


@pytest.fixture
def plugins(plugins_dir: Path, venv_cache: Path) -> Iterator[tuple[Registry, PluginSet]]:
    """The built-in packs plus the acme plugin, in a process of its own for this test."""
    registry = Registry.from_entry_points()
    started = load_plugins(registry, plugins_dir, cache_dir=venv_cache)
    try:
        yield registry, started
    finally:
        started.close()
