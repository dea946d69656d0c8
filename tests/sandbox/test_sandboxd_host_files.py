"""The host's reads and writes of a sandbox's workspace never leave it: links planted by the sandbox are not
followed, FIFOs and devices are not opened for reading, names that climb out are refused (evalsi.sandbox.host_files).
Pure file system work, no sandbox needed: the workspace is a directory as a sandbox would have left it."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from evalsi.sandbox import host_files
from evalsi.sandbox.host_files import HostFileError, copy_tree_to_tar, read_beneath, restore_tar, write_beneath


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(b"print(1)\n")
    secret = tmp_path / "host-secret"
    secret.write_text("host only")
    os.symlink(secret, root / "leak")                 # an absolute link out
    os.symlink("../host-secret", root / "climb")      # a relative link out
    os.symlink("/", root / "slash")                   # a directory link out
    os.symlink("pkg/a.py", root / "inner")            # a link that stays inside
    os.mkfifo(root / "fifo")                          # would block a reader forever
    return root


def test_reads_inside_the_workspace_by_relative_or_workdir_path(workspace: Path) -> None:
    assert read_beneath(str(workspace), "pkg/a.py", max_bytes=100) == b"print(1)\n"
    assert read_beneath(str(workspace), "/workspace/pkg/a.py", max_bytes=100) == b"print(1)\n"
    assert read_beneath(str(workspace), "/srv/pkg/a.py", max_bytes=100, workdir="/srv") == b"print(1)\n"


@pytest.mark.parametrize("path, reason", [
    ("leak", "symbolic link"),
    ("climb", "symbolic link"),
    ("slash/etc/passwd", "outside the workspace"),
    ("inner", "symbolic link"),
    ("fifo", "not a regular file"),
    ("pkg", "not a regular file"),
    ("../host-secret", "'..' is not accepted"),
    ("/etc/passwd", "under the workspace"),
    ("", "non-empty"),
    ("/workspace", "the workspace itself"),
    ("pkg/a.py\0x", "NUL"),
])
def test_reads_that_would_leave_the_workspace_are_refused(workspace: Path, path: str, reason: str) -> None:
    with pytest.raises(HostFileError, match=reason):
        read_beneath(str(workspace), path, max_bytes=1 << 20)


def test_a_file_over_the_limit_is_refused_naming_it(workspace: Path) -> None:
    with pytest.raises(HostFileError, match=r"'pkg/a.py': 9 bytes is over the limit of 4"):
        read_beneath(str(workspace), "pkg/a.py", max_bytes=4)


def test_writes_never_go_through_a_planted_link(workspace: Path, tmp_path: Path) -> None:
    for path in ("leak", "climb", "slash/tmp/x", "inner", "fifo"):
        with pytest.raises(HostFileError):
            write_beneath(str(workspace), path, b"overwritten")
    assert (tmp_path / "host-secret").read_text() == "host only"
    assert (workspace / "pkg" / "a.py").read_bytes() == b"print(1)\n"
    write_beneath(str(workspace), "new/deep/b.txt", b"made")
    assert (workspace / "new" / "deep" / "b.txt").read_bytes() == b"made"


def test_the_walk_without_openat2_refuses_the_same(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels before 5.6 have no openat2: the O_NOFOLLOW walk gives the same answers."""
    monkeypatch.setattr(host_files, "_openat2_state", [False])
    with pytest.raises(HostFileError, match="symbolic link"):
        read_beneath(str(workspace), "leak", max_bytes=100)
    with pytest.raises(HostFileError):
        read_beneath(str(workspace), "slash/etc/passwd", max_bytes=100)
    assert read_beneath(str(workspace), "pkg/a.py", max_bytes=100) == b"print(1)\n"


def test_a_snapshot_keeps_links_as_links_and_restores_beneath(workspace: Path, tmp_path: Path) -> None:
    archive = copy_tree_to_tar(str(workspace), max_bytes=1 << 20)
    with tarfile.open(fileobj=io.BytesIO(archive)) as opened:
        names = {member.name: member for member in opened}
    assert names["leak"].issym() and names["pkg/a.py"].isfile() and "fifo" not in names
    target = tmp_path / "restored"
    target.mkdir()
    restore_tar(str(target), archive, max_bytes=1 << 20)
    assert os.readlink(target / "leak") == str(tmp_path / "host-secret")  # a link, never the host file's bytes
    assert (target / "pkg" / "a.py").read_bytes() == b"print(1)\n"


def test_a_snapshot_over_its_limit_is_refused(workspace: Path) -> None:
    with pytest.raises(HostFileError, match="snapshot limit"):
        copy_tree_to_tar(str(workspace), max_bytes=4)


def test_an_archive_naming_a_path_out_of_the_workspace_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo("../escaped")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    target = tmp_path / "t"
    target.mkdir()
    with pytest.raises(HostFileError, match=r"'\.\.' is not accepted"):
        restore_tar(str(target), buffer.getvalue(), max_bytes=100)
    assert not (tmp_path / "escaped").exists()


def test_a_workspace_of_many_empty_entries_is_bounded_by_its_archive_not_only_its_bytes(tmp_path: Path) -> None:
    many = tmp_path / "many"
    many.mkdir()
    for index in range(200):  # no file data at all, but 200 tar headers (512 bytes each, more in PAX form)
        (many / f"empty-{index}").touch()
    with pytest.raises(HostFileError, match="archive exceeds 65536 bytes; the snapshot limit"):
        copy_tree_to_tar(str(many), max_bytes=65536)
    assert copy_tree_to_tar(str(many), max_bytes=1 << 20)  # the same tree under a limit it fits
