"""Root filesystems: tarballs unpacked once per digest, unsafe members refused, and used as a sandbox's /."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.model import RootFilesystem, SandboxSpec
from evalsi.sandbox.rootfs import RootCache, tarball_digest
from evalsi.testing.sandbox_images import busybox_tarball


def _tarball(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w") as archive:
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            archive.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.mode = 0o644
    return info


async def test_a_tarball_root_is_unpacked_once_and_runs_commands(tmp_path: Path) -> None:
    tarball = busybox_tarball(tmp_path / "image.tar", tmp_path)
    cache = tmp_path / "cache"
    driver = BwrapDriver(SandboxConfig(cache_dir=cache))
    spec = SandboxSpec(root=RootFilesystem("tarball", str(tarball)))
    first = await driver.create(spec)
    second = await driver.create(spec)
    try:
        result = await first.exec(["sh", "-c", "cat /etc/passwd; ls /"])
    finally:
        await first.destroy()
        await second.destroy()
    image_passwd = b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n"  # busybox_image's, not ours
    assert result.outcome.kind == "exit" and result.stdout.startswith(image_passwd), result
    digest = tarball_digest(tarball).partition(":")[2]
    assert [path.name for path in (cache / "sha256").iterdir() if not path.name.startswith(".")] == [digest]
    assert first.root == second.root == cache / "sha256" / digest


@pytest.mark.parametrize(("member", "refusal"), [
    (_member("../escaped.txt"), "outside the destination"),
    (_member("hop", tarfile.SYMTYPE, "../../../../etc"), "outside the destination"),
    (_member("hard", tarfile.LNKTYPE, "../../etc/passwd"), "outside the destination"),
    (_member("dev", tarfile.CHRTYPE), "special file"),
])
def test_unsafe_members_refuse_the_whole_tarball(tmp_path: Path, member: tarfile.TarInfo, refusal: str) -> None:
    tarball = _tarball(tmp_path / "bad.tar", [(_member("ok.txt"), b"fine"), (member, b"payload")])
    cache = RootCache(tmp_path / "cache")
    with pytest.raises(BadInputError, match=f"bad.tar: member .* refused: .*{refusal}"):
        cache.resolve(RootFilesystem("tarball", str(tarball)))
    assert not (tmp_path / "escaped.txt").exists()
    # Nothing half-unpacked stays in the cache.
    assert not any(path.name != ".unpack" and not path.name.startswith(".") for path in
                   (tmp_path / "cache" / "sha256").iterdir())


def test_a_file_that_is_not_a_tarball_is_refused_naming_it(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tarball at all" * 100)
    with pytest.raises(BadInputError, match=r"junk\.tar: not a readable tarball"):
        RootCache(tmp_path / "cache").resolve(RootFilesystem("tarball", str(junk)))


def test_setuid_bits_are_stripped(tmp_path: Path) -> None:
    member = _member("bin/tool")
    member.mode = 0o4755
    tarball = _tarball(tmp_path / "suid.tar", [(member, b"#!/bin/sh\n")])
    root = RootCache(tmp_path / "cache").resolve(RootFilesystem("tarball", str(tarball)))
    assert root is not None
    assert (root / "bin" / "tool").stat().st_mode & 0o7000 == 0


def test_an_absolute_symlink_is_kept_for_the_sandbox_and_never_followed_by_the_host(tmp_path: Path) -> None:
    # Real images hold absolute links (/etc/localtime); they resolve inside the sandbox, whose / is the root. A later
    # member written through one lands inside the root too, never at the host's path.
    tarball = _tarball(tmp_path / "abs-link.tar", [(_member("etc", tarfile.DIRTYPE), b""),
                                                   (_member("escape", tarfile.SYMTYPE, "/etc"), b""),
                                                   (_member("escape/evalsi-through-link"), b"inside")])
    root = RootCache(tmp_path / "cache").resolve(RootFilesystem("tarball", str(tarball)))
    assert root is not None and (root / "escape").readlink() == Path("/etc")
    assert (root / "etc" / "evalsi-through-link").read_bytes() == b"inside"
    assert not Path("/etc/evalsi-through-link").exists()


def test_an_absolute_member_lands_inside_the_root(tmp_path: Path) -> None:
    tarball = _tarball(tmp_path / "abs.tar", [(_member("/etc/evalsi-escaped"), b"inside")])
    root = RootCache(tmp_path / "cache").resolve(RootFilesystem("tarball", str(tarball)))
    assert root is not None and (root / "etc" / "evalsi-escaped").read_bytes() == b"inside"
    assert not Path("/etc/evalsi-escaped").exists()
