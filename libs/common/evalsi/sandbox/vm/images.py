"""The guest's boot artifacts, built at first use and cached by the digest of what went into them.

* The initramfs (an uncompressed newc cpio written here): static busybox, the kernel modules the guest needs (Debian
  builds virtio, virtio-mmio, virtio-blk, virtio-console and ext4 as modules; the small guest kernel,
  ``small_kernel.py``, builds them in and needs none) and ``/init``, which loads them, mounts the runtime disk
  read-only and switches to it with the guest agent as PID 1.
* The runtime disk (``mkfs.ext4 -d``, read-only to the guest): the runtime image every other rung shows untrusted
  code (``evalsi.sandbox.runtime_image.stage_runtime``: the host's Python, its standard library and shared
  libraries, busybox's applets, a minimal ``/etc``) plus the agent, the guest's shadow file and its mount points.
  No host file beyond these is on it: untrusted code in the guest sees no host secret, configuration or home.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from evalsi.errors import EvalsiError
from evalsi.sandbox.runtime_image import RuntimeInputs, find_inputs, stage_runtime
from evalsi.sandbox.vm.kernel import GuestKernel

__all__ = ["GUEST_MODULES", "BuildFailed", "build_image_disk", "build_initramfs", "build_runtime_disk", "cpio_newc"]

# Loaded in this order (dependencies first, as modules.dep lists them).
GUEST_MODULES = ("virtio_ring", "virtio", "virtio_mmio", "virtio_blk", "virtio_console", "crc16", "mbcache", "jbd2",
                 "crc32c_generic", "ext4", "overlay")
_FORMAT = "5"  # bump when the layout of either artifact changes, so caches rebuild
_AGENT = Path(__file__).with_name("guest_agent.py")

_INIT = """#!/bin/busybox sh
# evalsi microVM init: modules, the runtime disk, then the agent as PID 1 (see evalsi.sandbox.vm.images).
B=/bin/busybox
$B mount -t devtmpfs dev /dev
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
MMIO=""
for w in $($B cat /proc/cmdline); do
  case "$w" in virtio_mmio.device=*) MMIO="$MMIO device=${w#virtio_mmio.device=}";; esac
done
# A kernel with its drivers built in (the small guest kernel) has no /modules: nothing to load.
[ -s /modules ] && for m in $($B cat /modules); do
  if [ "$m" = virtio_mmio ]; then $B insmod /m/$m.ko $MMIO; else $B insmod /m/$m.ko; fi
done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 500 ]; do $B usleep 10000; i=$((i+1)); done
$B mount -t ext4 -o ro,noatime /dev/vda /newroot || { echo "evalsi-init: cannot mount the runtime disk"; exit 1; }
# An image root, when the sandbox asked for one: the agent runs commands chrooted into it.
[ -b /dev/vdb ] && { $B mount -t ext4 -o ro,noatime,nodev,nosuid /dev/vdb /newroot/image || exit 1; }
$B mount --move /dev /newroot/dev
$B mount --move /proc /newroot/proc
$B mount --move /sys /newroot/sys
exec $B switch_root /newroot /usr/bin/python3 -I -S -B /evalsi/agent.py
"""

# The guest's own shadow file (root only), as on any system: reading it from the sandbox is refused by the guest.
_SHADOW = "root:*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n"


class BuildFailed(EvalsiError):
    code = "VM_BUILD_FAILED"


def cpio_newc(entries: Iterable[tuple[str, int, bytes]]) -> bytes:
    """An uncompressed newc archive of ``(name, mode, data)``; a symlink's data is its target."""
    out = bytearray()
    ino = 1
    for name, mode, data in [*entries, ("TRAILER!!!", 0, b"")]:
        raw_name = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw_name), 0)
        out += b"070701" + b"".join(f"{value:08x}".encode() for value in fields)
        out += raw_name + b"\0" * (-(110 + len(raw_name)) % 4)
        out += data + b"\0" * (-len(data) % 4)
        ino += 1
    return bytes(out)


