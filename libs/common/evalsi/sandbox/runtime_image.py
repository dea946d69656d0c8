"""The runtime image: the default root filesystem for untrusted code (issue 14: "never the host's / for untrusted
code").

A minimal tree built once from the host and cached by the digest of its inputs under ``<sandbox cache_dir>/runtime/
<digest>``:

* the host's Python interpreter (``/usr/bin/python3.11``, linked as ``python3`` and ``python``), its standard
  library (without its test suite, IDLE, tkinter, ensurepip and the like) and the shared libraries they link
  (``ldd``), at the host's paths;
* busybox's applets as ``/bin/sh`` and the core utilities (``cat``, ``ls``, ``env``, ``grep``, ``sed`` ...) when a
  static busybox is installed (``apt-get install -y busybox-static``; scripts/test.sh installs it);
* a minimal ``/etc`` (``passwd`` and ``group`` naming root and the sandbox user 65534, ``hosts``, ``nsswitch.conf``):
  no host secret, configuration or home;
* an empty ``/tmp`` and the mount points ``/workspace``, ``/proc``, ``/dev`` and ``/sys``.

The digest covers what the tree is made of without reading it all: the interpreter, the standard library's
directory and ``os.py``, its extension modules, busybox, ``/etc/ld.so.cache`` (rewritten whenever a shared library
is installed or upgraded) and this module's format version; a host upgrade therefore yields a new image. The
microVM rung's runtime disk (``vm/images.py``) is staged by the same ``stage_runtime``, so every rung shows
untrusted code the same tree.

A build stages into a temporary directory beside the cache entry and renames it into place when complete, under a
per-digest file lock: two processes building at once end with one good image and one of them waits, and a crash
never leaves a half image in the cache (its leftovers are removed by the next build of that digest).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalsi.errors import InfraError
from evalsi.sandbox.cache_lock import locked, owned_cache_dir
from evalsi.sandbox.model import RootFilesystem

__all__ = ["FORMAT", "RuntimeBuildFailed", "RuntimeImage", "RuntimeInputs", "ensure_runtime_image", "find_inputs",
           "image_summary", "root_report", "shared_libraries", "stage_runtime"]

# Bump when the layout of the image changes, so caches rebuild.
FORMAT = "runtime-1"
SANDBOX_UID = 65534
_STDLIB_SKIP = frozenset({"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
                          "distutils", "venv", "dist-packages", "site-packages"})
_PASSWD = f"root:x:0:0:root:/root:/bin/sh\nnobody:x:{SANDBOX_UID}:{SANDBOX_UID}:nobody:/workspace:/bin/sh\n"
_GROUP = f"root:x:0:\nnogroup:x:{SANDBOX_UID}:\n"
_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost\n"
_NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
_LD_CACHE = Path("/etc/ld.so.cache")
_PT_INTERP = 3


class RuntimeBuildFailed(InfraError):
    """The host lacks what the runtime image is made of (its Python), or a build step failed."""

    code = "SANDBOX_RUNTIME_BUILD_FAILED"


@dataclass(frozen=True)
class RuntimeInputs:
    """What the image is made of: host paths."""

    python: Path  # the interpreter binary itself (not a link), e.g. /usr/bin/python3.11
    stdlib: Path  # its standard library, e.g. /usr/lib/python3.11
    busybox: Path | None  # a static busybox, or None: the image then has no shell

    def extension_modules(self) -> list[Path]:
        return sorted((self.stdlib / "lib-dynload").glob("*.so"))

    def digest(self) -> str:
        """24 hex digits of sha256 over the inputs' paths, sizes and modification times (no file is read)."""
        keys = [FORMAT, _stat_key(self.python), _stat_key(self.stdlib), _stat_key(self.stdlib / "os.py"),
                *(_stat_key(path) for path in self.extension_modules()),
                _stat_key(self.busybox) if self.busybox is not None else "busybox: none",
                _stat_key(_LD_CACHE) if _LD_CACHE.exists() else "ld.so.cache: none"]
        return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class RuntimeImage:
    path: Path
    digest: str


