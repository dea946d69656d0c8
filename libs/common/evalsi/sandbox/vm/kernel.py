"""The guest kernel: Debian's packaged kernel, its compressed payload extracted into an uncompressed ELF ``vmlinux``.

QEMU's ``microvm`` machine boots an uncompressed kernel through PVH (Debian's kernel has ``CONFIG_PVH``); the
``vmlinuz`` Debian installs is a bzImage whose payload is xz (or gzip/zstd on other builds). Extraction is pure
Python (``lzma``/``gzip``) and cached by the bzImage's digest, so it happens once per kernel version.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from evalsi.errors import EvalsiError

__all__ = ["GuestKernel", "KernelMissing", "extract_vmlinux", "find_kernel"]

_XZ_MAGIC = b"\xfd7zXZ\x00"
_GZIP_MAGIC = b"\x1f\x8b\x08"
_ELF_MAGIC = b"\x7fELF"


class KernelMissing(EvalsiError):
    code = "VM_KERNEL_MISSING"


@dataclass(frozen=True)
class GuestKernel:
    version: str  # e.g. "6.1.0-57-amd64"
    vmlinuz: Path
    modules: Path  # /lib/modules/<version>


def find_kernel(boot: Path = Path("/boot"), modules_root: Path = Path("/lib/modules"),
                version: str | None = None) -> GuestKernel:
    """The newest packaged kernel with its modules (or ``version``); ``KernelMissing`` says what to install."""
    candidates = sorted(boot.glob("vmlinuz-*"), key=lambda p: _version_key(p.name.removeprefix("vmlinuz-")))
    if version is not None:
        candidates = [p for p in candidates if p.name == f"vmlinuz-{version}"]
    for path in reversed(candidates):
        ver = path.name.removeprefix("vmlinuz-")
        if (modules_root / ver / "modules.dep").is_file():
            return GuestKernel(ver, path, modules_root / ver)
    raise KernelMissing(f"no guest kernel: no {boot}/vmlinuz-* with {modules_root}/<version>/modules.dep"
                        f"{f' for version {version}' if version else ''}; install one with "
                        "`apt-get install -y linux-image-amd64`")


def _version_key(ver: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", ver))


def extract_vmlinux(vmlinuz: Path, cache_dir: Path) -> Path:
    """The uncompressed ELF kernel inside ``vmlinuz``, written once into ``cache_dir`` (named by its digest)."""
    data = vmlinuz.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:24]
    out = cache_dir / f"vmlinux-{digest}"
    if out.is_file():
        return out
    elf = _payload(data, vmlinuz)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(elf)
    os.replace(tmp, out)  # atomic: a concurrent extraction writes the same bytes
    return out


def _payload(data: bytes, where: Path) -> bytes:
    if data.startswith(_ELF_MAGIC):
        return data
    for magic, decompress in ((_XZ_MAGIC, _unxz), (_GZIP_MAGIC, _gunzip)):
        start = data.find(magic)
        while start >= 0:
            try:
                elf = decompress(data[start:])
            except (lzma.LZMAError, zlib.error):
                elf = b""
            if elf.startswith(_ELF_MAGIC):
                return elf
            start = data.find(magic, start + 1)
    raise KernelMissing(f"{where}: no xz or gzip compressed ELF kernel found inside (accepted: a bzImage with an "
                        "xz or gzip payload, or an uncompressed vmlinux)")


def _unxz(blob: bytes) -> bytes:
    # The payload is followed by the bzImage's trailer: a decompressor stops at the end of the stream.
    return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob)


def _gunzip(blob: bytes) -> bytes:
    # wbits 16+MAX_WBITS: a gzip header; the bytes after the stream's end stay in unused_data.
    return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)
