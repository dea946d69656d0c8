"""Images built from a Dockerfile without a Docker engine: each step applied to a copy of the root, every RUN in a
bubblewrap sandbox, cached by a digest chain (docs/environments.md, "Images from a Dockerfile").

The base (``FROM``) is the runtime image (``evalsi/runtime``), ``scratch`` (an empty root) or an OCI image resolved
by ``oci.py`` under the operator's ``sandbox.images`` (registries, bounds). Then, step by step:

- ``COPY``/``ADD`` of context files (``build_context.py``) applied by the one rule of ``layers.py``;
- ``RUN`` in the bwrap rung with the image's root itself bound read-write as ``/`` (every other part of the profile
  as for any sandbox: user namespace, uid 65534, no capabilities, seccomp, cgroups and rlimits, the wall-clock
  timeout), the network denied unless the request's allowlist says otherwise; a non-zero exit is the Dockerfile's
  mistake (``BadInputError`` naming its line, the exit status and the stderr's tail), a runner failure ours;
- ``ENV``, ``WORKDIR``, ``USER``, ``LABEL``, ``ARG``: the image's config (ENV and WORKDIR become the sandbox's
  variables and working directory; WORKDIR is also made in the root).

Each step's identity is ``sha256(previous step's digest, the instruction with its variables substituted, the
digest of what it copied)``, starting from the base's digest: the image's digest is the last one. An entry
``cache_dir/dockerfile/sha256/<hex>/`` holds ``image.json`` and ``rootfs`` (a whole root after a step that changed
files; a link to the unchanged root otherwise). Entries are staged in a private directory and renamed into place
under a per-digest lock (``cache_lock.py``), so concurrent builds end with one good entry; a build whose every step
is cached runs nothing (only the COPY sources are read again, to compute their digests). After each RUN the root is
settled: special files removed, setuid/setgid/sticky and group/other write bits stripped, owners back to this
process's user, and its size bounded by ``sandbox.images.max_bytes``/``max_files``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from io import BytesIO
from pathlib import Path
from typing import Any, Protocol

from evalsi.errors import BadInputError, InfraError
from evalsi.sandbox import host_files
from evalsi.sandbox.build_context import ContextBudget, CopyArchive, copy_archive
from evalsi.sandbox.cache_lock import locked, owned_cache_dir
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.dockerfile import RUNTIME_BASE, Dockerfile, Step, parse_dockerfile
from evalsi.sandbox.host_user import HostUser
from evalsi.sandbox.layers import Budget, LayerRefused, apply_layer
from evalsi.sandbox.model import (
    DEFAULT_RESOURCES,
    Level,
    NetworkPolicy,
    Resources,
    RootFilesystem,
    SandboxSession,
    SandboxSpec,
)
from evalsi.sandbox.oci import ImageCache
from evalsi.sandbox.oci_config import ImageSettings
from evalsi.sandbox.runtime_image import ensure_runtime_image

__all__ = ["BuildDriver", "BuiltImage", "build_image", "built_spec", "find_image", "read_dockerfile",
           "seed_workspace"]

_FORMAT = "evalsi-dockerfile/1"
_TAIL = 2000
_NO_NETWORK = NetworkPolicy()
_SEED_BYTES = 256 << 20  # what a sandbox's workspace is seeded with from the image's WORKDIR, at most


class BuildDriver(Protocol):
    """The bwrap rung as a build uses it: a session whose executions write ``build_root`` itself."""

    host_user: HostUser | None

    async def create(self, spec: SandboxSpec, *, build_root: Path | None = None) -> SandboxSession: ...


@dataclass(frozen=True)
class ImageConfig:
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = ""
    user: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    args: tuple[tuple[str, str], ...] = ()

    def after(self, step: Step) -> ImageConfig:
        if step.kind == "ENV":
            return replace(self, env=_merged(self.env, step.pairs))
        if step.kind == "LABEL":
            return replace(self, labels=_merged(self.labels, step.pairs))
        if step.kind == "ARG":
            return replace(self, args=_merged(self.args, step.pairs))
        if step.kind == "USER":
            return replace(self, user=step.value)
        if step.kind == "WORKDIR":
            return replace(self, workdir=_absolute(step.value, self.workdir))
        return self

    def to_json(self) -> dict[str, Any]:
        return {"env": dict(self.env), "workdir": self.workdir or "/", "user": self.user, "labels": dict(self.labels)}


@dataclass(frozen=True)
class BuiltImage:
    digest: str  # sha256:<hex>, the last step's
    path: Path  # the root: cache_dir/dockerfile/sha256/<hex>/rootfs
    config: ImageConfig = field(default_factory=ImageConfig)
    steps_run: int = 0
    steps_cached: int = 0


def read_dockerfile(path: Path, where: str) -> Dockerfile:
    """The Dockerfile at ``path`` parsed; ``BadInputError`` naming ``where`` when it cannot be read."""
    try:
        if path.stat().st_size > 1 << 20:
            raise BadInputError(f"{where}: {path}: over the limit of {1 << 20} bytes")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{where}: {path}: cannot be read ({exc})") from None
    return parse_dockerfile(text, str(path))


def find_image(root: RootFilesystem, cache_dir: Path, images: ImageSettings | None = None) -> BuiltImage:
    """The built image of a ``dockerfile`` root, found in the cache (nothing runs); ``BadInputError`` when a step
    is not built. Blocking: call it from a thread in async code."""
    image = _Build(root, cache_dir, images, None, NetworkPolicy(), DEFAULT_RESOURCES).lookup()
    if image is None:
        raise BadInputError(f"root: {root.path}: not built yet (a sandbox opened through the ladder builds it; "
                            "`evalsi sandbox image build --file ...` builds it ahead)")
    return image


async def build_image(root: RootFilesystem, config: SandboxConfig, driver: BuildDriver, *,
                      network: NetworkPolicy = _NO_NETWORK, resources: Resources = DEFAULT_RESOURCES
                      ) -> BuiltImage:
    """Build the ``dockerfile`` root's image (the steps not cached), each RUN in a sandbox from ``driver`` under
    ``network`` and ``resources``."""
    return await _Build(root, config.cache_dir, config.images, driver, network, resources).run()


async def built_spec(spec: SandboxSpec, config: SandboxConfig, driver: BuildDriver
                     ) -> tuple[SandboxSpec, BuiltImage]:
    """``spec`` with its Dockerfile's image built, its ENV under the request's own variables and its WORKDIR as the
    working directory (the default /workspace when the Dockerfile sets none)."""
    image = await build_image(spec.root, config, driver, network=spec.network, resources=spec.resources)
    workdir = image.config.workdir if image.config.workdir not in ("", "/") else spec.workdir
    return replace(spec, env={**dict(image.config.env), **spec.env}, workdir=workdir), image


async def seed_workspace(session: SandboxSession, image: BuiltImage, workdir: str) -> None:
    """What the image holds at ``workdir`` copied into the session's workspace (bound over it): a Dockerfile's
    ``WORKDIR /app`` then ``COPY . .`` gives the sandbox its files in a writable /app."""
    source = _inside(image.path, workdir)
    if source is None or not any(source.iterdir()):
        return
    workspace = getattr(session, "host_workspace", None)
    if not isinstance(workspace, str) or not workspace:
        raise BadInputError(f"root: the image's WORKDIR {workdir} holds files, which only a rung with a host "
                            "workspace (bwrap, gvisor) starts from")
    archive = await asyncio.to_thread(host_files.copy_tree_to_tar, str(source), max_bytes=_SEED_BYTES)
    await asyncio.to_thread(host_files.restore_tar, workspace, archive, max_bytes=_SEED_BYTES)


class _Build:
    def __init__(self, root: RootFilesystem, cache_dir: Path, images: ImageSettings | None,
                 driver: BuildDriver | None, network: NetworkPolicy, resources: Resources) -> None:
        if root.kind != "dockerfile":
            raise BadInputError(f"root: expected a dockerfile root, got {root.kind}")
        self.dockerfile_path = Path(root.path)
        self.context = Path(root.context) if root.context else self.dockerfile_path.parent
        self.cache_dir = cache_dir
        self.images = images or ImageSettings()
        self.driver = driver
        self.network = network
        self.resources = resources
        self.base = cache_dir / "dockerfile"
        self.name = str(self.dockerfile_path)

    def lookup(self) -> BuiltImage | None:
        base, plan, config = self._plan()
        if any(not _entry_ok(planned.entry) for planned in plan):
            _close(plan)
            return None
        return BuiltImage(plan[-1].key if plan else base.key, (plan[-1].entry if plan else base.entry) / "rootfs",
                          config, 0, len(plan))

    async def run(self) -> BuiltImage:
        base, plan, config = await asyncio.to_thread(self._plan)
        tree = base.entry / "rootfs"
        ran = 0
        try:
            for planned in plan:
                if not _entry_ok(planned.entry):
                    ran += await self._make(planned, tree)
                tree = planned.entry / "rootfs"
        finally:
            _close(plan)
        final = plan[-1] if plan else base
        return BuiltImage(final.key, final.entry / "rootfs", config, ran, len(plan) - ran)

    def _plan(self) -> tuple[_Base, list[_Planned], ImageConfig]:
        """Every step's digest and entry (blocking: the Dockerfile and the COPY sources are read); a COPY whose entry
        is missing keeps its archive open for the build."""
        dockerfile = read_dockerfile(self.dockerfile_path, "root.dockerfile")
        if not self.context.is_dir():
            raise BadInputError(f"root.context: {self.context}: not a directory")
        owned_cache_dir(owned_cache_dir(self.cache_dir) / "dockerfile")
        owned_cache_dir(self.base / "sha256")
        base = self._base(dockerfile)
        key, config = base.key, ImageConfig()
        budget = ContextBudget()
        plan: list[_Planned] = []
        try:
            for step in dockerfile.steps:
                where = f"{self.name}:{step.line}: {step.kind}"
                archive = None
                if step.kind == "COPY":
                    archive = copy_archive(str(self.context), step.sources, step.dest, config.workdir, budget, where)
                key = _digest(f"{key}\n{step.canonical()}\n{archive.digest if archive is not None else ''}")
                entry = self.base / "sha256" / key.partition(":")[2]
                if archive is not None and _entry_ok(entry):
                    archive.stream.close()
                    archive = None
                plan.append(_Planned(step, key, config, config.after(step), entry, archive, where))
                config = plan[-1].after
        except BaseException:
            _close(plan)
            raise
        return base, plan, config

    def _base(self, dockerfile: Dockerfile) -> _Base:
        """The base's entry: the chain's start, its root a link to the runtime image or the OCI image (an empty
        directory for scratch)."""
        where = f"{self.name}:{dockerfile.base_line}: FROM"
        root: Path | None = None
        if dockerfile.base == RUNTIME_BASE:
            runtime = ensure_runtime_image(self.cache_dir)
            identity, root = f"runtime {runtime.digest}", runtime.path
        elif dockerfile.base == "scratch":
            identity = "scratch"
        else:
            root = ImageCache(self.cache_dir, self.images).resolve(dockerfile.base, where)
            identity = f"oci {root.parent.parent.name}:{root.parent.name}"
        key = _digest(f"{_FORMAT}\n{identity}")
        entry = self.base / "sha256" / key.partition(":")[2]
        if not _entry_ok(entry):
            with locked(self.base / ".locks" / entry.name):
                if not _entry_ok(entry):
                    staging = self._staging(entry.name)
                    try:
                        if root is None:
                            (staging / "rootfs").mkdir(mode=0o755)
                        else:
                            os.symlink(os.path.realpath(root), staging / "rootfs")
                        _commit(staging, entry, {"digest": key, "base": dockerfile.base, "config": {}})
                    finally:
                        shutil.rmtree(staging, ignore_errors=True)
        return _Base(key, entry)

    def _staging(self, hexdigest: str) -> Path:
        for stale in self.base.glob(f".build-{hexdigest}-*"):  # a crashed build's: only a lock holder stages
            shutil.rmtree(stale, ignore_errors=True)
        staging = Path(tempfile.mkdtemp(prefix=f".build-{hexdigest}-", dir=self.base))
        os.chmod(staging, 0o755)  # the sandbox's host user binds the root beneath it
        return staging

    async def _make(self, planned: _Planned, tree: Path) -> int:
        """Build ``planned``'s entry on ``tree`` (1), or find that another builder did while this one waited (0)."""
        entry, step = planned.entry, planned.step
        lock = locked(self.base / ".locks" / entry.name)
        waiting = asyncio.ensure_future(asyncio.to_thread(lock.__enter__))
        try:
            await asyncio.shield(waiting)
        except asyncio.CancelledError:  # the thread still takes the lock: release it then, or it is held forever
            waiting.add_done_callback(lambda done: None if done.exception() else lock.__exit__(None, None, None))
            raise
        try:
            if _entry_ok(entry):
                return 0
            staging = await asyncio.to_thread(self._staging, entry.name)
            try:
                rootfs = staging / "rootfs"
                changes = step.kind in ("RUN", "COPY") or (step.kind == "WORKDIR"
                                                          and _inside(tree, planned.after.workdir) is None)
                if not changes:
                    os.symlink(os.path.realpath(tree), rootfs)
                else:
                    await asyncio.to_thread(shutil.copytree, os.path.realpath(tree), rootfs, symlinks=True)
                    if step.kind == "RUN":
                        await self._run(step, rootfs, planned.before, planned.where)
                    else:
                        stream = (planned.archive.stream if planned.archive is not None
                                  else _directory_tar(planned.after.workdir))
                        await asyncio.to_thread(self._apply, stream, rootfs, planned.where)
                meta = {"digest": planned.key, "line": step.line, "instruction": step.text[:4096],
                        "config": planned.after.to_json(), "created": time.time()}
                await asyncio.to_thread(_commit, staging, entry, meta)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        finally:
            lock.__exit__(None, None, None)
        return 1

    def _apply(self, stream: Any, rootfs: Path, where: str) -> None:
        budget = Budget(self.images.max_bytes, self.images.max_files, "sandbox.images.max_bytes",
                        "sandbox.images.max_files")
        try:
            apply_layer(stream, str(rootfs), budget, whiteouts=False)
        except LayerRefused as exc:
            raise BadInputError(f"{where}: {exc}") from None
        _settle(rootfs, None, self.images, where)

    async def _run(self, step: Step, rootfs: Path, config: ImageConfig, where: str) -> None:
        assert self.driver is not None
        user = self.driver.host_user
        if user is not None:  # bwrap runs as this unprivileged host user: the root must be its to write
            await asyncio.to_thread(_owners, rootfs, (user.uid, user.gid))
        workdir = config.workdir or "/"
        spec = SandboxSpec(min_isolation=Level.NAMESPACED, ladder=("bwrap",), network=self.network,
                           resources=self.resources, env={**dict(step.pairs), **dict(config.env)}, workdir=workdir)
        if _inside(rootfs, workdir) is None:
            raise BadInputError(f"{where}: its working directory {workdir} is not a directory in the image")
        session = await self.driver.create(spec, build_root=rootfs)
        try:
            result = await session.exec(list(step.argv))
        finally:
            await session.destroy()
        await asyncio.to_thread(_settle, rootfs, (os.geteuid(), os.getegid()) if user is not None else None,
                                self.images, where)
        outcome = result.outcome
        if outcome.kind == "exit" and outcome.code == 0:
            return
        if outcome.kind == "runner_failure":
            raise InfraError(f"{where}: the build's sandbox failed: {outcome.signature}")
        how = {"exit": f"exited {outcome.code}", "timeout": f"timed out after {self.resources.timeout_s:g}s",
               "denied": f"was denied by the sandbox ({outcome.effect})"}[outcome.kind]
        tail = (result.stderr or result.stdout)[-_TAIL:].decode("utf-8", "replace").strip()
        raise BadInputError(f"{where} {' '.join(step.argv)[:200]!r} {how}" + (f": {tail}" if tail else ""))


