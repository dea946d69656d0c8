"""The runtime image takes busybox only when it is static: an ELF file without a PT_INTERP program header."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from evalsi.sandbox.runtime_image import is_static


def _elf(path: Path, interpreter: bytes | None) -> Path:
    """A minimal little-endian 64-bit ELF executable: one PT_LOAD header, and a PT_INTERP one naming
    ``interpreter``."""
    headers = [(1, 0)] + ([(3, 64 + 56 * 2)] if interpreter is not None else [])
    elf = bytearray(b"\x7fELF" + bytes([2, 1, 1]) + bytes(9))
    elf += struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 64, 0, 0, 64, 56, len(headers), 0, 0, 0)
    for kind, offset in headers:
        elf += struct.pack("<IIQQQQQQ", kind, 4, offset, 0, 0, len(interpreter or b""), len(interpreter or b""), 1)
    path.write_bytes(bytes(elf) + (interpreter or b""))
    return path


def test_a_dynamic_binary_is_not_static_whatever_its_loader_is_called(tmp_path: Path) -> None:
    assert not is_static(_elf(tmp_path / "musl", b"/lib/ld-musl-x86_64.so.1\0"))  # was taken for static
    assert not is_static(_elf(tmp_path / "glibc", b"/lib64/ld-linux-x86-64.so.2\0"))
    assert is_static(_elf(tmp_path / "static", None))
    assert not is_static(Path(shutil.which("ls") or "/bin/ls"))  # a real dynamic executable
    (tmp_path / "text").write_text("#!/bin/sh\n")
    assert not is_static(tmp_path / "text") and not is_static(tmp_path / "missing")
