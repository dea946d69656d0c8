"""Small real root filesystems for sandbox tests and examples: a directory (or a tarball of it) holding the static
busybox and its applets, so a sandbox's ``/`` shares nothing with the host's."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

__all__ = ["busybox_image", "busybox_tarball"]

_APPLETS = ("sh", "cat", "echo", "ls", "id", "env", "sleep", "true", "false", "nc", "head", "yes", "ln", "mkdir",
            "rm", "touch", "wc", "dd", "seq", "sync", "readlink", "ps", "kill", "wget")


def busybox_image(destination: Path) -> Path:
    """An image directory at ``destination``: /bin/busybox, its applets as links, /etc with a passwd and a shadow
    of its own (so a test can tell the image's files from the host's)."""
    busybox = shutil.which("busybox")
    if busybox is None:
        raise RuntimeError("busybox is not installed (apt-get install busybox-static; scripts/test.sh does it)")
    (destination / "bin").mkdir(parents=True)
    shutil.copy2(busybox, destination / "bin" / "busybox")
    for applet in _APPLETS:
        (destination / "bin" / applet).symlink_to("busybox")
    (destination / "usr").mkdir()
    (destination / "usr" / "bin").symlink_to("../bin")
    (destination / "etc").mkdir()
    (destination / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
    (destination / "etc" / "shadow").write_text("image-shadow\n")
    (destination / "etc" / "shadow").chmod(0o600)
    return destination


def busybox_tarball(destination: Path, workdir: Path) -> Path:
    """The busybox image as a tarball at ``destination`` (built under ``workdir``)."""
    image = busybox_image(workdir / "busybox-image")
    with tarfile.open(destination, "w") as archive:
        for entry in sorted(image.iterdir()):
            archive.add(entry, arcname=entry.name)
    return destination
