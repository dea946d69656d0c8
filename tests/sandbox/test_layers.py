"""The one rule for untrusted tar streams (root tarballs, OCI layers): whiteouts that name no file, and extension
headers too large to read into memory, are refused before anything is removed or read."""

from __future__ import annotations

import gzip
import io
import re
import tarfile
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.layers import Budget, LayerRefused, apply_layer
from evalsi.sandbox.oci_local import open_local


def _layer(*members: tuple[str, bytes], pax: dict[str, str] | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT, pax_headers=pax or {}) as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _budget() -> Budget:
    return Budget(1 << 30, 1000, "max_bytes", "max_files")


@pytest.mark.parametrize("name", [".wh.", ".wh..", ".wh...", "keep/.wh...", "keep/.wh."])
def test_a_whiteout_naming_no_file_is_refused_and_removes_nothing(tmp_path: Path, name: str) -> None:
    staging = tmp_path / "staging"
    root = staging / "rootfs"
    root.mkdir(parents=True)
    (staging / "sibling").write_text("outside the root")
    apply_layer(_layer(("keep/file", b"kept")), str(root), _budget(), whiteouts=True)
    with pytest.raises(LayerRefused, match=r"a whiteout .* that names no file"):
        apply_layer(_layer((name, b"")), str(root), _budget(), whiteouts=True)
    assert (root / "keep" / "file").read_bytes() == b"kept"
    assert (staging / "sibling").read_text() == "outside the root"


def test_an_ordinary_whiteout_still_removes_its_file(tmp_path: Path) -> None:
    apply_layer(_layer(("a/gone", b"x"), ("a/stays", b"y")), str(tmp_path), _budget(), whiteouts=True)
    apply_layer(_layer(("a/.wh.gone", b"")), str(tmp_path), _budget(), whiteouts=True)
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == ["stays"]


def test_an_oversized_extension_header_is_refused_before_it_is_read() -> None:
    # 8 MiB of PAX header compresses to a few kilobytes: refused from its declared size, never read into memory.
    plain = _layer(("file", b"data"), pax={"comment": "x" * (8 << 20)}).getvalue()
    stream = io.BytesIO(gzip.compress(plain))
    assert len(stream.getvalue()) < 64 * 1024
    with pytest.raises(LayerRefused, match=r"an extension header \(PAX or GNU long name\) of \d+ bytes; at most"):
        apply_layer(stream, "/nonexistent-never-written", _budget(), whiteouts=True)
    small = _layer(("file", b"data"), pax={"comment": "fine"})
    with pytest.raises(LayerRefused, match="could not be written"):  # past the header: the member itself is reached
        apply_layer(small, "/nonexistent-never-written", _budget(), whiteouts=True)


def test_an_image_archive_with_an_oversized_extension_header_is_refused_naming_it(tmp_path: Path) -> None:
    archive = tmp_path / "image.tar.gz"
    archive.write_bytes(gzip.compress(_layer(("index.json", b"{}"), pax={"comment": "x" * (8 << 20)}).getvalue()))
    refused = rf"root: {re.escape(str(archive))}: an extension header"
    with pytest.raises(BadInputError, match=refused), open_local(archive, "root"):
        pass
