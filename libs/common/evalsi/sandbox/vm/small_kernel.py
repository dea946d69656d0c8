"""The small guest kernel: Linux built from Debian's ``linux-source-6.1`` with only what the microVM guest uses.

Debian's packaged kernel boots in seconds under TCG (it probes hardware a microvm does not have, and loads its
virtio, ext4 and overlay drivers as modules from the initramfs); this one boots in a fraction of that. Its config is
``make allnoconfig`` with the fragment shipped beside this module (``guest.config``) forced on top
(``KCONFIG_ALLCONFIG``): everything built in, no modules. Every option the fragment sets must survive into the final
``.config``: one a Kconfig dependency dropped is an error that names it, never a kernel quietly missing a feature.

Built once (``evalsi sandbox kernel build``: ``make -j<cores> vmlinux``, minutes) and cached by the digest of its
inputs (the source tarball's identity, the fragment, the compiler's and linker's versions, this module's format)
under ``<vm cache>/kernel/<digest>/``: ``vmlinux`` (the uncompressed ELF microvm boots through PVH), ``config`` and
``build.json``. The build runs in a staging directory beside the entry, under a per-digest lock, and is renamed into
place when complete, so concurrent builders end with one kernel and a crashed build leaves nothing served.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evalsi.sandbox.cache_lock import locked, owned_cache_dir
from evalsi.sandbox.vm.images import BuildFailed
from evalsi.sandbox.vm.kernel import KernelMissing

__all__ = ["FRAGMENT", "SOURCE", "KernelInputs", "SmallKernel", "build_small_kernel", "find_small_kernel",
           "fragment_options", "kernel_inputs", "missing_options"]

SOURCE = Path("/usr/src/linux-source-6.1.tar.xz")
FRAGMENT = Path(__file__).with_name("guest.config")
# Bump when the build's steps or the entry's layout change, so caches rebuild.
_FORMAT = "small-kernel-1"
_BUILD_DEPS = "apt-get install -y --no-install-recommends linux-source-6.1 build-essential flex bison bc libelf-dev"
_TOOLS = ("make", "gcc", "ld", "flex", "bison", "bc", "tar", "xz")
_BUILD_TIMEOUT_S = 3 * 3600  # a loaded 2-core machine takes minutes; past hours something is stuck
_OPTION = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
_MAX_FRAGMENT_BYTES = 64 * 1024


@dataclass(frozen=True)
class KernelInputs:
    """What the kernel is made of: a different value of any of these is a different kernel."""

    source: Path
    source_identity: str  # path, size and mtime: the package manager replaces the tarball on an upgrade
    fragment: str
    toolchain: str  # the first lines of `gcc --version` and `ld --version`

    def digest(self) -> str:
        return _sha([_FORMAT, self.source_identity, self.fragment, self.toolchain])[:24]

    def fragment_digest(self) -> str:
        return _sha([self.fragment])[:24]


@dataclass(frozen=True)
class SmallKernel:
    """A built kernel in the cache."""

    path: Path  # the vmlinux
    digest: str
    version: str  # `make kernelrelease`, e.g. 6.1.192
    size_bytes: int
    fragment_digest: str
    config: Path
    build_seconds: float
    toolchain: str

    @property
    def label(self) -> str:
        return f"small {self.version} {self.digest[:12]}"


def kernel_inputs(source: Path = SOURCE, fragment: Path = FRAGMENT) -> KernelInputs:
    """The inputs on this host; ``KernelMissing`` names the package that is missing."""
    try:
        st = source.stat()
    except OSError:
        raise KernelMissing(f"{source}: no kernel source to build the small guest kernel from; install the build "
                            f"dependencies with `{_BUILD_DEPS}`") from None
    text = fragment.read_text()
    if len(text) > _MAX_FRAGMENT_BYTES:
        raise BuildFailed(f"{fragment}: {len(text)} bytes, over the limit of {_MAX_FRAGMENT_BYTES}")
    fragment_options(text, fragment)  # a malformed fragment is refused before anything is built
    toolchain = "\n".join(_first_line([tool, "--version"]) for tool in ("gcc", "ld"))
    return KernelInputs(source, f"{source}:{st.st_size}:{st.st_mtime_ns}", text, toolchain)


def fragment_options(text: str, where: Path = FRAGMENT) -> dict[str, str]:
    """The options a config fragment sets (``CONFIG_X=value``, or ``n`` for ``# CONFIG_X is not set``); any other
    non-comment line is an error naming its line."""
    options: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        unset = _UNSET.match(line)
        if unset:
            options[unset.group(1)] = "n"
            continue
        if line.startswith("#"):
            continue
        match = _OPTION.match(line)
        if match is None:
            raise BuildFailed(f"{where}:{number}: {line!r}; accepted: CONFIG_NAME=value, '# CONFIG_NAME is not "
                              "set', a comment or a blank line")
        options[match.group(1)] = match.group(2)
    return options


def missing_options(fragment: dict[str, str], config_text: str) -> list[str]:
    """The fragment's options whose value the final .config does not have (``NAME=wanted (got: value)``)."""
    final = fragment_options(config_text, Path(".config"))
    missing = []
    for name, wanted in fragment.items():
        got = final.get(name, "n")
        if got != wanted:
            missing.append(f"{name}={wanted} (got: {'not set' if got == 'n' else got})")
    return missing


def find_small_kernel(vm_cache: Path, inputs: KernelInputs | None = None) -> SmallKernel | None:
    """The built kernel for ``inputs`` (default: this host's) in ``vm_cache``, or None when it is not built."""
    inputs = inputs or kernel_inputs()
    return _load(owned_cache_dir(vm_cache / "kernel") / inputs.digest())


def build_small_kernel(vm_cache: Path, *, jobs: int | None = None, inputs: KernelInputs | None = None,
                       progress: Callable[[str], None] | None = None) -> tuple[SmallKernel, bool]:
    """The kernel for ``inputs`` (default: this host's), built into ``vm_cache`` when missing; whether it was built
    now. Blocking (minutes): call it from a thread in async code."""
    inputs = inputs or kernel_inputs()
    base = owned_cache_dir(vm_cache / "kernel")
    digest = inputs.digest()
    target = base / digest
    found = _load(target)
    if found is not None:
        return found, False
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        raise KernelMissing(f"cannot build the small guest kernel: {', '.join(missing)} not found; install the "
                            f"build dependencies with `{_BUILD_DEPS}`")
    say = progress or (lambda _: None)
    with locked(base / f".{digest}.lock"):
        found = _load(target)  # another process built it while this one waited
        if found is not None:
            return found, False
        for stale in base.glob(f".build-{digest}-*"):  # a build that crashed; only a holder of the lock stages
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".build-{digest}-", dir=base))
        try:
            _build(inputs, staging, jobs or os.cpu_count() or 1, say)
            if target.exists():  # an entry without its build.json: a copy some other way left half
                shutil.rmtree(target)
            os.rename(staging / "out", target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    built = _load(target)
    assert built is not None
    return built, True


def _build(inputs: KernelInputs, staging: Path, jobs: int, say: Callable[[str], None]) -> None:
    started = time.monotonic()
    log = staging / "build.log"
    say(f"unpacking {inputs.source}")
    _run(["tar", "-xf", str(inputs.source), "-C", str(staging)], log, cwd=staging)
    sources = [p for p in staging.iterdir() if p.is_dir() and (p / "Makefile").is_file()]
    if len(sources) != 1:
        raise BuildFailed(f"{inputs.source}: expected one kernel source tree inside, found "
                          f"{[p.name for p in sources]}")
    src, build, out = sources[0], staging / "build", staging / "out"
    fragment = staging / "guest.config"
    fragment.write_text(inputs.fragment)
    build.mkdir()
    make = ["make", "-C", str(src), f"O={build}"]
    say("configuring: make allnoconfig with the guest fragment")
    _run([*make, f"KCONFIG_ALLCONFIG={fragment}", "allnoconfig"], log, cwd=staging)
    config_text = (build / ".config").read_text()
    dropped = missing_options(fragment_options(inputs.fragment), config_text)
    if dropped:
        raise BuildFailed(f"{FRAGMENT}: the final .config lacks what the fragment asks for (a Kconfig dependency "
                          f"is unmet): {', '.join(dropped)}")
    say(f"compiling: make -j{jobs} vmlinux (minutes)")
    _run([*make, f"-j{jobs}", "vmlinux"], log, cwd=staging)
    version = _run([*make, "-s", "kernelrelease"], log, cwd=staging).strip()
    out.mkdir()
    shutil.copyfile(build / "vmlinux", out / "vmlinux")
    (out / "config").write_text(config_text)
    meta = {"digest": inputs.digest(), "version": version, "fragment_digest": inputs.fragment_digest(),
            "source": inputs.source_identity, "toolchain": inputs.toolchain, "jobs": jobs,
            "build_seconds": round(time.monotonic() - started, 1)}
    # Written last: an entry is complete exactly when its build.json is there.
    (out / "build.json").write_text(json.dumps(meta, indent=2) + "\n")


def _load(entry: Path) -> SmallKernel | None:
    try:
        meta = json.loads((entry / "build.json").read_text())
        vmlinux = entry / "vmlinux"
        return SmallKernel(vmlinux, str(meta["digest"]), str(meta["version"]), vmlinux.stat().st_size,
                           str(meta["fragment_digest"]), entry / "config", float(meta["build_seconds"]),
                           str(meta["toolchain"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _run(argv: list[str], log: Path, *, cwd: Path) -> str:
    with log.open("ab") as sink:
        sink.write(f"$ {' '.join(argv)}\n".encode())
        sink.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=sink, check=False,
                                  timeout=_BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildFailed(f"{argv[0]} {argv[-1]}: {exc}") from exc
        sink.write(done.stdout)
    if done.returncode != 0:
        tail = log.read_bytes()[-1500:].decode(errors="replace")
        raise BuildFailed(f"{' '.join(argv[:1] + argv[-1:])}: exit {done.returncode}; the log's tail:\n{tail}")
    return done.stdout.decode(errors="replace")


def _first_line(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return f"{argv[0]}: not found"  # the build says what to install; the digest still names the toolchain
    return done.stdout.decode(errors="replace").partition("\n")[0].strip()


def _sha(parts: list[str]) -> str:
    return hashlib.sha256("\n\0".join(parts).encode()).hexdigest()
