"""The OCI image cache after a crash: a staging directory left behind and an entry without its image.json are
removed by the next unpack of that digest, which then ends with one good directory."""

from __future__ import annotations

from pathlib import Path

from evalsi.sandbox.oci import ImageCache
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