@dataclass(frozen=True)
class _Base:
    key: str
    entry: Path


@dataclass
class _Planned:
    step: Step
    key: str
    before: ImageConfig
    after: ImageConfig
    entry: Path
    archive: CopyArchive | None
    where: str


def _close(plan: list[_Planned]) -> None:
    for planned in plan:
        if planned.archive is not None:
            planned.archive.stream.close()


def _digest(text: str) -> str:
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"


def _merged(pairs: tuple[tuple[str, str], ...], more: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    merged = dict(pairs)
    merged.update(more)
    return tuple(merged.items())


def _absolute(path: str, workdir: str) -> str:
    return posixpath.normpath(posixpath.join(workdir or "/", path))


def _entry_ok(entry: Path) -> bool:
    return (entry / "image.json").is_file() and (entry / "rootfs").is_dir()


def _commit(staging: Path, entry: Path, meta: Mapping[str, Any]) -> None:
    (staging / "image.json").write_text(json.dumps(meta, indent=1))
    if entry.exists():  # a crashed build's half entry (no image.json): never served
        shutil.rmtree(entry, ignore_errors=True)
    os.rename(staging, entry)


def _inside(root: Path, path: str) -> Path | None:
    """``path`` (absolute, in the image) as a host directory under ``root``, when every component is a real
    directory (never a link a RUN step planted); else None."""
    current = Path(os.path.realpath(root))
    for part in [part for part in path.split("/") if part not in ("", ".")]:
        if part == "..":
            return None
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return None
        except OSError:
            return None
    return current


def _directory_tar(path: str) -> BytesIO:
    buffer = BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        member = tarfile.TarInfo(path.strip("/") or ".")
        member.type = tarfile.DIRTYPE
        member.mode = 0o755
        archive.addfile(member)
    buffer.seek(0)
    return buffer


def _owners(root: Path, owner: tuple[int, int]) -> None:
    """Every entry of ``root`` (links themselves, never followed) handed to ``owner``."""
    os.chown(root, *owner)
    for _, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirnames + filenames:
            os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)


def _settle(root: Path, owner: tuple[int, int] | None, images: ImageSettings, where: str) -> None:
    """The root after a step: special files removed, modes as ``layers.py`` leaves them, owners back to
    ``owner``, and its files and bytes within the image bounds."""
    files = size = 0
    if owner is not None:
        os.chown(root, *owner)
    for _, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in dirnames + filenames:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if owner is not None:
                os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISLNK(info.st_mode):
                pass
            elif stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                mode = stat.S_IMODE(info.st_mode)
                if mode & ~0o755:
                    os.chmod(name, mode & 0o755 | (0o700 if stat.S_ISDIR(info.st_mode) else 0), dir_fd=dir_fd)
                size += info.st_size if stat.S_ISREG(info.st_mode) else 0
            else:
                os.unlink(name, dir_fd=dir_fd)  # a FIFO or socket a RUN left: an image keeps files and links
                continue
            files += 1
    if files > images.max_files:
        raise BadInputError(f"{where}: the image holds more than {images.max_files} files (sandbox.images.max_files)")
    if size > images.max_bytes:
        raise BadInputError(f"{where}: the image holds more than {images.max_bytes} bytes (sandbox.images.max_bytes)")