def build_initramfs(kernel: GuestKernel | None, busybox: Path, cache_dir: Path) -> Path:
    """The initramfs for Debian's ``kernel`` (with its modules), or for a kernel with the drivers built in (None)."""
    deps = _module_paths(kernel) if kernel is not None else {}
    digest = _digest([_FORMAT, _INIT, kernel.version if kernel is not None else "built-in",
                      *(_stat_key(p) for p in [busybox, *deps.values()])])
    out = cache_dir / f"initramfs-{digest}.cpio"
    if out.is_file():
        return out
    entries: list[tuple[str, int, bytes]] = [
        (d, stat.S_IFDIR | 0o755, b"") for d in ("bin", "dev", "proc", "sys", "newroot", "m")]
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()))
    entries.append(("init", stat.S_IFREG | 0o755, _INIT.encode()))
    if deps:
        entries.append(("modules", stat.S_IFREG | 0o644, "\n".join(GUEST_MODULES).encode() + b"\n"))
    entries += [(f"m/{name}.ko", stat.S_IFREG | 0o644, path.read_bytes()) for name, path in deps.items()]
    _write_atomic(out, cpio_newc(entries))
    return out


def _module_paths(kernel: GuestKernel) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        rel = line.partition(":")[0]
        name = Path(rel).name.removesuffix(".ko").replace("-", "_")
        if name in GUEST_MODULES:
            found[name] = kernel.modules / rel
    missing = [m for m in GUEST_MODULES if m not in found]
    if missing:
        raise BuildFailed(f"{kernel.modules}: the guest needs the modules {', '.join(missing)} (uncompressed .ko); "
                          "the kernel package lacks them or builds them in a way this driver does not load")
    return {name: found[name] for name in GUEST_MODULES}


def build_runtime_disk(busybox: Path, cache_dir: Path, python: Path | None = None) -> Path:
    """The read-only ext4 runtime disk, built once per set of inputs (the runtime image's digest and the agent)."""
    host = find_inputs(python)
    inputs = RuntimeInputs(host.python, host.stdlib, busybox)  # the driver checked busybox is the static one
    digest = _digest([_FORMAT, _AGENT.read_text(), inputs.digest()])
    out = cache_dir / f"runtime-{digest}.ext4"
    if out.is_file():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="stage-") as tmp:
        stage = Path(tmp) / "root"
        _stage(stage, inputs)
        size = _tree_bytes(stage) * 5 // 4 + (32 << 20)
        image = Path(tmp) / "disk.ext4"
        with image.open("wb") as f:
            f.truncate(size)
        _run(["mkfs.ext4", "-q", "-F", "-L", "evalsi-rt", "-O", "^has_journal,^metadata_csum", "-m", "0",
              "-E", "root_owner=0:0", "-d", str(stage), str(image)])
        os.replace(image, out)
    return out


def build_image_disk(root: Path, cache_dir: Path) -> Path:
    """An image root (a directory) as a read-only ext4 disk, built once per tree (paths, modes, sizes, mtimes)."""
    entries = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames.sort()
        for name in sorted([*dirnames, *names]):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            entries.append(f"{os.path.relpath(full, root)}:{st.st_mode}:{st.st_size}:{st.st_mtime_ns}")
    digest = _digest([_FORMAT, str(root), *entries])
    out = cache_dir / f"image-{digest}.ext4"
    if out.is_file():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix="stage-") as tmp:
        image = Path(tmp) / "disk.ext4"
        with image.open("wb") as f:
            f.truncate(_tree_bytes(root) * 5 // 4 + (32 << 20))
        _run(["mkfs.ext4", "-q", "-F", "-L", "evalsi-img", "-O", "^has_journal,^metadata_csum", "-m", "0",
              "-d", str(root), str(image)])
        os.replace(image, out)
    return out


def _stage(stage: Path, inputs: RuntimeInputs) -> None:
    """The runtime image's tree, then what only the guest has: its agent, the mount points its init and agent use,
    root's home and a shadow file (reading it from the sandbox is refused by the guest, as on any system)."""
    stage_runtime(stage, inputs)
    for d in ("evalsi", "root", "image", "sroot", "run"):
        (stage / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(_AGENT, stage / "evalsi/agent.py")
    shadow = stage / "etc/shadow"
    shadow.write_text(_SHADOW)
    shadow.chmod(0o600)
    (stage / "root").chmod(0o700)


def _tree_bytes(root: Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            total += os.lstat(os.path.join(dirpath, name)).st_size + 4096
    return total


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _digest(parts: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildFailed(f"{argv[0]}: {exc}") from exc
    if done.returncode != 0:
        raise BuildFailed(f"{' '.join(argv[:3])}: exit {done.returncode}: "
                          f"{done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout.decode(errors="replace")
