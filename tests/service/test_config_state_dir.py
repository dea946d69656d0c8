"""`evalsi serve --state-dir`: the metadata database and the object directory evalsi.yaml leaves out live there, with
or without --config; what the file names wins."""

from __future__ import annotations

from pathlib import Path

import yaml

from evalsi.service.config import Config
from evalsi.service.defaults import DEFAULT_METADATA_URL, DEFAULT_OBJECTS_URL


def _file(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "evalsi.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_without_a_file_the_stores_live_in_the_state_dir(tmp_path: Path) -> None:
    config = Config.load(None, state_dir=tmp_path / "state")
    assert config.metadata_url == f"sqlite:///{tmp_path / 'state' / 'evalsi.db'}"
    assert config.objects_url == str(tmp_path / "state" / "objects")
    assert config.workers == Config().workers


def test_a_file_naming_neither_store_keeps_them_in_the_state_dir(tmp_path: Path) -> None:
    config = Config.load(_file(tmp_path, {"api": {"http_port": 18080}}), state_dir=tmp_path / "state")
    assert config.api.http_port == 18080
    assert config.metadata_url == f"sqlite:///{tmp_path / 'state' / 'evalsi.db'}"
    assert config.objects_url == str(tmp_path / "state" / "objects")


def test_what_the_file_names_wins(tmp_path: Path) -> None:
    path = _file(tmp_path, {"metadata": {"url": "postgresql://evalsi@db:5432/evalsi"}})
    config = Config.load(path, state_dir=tmp_path / "state")
    assert config.metadata_url == "postgresql://evalsi@db:5432/evalsi"
    assert config.objects_url == str(tmp_path / "state" / "objects")


def test_without_a_state_dir_the_defaults_are_unchanged(tmp_path: Path) -> None:
    config = Config.load(_file(tmp_path, {"api": {"http_port": 18080}}))
    assert (config.metadata_url, config.objects_url) == (DEFAULT_METADATA_URL, DEFAULT_OBJECTS_URL)