def find_inputs(python: Path | None = None, busybox: Path = Path("/usr/bin/busybox")) -> RuntimeInputs:
    """The interpreter and its standard library (``RuntimeBuildFailed`` naming what is missing) and busybox when it
    is a static one. The interpreter: ``python`` when given; else the system's ``/usr/bin/python3`` when it has its
    standard library; else the one running evalsi (a container's ``/usr/local/bin/python3.11``)."""
    if python is None and _system_python() is None:
        base = Path(getattr(sys, "_base_executable", "") or sys.executable).resolve()
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        if base.is_file() and (stdlib / "os.py").is_file():
            return RuntimeInputs(base, stdlib, busybox if is_static(busybox) else None)
    binary = (python or Path("/usr/bin/python3")).resolve()
    if not binary.is_file():
        raise RuntimeBuildFailed(f"{python or '/usr/bin/python3'}: no Python for the sandbox's runtime image; install "
                                 "it with `apt-get install -y python3`, or set sandbox.root to an image of your own")
    stdlib = binary.parent.parent / "lib" / binary.name
    if not (stdlib / "os.py").is_file():
        raise RuntimeBuildFailed(f"{stdlib}: the standard library of {binary} is missing; install it with "
                                 f"`apt-get install -y lib{binary.name}-stdlib`, or set sandbox.root to an image of "
                                 "your own")
    return RuntimeInputs(binary, stdlib, busybox if is_static(busybox) else None)


def _system_python() -> Path | None:
    binary = Path("/usr/bin/python3").resolve()
    return binary if binary.is_file() and (Path("/usr/lib") / binary.name / "os.py").is_file() else None


def is_static(binary: Path) -> bool:
    """True for an ELF executable without a PT_INTERP program header: it needs no loader nor library in the image.
    (Looking for "ld-linux" in its first bytes took a musl-linked busybox, whose loader is ld-musl, for static.)"""
    try:
        with binary.open("rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2:  # a 64-bit ELF file
                return False
            order = "<" if header[5] == 1 else ">"
            (table_offset,) = struct.unpack_from(f"{order}Q", header, 32)
            entry_size, entries = struct.unpack_from(f"{order}HH", header, 54)
            if entry_size < 4 or entries > 512:
                return False
            f.seek(table_offset)
            table = f.read(entry_size * entries)
    except OSError:
        return False
    if len(table) < entry_size * entries:
        return False
    return all(struct.unpack_from(f"{order}I", table, index * entry_size)[0] != _PT_INTERP
               for index in range(entries))


def ensure_runtime_image(cache_dir: Path, inputs: RuntimeInputs | None = None) -> RuntimeImage:
    """The runtime image for ``inputs`` (default: the host's), built under ``cache_dir/runtime`` when missing.
    Blocking (seconds on a cold cache): call it from a thread in async code."""
    inputs = inputs or find_inputs()
    digest = inputs.digest()
    base = owned_cache_dir(owned_cache_dir(cache_dir) / "runtime")
    target = base / digest
    if target.is_dir():
        return RuntimeImage(target, digest)
    with locked(base / f".{digest}.lock"):
        if target.is_dir():  # another process built it while this one waited
            return RuntimeImage(target, digest)
        for stale in base.glob(f".stage-{digest}-*"):  # a build that crashed; only a holder of the lock stages
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".stage-{digest}-", dir=base))
        try:
            stage_runtime(staging / "root", inputs)
            try:
                os.rename(staging / "root", target)
            except OSError:
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return RuntimeImage(target, digest)


def stage_runtime(stage: Path, inputs: RuntimeInputs) -> None:
    """Write the image's tree into the new directory ``stage`` (the microVM's runtime disk adds its agent to the
    same tree)."""
    for d in ("usr/bin", "usr/lib", "usr/lib64", "etc", "dev", "proc", "sys", "tmp", "workspace"):
        (stage / d).mkdir(parents=True, exist_ok=True)
    stage.chmod(0o755)
    for name, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"), ("sbin", "usr/bin")):
        (stage / name).symlink_to(target)
    # The interpreter and its standard library at their host paths (where it finds its prefix), python3 and python
    # on /usr/bin whatever that path is.
    binary = _beneath(stage, inputs.python)
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(inputs.python, binary)
    for alias in ("python3", "python"):
        link = stage / "usr/bin" / alias
        if link != binary:
            link.symlink_to(os.path.relpath(binary, link.parent))
    if inputs.busybox is not None:
        shutil.copy2(inputs.busybox, stage / "usr/bin/busybox")
        for applet in _run([str(inputs.busybox), "--list"]).split():
            link = stage / "usr/bin" / applet
            if "/" not in applet and not link.exists() and not link.is_symlink():
                link.symlink_to("busybox")
    stdlib = inputs.stdlib
    shutil.copytree(stdlib, _beneath(stage, stdlib), symlinks=True,
                    ignore=lambda d, names: [n for n in names if Path(d) == stdlib and _skipped(n)])
    for lib in shared_libraries([inputs.python, *inputs.extension_modules()]):
        dest = _beneath(stage, lib)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib.resolve(), dest)
        # The image has no ld.so.cache: a library outside the loader's default directories (/usr/local/lib's
        # libpython) is linked into /usr/lib, where the loader looks without one.
        default = stage / "usr/lib" / lib.name
        if dest.parent.parent != stage / "usr" and not _multiarch(dest.parent) and not default.exists():
            default.symlink_to(os.path.relpath(dest, default.parent))
    for file_name, text in (("passwd", _PASSWD), ("group", _GROUP), ("hosts", _HOSTS), ("nsswitch.conf", _NSSWITCH)):
        (stage / "etc" / file_name).write_text(text)
        (stage / "etc" / file_name).chmod(0o644)
    (stage / "tmp").chmod(0o1777)


