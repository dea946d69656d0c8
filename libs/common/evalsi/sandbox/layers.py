"""Applying an untrusted tar stream to a root directory: the one rule for root tarballs and OCI image layers.

Each member is checked before anything is written:

- names: a leading ``/`` or ``./`` is stripped (the member lands inside the root); ``..`` anywhere is refused;
- symbolic links: an absolute target is kept, because it is resolved inside the sandbox, where the root is ``/``
  (real images hold many, e.g. ``/etc/localtime``); a relative target climbing above the root is refused;
- hard links: the target must be a file already in the root, named without ``..``;
- device nodes and FIFOs are refused; setuid, setgid and sticky bits and group/other write bits are stripped;
  owners are not applied (the sandbox's user reads the files as root's).

The host never follows a link the tarball made: a member's parent directories are resolved *inside* the root (an
absolute link restarts at the root, ``..`` stops at it, as a chroot would), and the member itself is created with
``O_EXCL | O_NOFOLLOW`` after whatever was there is removed. The root is a private staging directory no one else
writes while this runs, so there is no race between the check and the write.

With ``whiteouts`` (OCI layers), ``.wh.NAME`` deletes NAME from the layers below and ``.wh..wh..opq`` empties its
directory of what the layers below put there. A ``Budget`` bounds the files and unpacked bytes of all layers
together; past it the whole unpack is refused naming the limit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tarfile
from dataclasses import dataclass, field
from typing import IO

from evalsi.errors import BadInputError

__all__ = ["BoundedTarInfo", "Budget", "LayerRefused", "LimitExceeded", "apply_layer"]

_WHITEOUT = ".wh."
_OPAQUE = ".wh..wh..opq"
_MAX_HOPS = 40
# tarfile reads a PAX or GNU long-name header into memory whole, before any member reaches us: its size is checked
# first, or a few compressed megabytes of zeros would be gigabytes of memory.
_MAX_EXTENSION_BYTES = 1 << 20
_EXTENSION_TYPES = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                    tarfile.GNUTYPE_LONGLINK)
_CHUNK = 1 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class LayerRefused(BadInputError):
    """A member (or the stream) broke the rule: the whole unpack is refused, naming it."""


class LimitExceeded(LayerRefused):
    """The layers together passed a bound of the ``Budget``: the refusal names the limit's key."""


@dataclass
class Budget:
    """What all layers of one root may add up to; ``bytes_key``/``files_key`` name the limits in refusals."""

    max_bytes: int
    max_files: int
    bytes_key: str
    files_key: str
    bytes: int = 0
    files: int = 0

    def charge(self, size: int) -> None:
        self.files += 1
        self.bytes += max(size, 0)
        if self.files > self.max_files:
            raise LimitExceeded(f"more than {self.max_files} files ({self.files_key})")
        if self.bytes > self.max_bytes:
            raise LimitExceeded(f"more than {self.max_bytes} bytes unpacked ({self.bytes_key})")


class BoundedTarInfo(tarfile.TarInfo):
    """tarfile's member header, refusing an extension header (PAX, GNU long name) over ``_MAX_EXTENSION_BYTES``
    before tarfile reads it. ``_proc_member`` is tarfile's one dispatch on a header's type (private, stable since
    Python 2.x; tests/sandbox/test_layers.py fails if it stops being called)."""

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENSION_TYPES and self.size > _MAX_EXTENSION_BYTES:
            raise LayerRefused(f"an extension header (PAX or GNU long name) of {self.size} bytes; at most "
                               f"{_MAX_EXTENSION_BYTES}")
        member: tarfile.TarInfo = super()._proc_member(archive)  # type: ignore[misc]  # not in typeshed
        return member


@dataclass
class _Layer:
    root: str
    whiteouts: bool
    # Paths (relative, resolved) this layer created, and their parents: an opaque whiteout keeps them.
    touched: set[str] = field(default_factory=set)


def apply_layer(stream: IO[bytes], root: str, budget: Budget, *, whiteouts: bool) -> None:
    """Apply the tar ``stream`` (a seekable file: plain, gzip, bzip2 or xz) to the directory ``root``. Raises
    ``LayerRefused`` naming the member or the limit; the caller discards the root then."""
    if stream.read(4) == _ZSTD_MAGIC:
        raise LayerRefused("a zstd-compressed layer; accepted: tar, tar+gzip, tar+bzip2, tar+xz")
    stream.seek(0)
    layer = _Layer(root, whiteouts)
    try:
        with tarfile.open(fileobj=stream, mode="r|*", tarinfo=BoundedTarInfo) as archive:
            # next(), not iteration: iterating keeps every member's header in archive.members (about 450 bytes
            # each, 200 MiB at max_files' default), which a stream never reads back.
            while (member := archive.next()) is not None:
                archive.members.clear()  # type: ignore[attr-defined]  # not in typeshed; tarfile.py has it
                try:
                    _apply(layer, archive, member, budget)
                except LimitExceeded:
                    raise
                except LayerRefused as exc:
                    raise LayerRefused(f"member {member.name[:200]!r} refused: {exc}") from None
                except OSError as exc:
                    raise LayerRefused(f"member {member.name[:200]!r} could not be written: {exc.strerror}") from None
    except (tarfile.TarError, EOFError, ValueError) as exc:
        raise LayerRefused(f"not a readable tarball: {exc}") from None


