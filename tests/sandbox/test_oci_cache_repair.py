"""The sandbox's caches after a crash: an OCI unpack's staging directory and an entry without its image.json, and a
root tarball's staging, are removed by the next unpack of that digest, which ends with one good directory."""

from __future__ import annotations

import io
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evalsi.sandbox.model import RootFilesystem
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.rootfs import RootCache, tarball_digest
from evalsi.testing.oci_images import busybox_oci_image, write_layout


def test_a_crashed_unpacks_leftovers_are_removed_by_the_next_unpack(tmp_path: Path) -> None:
    image = busybox_oci_image(tmp_path)
    layout = str(write_layout(image, tmp_path / "layout"))
    hexdigest = image.manifest_digest.partition(":")[2]
    base = tmp_path / "cache" / "oci"
    (base / f".unpack-{hexdigest}-crashed" / "rootfs").mkdir(parents=True)
    (base / ".unpack-someotherdigest-x").mkdir()  # another digest's: not this unpack's to remove
    (base / "sha256" / hexdigest / "rootfs").mkdir(parents=True)  # renamed in, image.json never written
    root = ImageCache(tmp_path / "cache").resolve(layout)
    assert root == base / "sha256" / hexdigest / "rootfs"
    assert (root / "bin" / "sh").readlink() == Path("busybox")
    assert sorted(path.name for path in base.iterdir() if path.name.startswith(".unpack")) == [
        ".unpack-someotherdigest-x"]


def test_root_tarballs_unpack_once_under_a_lock_and_a_crashed_unpack_is_cleaned(tmp_path: Path) -> None:
    tarball = tmp_path / "root.tar"
    with tarfile.open(tarball, "w") as archive:
        info = tarfile.TarInfo("etc/hello")
        info.size = 3
        archive.addfile(info, io.BytesIO(b"hi\n"))
    hexdigest = tarball_digest(tarball).partition(":")[2]
    leftover = tmp_path / "cache" / "sha256" / f".unpack-{hexdigest}-crashed"
    leftover.mkdir(parents=True)
    root = RootFilesystem("tarball", str(tarball))
    with ThreadPoolExecutor(4) as pool:
        roots = set(pool.map(lambda _: RootCache(tmp_path / "cache").resolve(root), range(4)))
    assert roots == {tmp_path / "cache" / "sha256" / hexdigest}
    assert (tmp_path / "cache" / "sha256" / hexdigest / "etc" / "hello").read_text() == "hi\n"
    assert not [path for path in (tmp_path / "cache" / "sha256").iterdir() if path.name.startswith(".unpack")]