def shared_libraries(binaries: list[Path]) -> list[Path]:
    """The shared libraries ``binaries`` link, the dynamic loader included (one ``ldd`` for all of them)."""
    output = _run(["ldd", *(str(binary) for binary in binaries)], check=False)
    libs: set[Path] = set()
    for line in output.splitlines():
        if not line[:1].isspace():  # "FILE:" headers name the binary, not a library
            continue
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else (parts[0] if parts else "")
        if path.startswith("/"):
            libs.add(Path(path))
    if not libs:
        raise RuntimeBuildFailed(f"ldd found no shared library for {binaries[0]}: {output[-300:]!r}")
    return sorted(libs)


def root_report(root: RootFilesystem, resolved: Path | None) -> str:
    """The isolation report's ``root`` bound for a resolved root (``resolved`` None: the host's /usr)."""
    if resolved is None:
        return "host /usr read-only (trusted)"
    if root.kind == "runtime":
        return f"runtime image {resolved.name} read-only"
    if root.kind == "oci":  # cached as .../oci/<algorithm>/<hex>/rootfs: the reference and the digest it ran
        return f"oci image {root.path} ({resolved.parent.parent.name}:{resolved.parent.name}) read-only"
    if root.kind == "dockerfile":  # cached as .../dockerfile/<algorithm>/<hex>/rootfs: the image's digest
        return f"dockerfile {resolved.parent.parent.name}:{resolved.parent.name} ({root.path}) read-only"
    return f"{root.kind} {resolved} read-only"


def image_summary(image: RuntimeImage) -> dict[str, Any]:
    """Path, digest, size and what is inside, for `evalsi sandbox image`."""
    files, size = 0, 0
    for dirpath, _, names in os.walk(image.path):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(dirpath, name)).st_size
    bin_dir = image.path / "usr/bin"
    link = bin_dir / "python3"
    python = os.path.normpath(link.parent / os.readlink(link)) if link.is_symlink() else str(link)
    applets = sorted(p.name for p in bin_dir.iterdir() if p.is_symlink() and os.readlink(p) == "busybox")
    libs = sorted(str(p.relative_to(image.path)) for p in image.path.rglob("*.so*")
                  if not any(part.startswith("python3") for part in p.relative_to(image.path).parts[:-1]))
    return {"path": str(image.path), "digest": image.digest, "size_bytes": size, "files": files,
            "python": "/" + os.path.relpath(python, image.path),
            "shell": "busybox sh" if (bin_dir / "busybox").is_file() else "none",
            "busybox_applets": len(applets), "shared_libraries": libs,
            "etc": sorted(p.name for p in (image.path / "etc").iterdir())}


def _beneath(stage: Path, host_path: Path) -> Path:
    """Where a host file goes in the image: its own path, with /lib and /lib64 as /usr's (the image's /lib and /lib64
    are links to them, as on a merged-/usr host)."""
    text = str(host_path)
    return stage / "usr" / text.removeprefix("/usr").lstrip("/") if text.startswith(("/usr/", "/lib")) else \
        stage / text.lstrip("/")


def _multiarch(directory: Path) -> bool:
    return directory.parent.name == "lib" and directory.name.endswith("-linux-gnu")


def _skipped(name: str) -> bool:
    # The build configuration (config-3.11-x86_64-linux-gnu) serves compiling extensions, not running code.
    return name in _STDLIB_SKIP or name.startswith("config-")


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _run(argv: list[str], *, check: bool = True) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeBuildFailed(f"{argv[0]}: {exc}") from exc
    if check and done.returncode != 0:
        raise RuntimeBuildFailed(f"{' '.join(argv[:3])}: exit {done.returncode}: "
                                 f"{done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout.decode(errors="replace")