def _name_parts(name: str) -> list[str]:
    """The member's path as components inside the root; ``..`` refused."""
    if "\0" in name or len(name) > 4096:
        raise LayerRefused("a name with NUL or over 4096 characters")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise LayerRefused("'..' would place it outside the destination")
    return parts


def _apply(layer: _Layer, archive: tarfile.TarFile, member: tarfile.TarInfo, budget: Budget) -> None:
    parts = _name_parts(member.name)
    budget.charge(member.size if member.isfile() else 0)
    if not parts:  # the root itself ("./"): nothing to create
        return
    base = parts[-1]
    if layer.whiteouts and base.startswith(_WHITEOUT):
        parent = _resolve(layer.root, parts[:-1], create=False)
        if parent is None:
            return
        if base == _OPAQUE:
            _opaque(layer, parent)
        elif not base.startswith(_WHITEOUT + _WHITEOUT):  # other .wh..wh. names are aufs bookkeeping
            hidden = base[len(_WHITEOUT):]
            if hidden in ("", ".", ".."):
                # os.path.join would name the directory itself or its parent: never removed by a whiteout.
                raise LayerRefused(f"a whiteout {base[:200]!r} that names no file")
            _remove(os.path.join(layer.root, *parent, hidden))
        return
    if member.ischr() or member.isblk() or member.isfifo() or not (
            member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise LayerRefused("a special file (device, FIFO or unknown type); accepted: files, directories, links")
    parent = _resolve(layer.root, parts[:-1], create=True)
    assert parent is not None
    relative = "/".join([*parent, base])
    path = os.path.join(layer.root, relative)
    mode = member.mode & 0o755
    if member.isdir():
        existing = _lstat(path)
        if existing is not None and not stat.S_ISDIR(existing.st_mode):
            _remove(path)
            existing = None
        if existing is None:
            os.mkdir(path, 0o700)
        os.chmod(path, mode | 0o700, follow_symlinks=False)
    else:
        _remove(path)
        if member.issym():
            _check_symlink(parent, member.linkname)
            os.symlink(member.linkname, path)
        elif member.islnk():
            target = _resolve(layer.root, _name_parts(member.linkname), create=False)
            source = os.path.join(layer.root, *target) if target is not None else ""
            status = _lstat(source) if source else None
            if status is None or not stat.S_ISREG(status.st_mode):
                raise LayerRefused(f"a hard link to {member.linkname[:200]!r}, which is not a file in the root")
            os.link(source, path, follow_symlinks=False)
        else:
            _write_file(archive, member, path, mode | 0o600)
    layer.touched.add(relative)
    for index in range(len(parent)):
        layer.touched.add("/".join(parent[:index + 1]))


def _check_symlink(parent: list[str], target: str) -> None:
    if not target or "\0" in target or len(target) > 4096:
        raise LayerRefused("a symbolic link with an empty, NUL-holding or overlong target")
    if target.startswith("/"):
        return  # resolved inside the sandbox, where the root is /
    depth = len(parent)
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                raise LayerRefused(f"a symbolic link to {target[:200]!r} points outside the destination")
        elif part not in ("", "."):
            depth += 1


def _write_file(archive: tarfile.TarFile, member: tarfile.TarInfo, path: str, mode: int) -> None:
    source = archive.extractfile(member)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(descriptor, "wb") as target:
        if source is not None:
            while chunk := source.read(_CHUNK):
                target.write(chunk)
        os.fchmod(target.fileno(), mode)
    with contextlib.suppress(OSError, OverflowError):
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)


def _resolve(root: str, parts: list[str], *, create: bool) -> list[str] | None:
    """``parts`` as real directories under ``root``, links resolved inside it (absolute ones from the root, ``..``
    stopping at it); missing directories made when ``create``, else None."""
    resolved: list[str] = []
    pending = list(parts)
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        path = os.path.join(root, *resolved, part)
        status = _lstat(path)
        if status is None:
            if not create:
                return None
            os.mkdir(path, 0o755)
            resolved.append(part)
            continue
        if stat.S_ISLNK(status.st_mode):
            hops += 1
            if hops > _MAX_HOPS:
                raise LayerRefused("too many symbolic links on the way")
            target = os.readlink(path)
            if target.startswith("/"):
                resolved = []
            pending = target.split("/") + pending
            continue
        if not stat.S_ISDIR(status.st_mode):
            if not create:
                return None
            raise LayerRefused(f"{'/'.join([*resolved, part])!r} on its path is not a directory")
        resolved.append(part)
    return resolved


def _opaque(layer: _Layer, parent: list[str]) -> None:
    prefix = "/".join(parent)
    directory = os.path.join(layer.root, prefix)
    for name in os.listdir(directory):
        relative = f"{prefix}/{name}" if prefix else name
        if relative not in layer.touched:
            _remove(os.path.join(directory, name))


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _remove(path: str) -> None:
    status = _lstat(path)
    if status is None:
        return
    if stat.S_ISDIR(status.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
