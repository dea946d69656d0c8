"""A Dockerfile COPY's sources, read from the build context into one tar stream the image build applies.

The context is the user's directory, but what a COPY names must stay in it: every source is opened *beneath* the
context (``host_files.open_beneath``: a ``..`` or a symbolic link leading out of it is refused with the source's
name), directories are walked from descriptors without following links, a link found inside a copied directory is
kept as a link only when its target stays in the context, and anything but files, directories and links is refused.
The stream is deterministic (sorted names, zero times and owners), so its sha256 identifies what was copied in the
build cache's digest chain, and it is applied to the image by the one rule of ``layers.py``, which resolves each
member's parents inside the image (a link a RUN step planted there is never followed on the host).
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import posixpath
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from typing import IO

from evalsi.errors import BadInputError
from evalsi.sandbox.host_files import HostFileError, open_beneath

__all__ = ["MAX_CONTEXT_BYTES", "MAX_CONTEXT_FILES", "ContextBudget", "CopyArchive", "copy_archive"]

# What all the COPY steps of one build may read from the context together.
MAX_CONTEXT_BYTES = 256 << 20
MAX_CONTEXT_FILES = 20_000
_SPOOL = 8 << 20
_CHUNK = 1 << 20
_GLOB = frozenset("*?[")


@dataclass
class ContextBudget:
    bytes: int = 0
    files: int = 0

    def charge(self, size: int, where: str) -> None:
        self.files += 1
        self.bytes += size
        if self.files > MAX_CONTEXT_FILES:
            raise BadInputError(f"{where}: the build copies more than {MAX_CONTEXT_FILES} files from its context")
        if self.bytes > MAX_CONTEXT_BYTES:
            raise BadInputError(f"{where}: the build copies more than {MAX_CONTEXT_BYTES} bytes from its context")


@dataclass
class CopyArchive:
    stream: IO[bytes]  # a tar, positioned at 0
    digest: str  # sha256:<hex> of its bytes


def copy_archive(context: str, sources: tuple[str, ...], dest: str, workdir: str, budget: ContextBudget,
                 where: str) -> CopyArchive:
    """The tar of ``sources`` (context-relative, globs allowed) placed at ``dest`` (absolute, or relative to
    ``workdir``): Docker's rules, a source directory's contents going into ``dest``, and ``dest`` a directory when it
    ends in ``/`` (or is ``.``) or there are several sources; member names are relative to the image's ``/``."""
    target = posixpath.normpath(posixpath.join(workdir or "/", dest)).lstrip("/")
    names = [name for source in sources for name in _expand(context, source, where)]
    into = dest.endswith(("/", "/.")) or dest in (".", "..") or len(names) > 1
    stream = tempfile.SpooledTemporaryFile(max_size=_SPOOL)  # noqa: SIM115  # returned to the caller, who closes it
    root_fd = os.open(context, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for name in names:
                _add(archive, root_fd, name, target, into, budget, where)
    except BaseException:
        stream.close()
        raise
    finally:
        os.close(root_fd)
    stream.seek(0)
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    stream.seek(0)
    return CopyArchive(stream, f"sha256:{digest.hexdigest()}")


def _relative(source: str, where: str) -> str:
    parts = [part for part in source.split("/") if part not in ("", ".")]
    if ".." in parts or "\0" in source:
        raise BadInputError(f"{where}: {source[:200]!r} leaves the build context; sources are paths inside it")
    return "/".join(parts) or "."


def _expand(context: str, source: str, where: str) -> list[str]:
    """The context paths ``source`` names: itself, or its glob's matches (sorted; none is an error). A glob walks
    real directories only."""
    relative = _relative(source, where)
    if not _GLOB & set(relative):
        return [relative]
    matches = ["."]
    for part in relative.split("/"):
        found = []
        for prefix in matches:
            directory = os.path.join(context, prefix)
            if _GLOB & set(part):
                if not os.path.isdir(directory) or os.path.islink(directory):
                    continue
                found += [posixpath.normpath(posixpath.join(prefix, entry)) for entry in sorted(os.listdir(directory))
                          if fnmatch.fnmatchcase(entry, part)]
            else:
                found.append(posixpath.normpath(posixpath.join(prefix, part)))
        matches = found
    if not matches:
        raise BadInputError(f"{where}: {source[:200]!r} matches no file of the build context")
    return matches


def _open(root_fd: int, name: str, where: str) -> int:
    try:
        return open_beneath(root_fd, name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except HostFileError as exc:
        raise BadInputError(f"{where}: {name[:200]!r}: {exc}") from None
    except FileNotFoundError:
        raise BadInputError(f"{where}: {name[:200]!r}: no such file in the build context") from None
    except OSError as exc:
        if exc.errno == errno.EXDEV:  # openat2 refused a resolution leaving the context
            raise BadInputError(f"{where}: {name[:200]!r} leads outside the build context (a symbolic link out of "
                                "it, or '..')") from None
        raise BadInputError(f"{where}: {name[:200]!r}: {exc.strerror}") from None


def _add(archive: tarfile.TarFile, root_fd: int, name: str, target: str, into: bool, budget: ContextBudget,
         where: str) -> None:
    fd = _open(root_fd, name, where)
    try:
        info = os.fstat(fd)
        base = posixpath.basename(name) if name != "." else ""
        if stat.S_ISDIR(info.st_mode):
            _directory(archive, fd, name, target, budget, where)
        elif stat.S_ISREG(info.st_mode):
            path = posixpath.join(target, base) if into else target
            _file(archive, fd, path, info, budget, f"{where}: {name[:200]!r}")
        else:
            raise BadInputError(f"{where}: {name[:200]!r} is not a file or directory")
    finally:
        os.close(fd)


def _directory(archive: tarfile.TarFile, fd: int, name: str, target: str, budget: ContextBudget, where: str) -> None:
    """The directory's contents at ``target``, walked from its descriptor without following links."""
    _member(archive, target, tarfile.DIRTYPE, 0o755)
    depth = len([part for part in name.split("/") if part not in ("", ".")])
    walk = os.fwalk(".", dir_fd=fd, follow_symlinks=False)
    for dirpath, dirnames, filenames, dir_fd in walk:
        dirnames.sort()
        inside = posixpath.normpath(dirpath)
        for entry in sorted(dirnames + filenames):
            relative = entry if inside == "." else f"{inside}/{entry}"
            path = posixpath.join(target, relative)
            label = f"{where}: {posixpath.join(name, relative)[:200]!r}"
            info = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                budget.charge(0, where)
                _member(archive, path, tarfile.DIRTYPE, stat.S_IMODE(info.st_mode))
            elif stat.S_ISLNK(info.st_mode):
                link = os.readlink(entry, dir_fd=dir_fd)
                _check_link(link, depth + relative.count("/"), label)
                budget.charge(0, where)
                _member(archive, path, tarfile.SYMTYPE, 0o777, link)
            elif stat.S_ISREG(info.st_mode):
                file_fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
                try:
                    _file(archive, file_fd, path, os.fstat(file_fd), budget, label)
                finally:
                    os.close(file_fd)
            else:
                raise BadInputError(f"{label}: a special file (FIFO, socket or device); COPY takes files, "
                                    "directories and links")


def _check_link(link: str, depth: int, label: str) -> None:
    """A link inside a copied directory stays a link in the image, only when it points inside the context (it sits
    ``depth`` directories below the context's top)."""
    if link.startswith("/"):
        raise BadInputError(f"{label}: a symbolic link to {link[:200]!r} points outside the build context")
    level = depth
    for part in link.split("/"):
        if part == "..":
            level -= 1
            if level < 0:
                raise BadInputError(f"{label}: a symbolic link to {link[:200]!r} points outside the build context")
        elif part not in ("", "."):
            level += 1


def _file(archive: tarfile.TarFile, fd: int, path: str, info: os.stat_result, budget: ContextBudget,
          label: str) -> None:
    budget.charge(info.st_size, label)
    member = tarfile.TarInfo(path)
    member.size = info.st_size
    member.mode = stat.S_IMODE(info.st_mode)
    with os.fdopen(os.dup(fd), "rb") as handle:
        archive.addfile(member, _Exact(handle, info.st_size, label))


def _member(archive: tarfile.TarFile, path: str, kind: bytes, mode: int, link: str = "") -> None:
    member = tarfile.TarInfo(path or ".")
    member.type = kind
    member.mode = mode
    member.linkname = link
    archive.addfile(member)


class _Exact:
    """The file's bytes as its stat said (a file that changed size while read is refused, not half copied)."""

    def __init__(self, handle: IO[bytes], size: int, label: str) -> None:
        self.handle, self.left, self.label = handle, size, label

    def read(self, size: int = -1) -> bytes:
        want = self.left if size < 0 else min(size, self.left)
        data = self.handle.read(want)
        if len(data) != want:
            raise BadInputError(f"{self.label}: the file changed while it was copied")
        self.left -= len(data)
        return data
