"""sandboxd's Unix socket directory: made 0700 when sandboxd makes it; an existing one is never chmod'ed (as root,
unix:/tmp/x.sock once made /tmp 0700), and one others can write is refused."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi_sandboxd.server import prepare_socket


def test_a_directory_made_for_the_socket_is_0700(tmp_path: Path) -> None:
    assert prepare_socket(f"unix:{tmp_path}/run/sandboxd.sock") == f"unix:{tmp_path.resolve()}/run/sandboxd.sock"
    assert stat.S_IMODE((tmp_path / "run").stat().st_mode) == 0o700


def test_an_existing_directory_keeps_its_mode_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    own.chmod(0o755)
    prepare_socket(f"unix:{own}/sandboxd.sock")
    assert stat.S_IMODE(own.stat().st_mode) == 0o755
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    with pytest.raises(BadInputError, match=r"--listen unix:.*shared is writable by others \(mode 1777\)"):
        prepare_socket(f"unix:{shared}/sandboxd.sock")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
