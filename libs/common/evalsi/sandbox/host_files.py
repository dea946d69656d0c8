"""Host-side access to a sandbox's files, safe against links the sandbox planted.

Whatever ran inside a sandbox may have replaced ``out.txt`` with a symlink to ``/etc/shadow``, a directory on the
way with a link to ``/``, or a file with a FIFO that blocks whoever opens it. sandboxd (running with the host's
privileges) reads and writes those files, so every path is resolved by the kernel *beneath* the workspace
directory: ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`` refuses any resolution that would leave it (a
link to an absolute path, ``..`` past the root, a ``/proc`` magic link) with EXDEV, with no window between a check
and the open. Where openat2 is missing (Linux < 5.6) a walk does the same from directory descriptors: each
component opened with ``O_NOFOLLOW``, ``..`` refused. Only regular files are read or replaced, opened
non-blocking (a planted FIFO or device is refused, not waited on).

Run by root, what the host creates in a workspace is handed to the workspace directory's owner (the sandbox's
unprivileged host user, host_user.py), through the descriptors opened beneath it: the sandbox can then change the
files it was given, as it could change its own.

The functions are blocking (plain system calls); async callers run them in a thread.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from pathlib import PurePosixPath
from typing import Any

from evalsi.errors import BadInputError

__all__ = [
    "HostFileError",
    "copy_tree_to_tar",
    "open_beneath",
    "read_beneath",
    "relative_path",
    "restore_tar",
    "write_beneath",
]

_SYS_OPENAT2 = 437  # the same number on x86_64 and the generic table (aarch64)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_MAX_DEPTH = 64


class HostFileError(BadInputError):
    """A sandbox path that cannot be read or written safely (it leaves the workspace, is a link out of it, is no
    regular file, is too large): the caller's request is refused, naming the path."""


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall
    except (OSError, AttributeError):
        return None


_SYSCALL = _load_syscall()
# Decided at the first call: whether this kernel has openat2 (ENOSYS means the walk is used from then on).
_openat2_state: list[bool] = []


def relative_path(path: str, workdir: str = "/workspace") -> str:
    """The path as the caller gave it (relative to the workspace, or absolute under ``workdir``) made relative,
    refused when it is empty, holds a NUL, climbs with ``..`` or is absolute elsewhere."""
    if not path or "\0" in path or len(path) > 4096:
        raise HostFileError(f"path {path[:200]!r}: expected a non-empty path of at most 4096 characters, no NUL")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        base = PurePosixPath(workdir)
        if pure != base and base not in pure.parents:
            raise HostFileError(f"path {path!r}: absolute paths must lie under the workspace {workdir}")
        pure = pure.relative_to(base)
    if ".." in pure.parts:
        raise HostFileError(f"path {path!r}: '..' is not accepted; name a path inside the workspace")
    text = str(pure)
    if text in ("", "."):
        raise HostFileError(f"path {path!r}: names the workspace itself, not a file in it")
    return text


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    # openat2 refuses a mode without O_CREAT (EINVAL), unlike open.
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    assert _SYSCALL is not None
    fd = _SYSCALL(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path)),
                  ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


def _walk_open(dir_fd: int, path: str, flags: int, mode: int) -> int:
    """openat2's guarantee without it: every directory on the way opened with O_NOFOLLOW from the previous one."""
    parts = PurePosixPath(path).parts
    if len(parts) > _MAX_DEPTH or ".." in parts or PurePosixPath(path).is_absolute():
        raise OSError(errno.EXDEV, "path leaves the workspace", path)
    current = os.dup(dir_fd)
    try:
        for part in parts[:-1]:
            following = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = following
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        os.close(current)


def open_beneath(root_fd: int, path: str, flags: int, mode: int = 0o644) -> int:
    """A descriptor for ``path`` resolved beneath the directory ``root_fd``, never outside it."""
    if _SYSCALL is not None and _openat2_state != [False]:
        try:
            fd = _openat2(root_fd, path, flags, mode)
            if not _openat2_state:
                _openat2_state.append(True)
            return fd
        except OSError as exc:
            if exc.errno != errno.ENOSYS:
                raise
            _openat2_state[:] = [False]
    return _walk_open(root_fd, path, flags, mode)


def _refusal(path: str, exc: OSError) -> HostFileError:
    reasons = {
        errno.EXDEV: "it resolves outside the workspace (a link out of it)",
        errno.ELOOP: "it is a symbolic link, which is not followed",
        errno.ENOENT: "no such file",
        errno.ENOTDIR: "a component on the way is not a directory",
        errno.EISDIR: "it is a directory",
        errno.EACCES: "permission denied",
    }
    return HostFileError(f"path {path!r}: {reasons.get(exc.errno or 0, exc.strerror or str(exc))}")


def _open_root(root: str) -> int:
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _owner(root_fd: int) -> tuple[int, int] | None:
    """Whom new entries beneath the workspace go to: its directory's owner, when we are root and it is not."""
    if os.geteuid() != 0:
        return None
    info = os.fstat(root_fd)
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def _hand_over(fd: int, owner: tuple[int, int] | None) -> None:
    """The entry open at ``fd`` to ``owner``, unless it has other names (a hard link the sandbox made to a file it
    did not own: chown through it would give that file away)."""
    if owner is None:
        return
    info = os.fstat(fd)
    if (info.st_uid, info.st_gid) != owner and (stat.S_ISDIR(info.st_mode) or info.st_nlink == 1):
        os.fchown(fd, *owner)


def read_beneath(root: str, path: str, *, max_bytes: int, workdir: str = "/workspace") -> bytes:
    """A regular file's bytes from the workspace directory ``root`` on the host; refused past ``max_bytes``."""
    relative = relative_path(path, workdir)
    root_fd = _open_root(root)
    try:
        try:
            fd = open_beneath(root_fd, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError as exc:
            raise _refusal(path, exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise HostFileError(f"path {path!r}: not a regular file; only regular files are read")
            if info.st_size > max_bytes:
                raise HostFileError(f"path {path!r}: {info.st_size} bytes is over the limit of {max_bytes}")
            chunks: list[bytes] = []
            size = 0
            while chunk := os.read(fd, min(1 << 20, max_bytes + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:  # it grew while we read it
                    raise HostFileError(f"path {path!r}: over the limit of {max_bytes} bytes")
            return b"".join(chunks)
        finally:
            os.close(fd)
    finally:
        os.close(root_fd)


def _make_dirs(root_fd: int, parts: tuple[str, ...], path: str) -> int:
    """The directory ``parts`` beneath ``root_fd`` (created as needed, given to the workspace's owner), as a
    descriptor."""
    owner = _owner(root_fd)
    current = os.dup(root_fd)
    try:
        for part in parts:
            created = True
            try:
                os.mkdir(part, 0o755, dir_fd=current)
            except FileExistsError:
                created = False
            following = open_beneath(current, part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            os.close(current)
            current = following
            if created:
                _hand_over(current, owner)
        return current
    except OSError as exc:
        os.close(current)
        raise _refusal(path, exc) from None


def write_beneath(root: str, path: str, data: bytes, *, mode: int = 0o644, workdir: str = "/workspace") -> None:
    """Write a regular file in the workspace directory ``root`` (its parents created); a link or non-file in its
    place is refused, never written through."""
    relative = relative_path(path, workdir)
    parts = PurePosixPath(relative).parts
    root_fd = _open_root(root)
    try:
        parent = _make_dirs(root_fd, parts[:-1], path)
        try:
            _write_in(parent, parts[-1], data, mode, path, _owner(root_fd))
        finally:
            os.close(parent)
    finally:
        os.close(root_fd)


def _write_in(parent: int, name: str, data: bytes, mode: int, path: str, owner: tuple[int, int] | None) -> None:
    """The regular file ``name`` in the directory open at ``parent`` holding ``data`` (``path`` names it in
    refusals)."""
    try:
        fd = open_beneath(parent, name, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW, mode)
    except OSError as exc:
        raise _refusal(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise HostFileError(f"path {path!r}: not a regular file; only regular files are written")
        _hand_over(fd, owner)
        # Only a file that has content: ext4 flushes a file truncated then written at close (auto_da_alloc),
        # which made removing a restored snapshot's workspace 100x slower (0.7 s for 200 small files).
        if info.st_size:
            os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Entry:
    path: str
    kind: str  # "dir" | "file" | "link"
    mode: int
    data: bytes = b""
    target: str = ""


def _entries(root: str, max_bytes: int) -> Iterator[_Entry]:
    """The tree under ``root``, never following a link (os.fwalk works from directory descriptors)."""
    total = 0
    for dirpath, dirnames, filenames, dir_fd in os.fwalk(root, follow_symlinks=False):
        relative_dir = os.path.relpath(dirpath, root)
        for name in sorted(dirnames + filenames):
            relative = name if relative_dir == "." else f"{relative_dir}/{name}"
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                yield _Entry(relative, "dir", stat.S_IMODE(info.st_mode))
            elif stat.S_ISLNK(info.st_mode):
                yield _Entry(relative, "link", 0o777, target=os.readlink(name, dir_fd=dir_fd))
            elif stat.S_ISREG(info.st_mode):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        continue  # replaced between the stat and the open
                    with os.fdopen(os.dup(fd), "rb") as handle:
                        data = handle.read(max_bytes - total + 1)
                finally:
                    os.close(fd)
                total += len(data)
                if total > max_bytes:
                    raise HostFileError(f"the workspace holds more than {max_bytes} bytes; the snapshot limit")
                yield _Entry(relative, "file", stat.S_IMODE(info.st_mode), data=data)
            # FIFOs, sockets and devices are left out: a snapshot keeps files, directories and links.


def copy_tree_to_tar(root: str, *, max_bytes: int) -> bytes:
    """The workspace directory ``root`` as an uncompressed tar archive (files, directories, links kept as links)."""
    buffer = BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for entry in _entries(root, max_bytes):
            info = tarfile.TarInfo(entry.path)
            info.mode = entry.mode
            if entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif entry.kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = entry.target
                archive.addfile(info)
            else:
                info.size = len(entry.data)
                archive.addfile(info, BytesIO(entry.data))
            # The archive itself is bounded too: headers of empty files, directories and links count.
            if buffer.tell() > max_bytes:
                raise HostFileError(f"the workspace's archive exceeds {max_bytes} bytes; the snapshot limit")
    return buffer.getvalue()


def restore_tar(root: str, archive_bytes: bytes, *, max_bytes: int) -> None:
    """Unpack an archive ``copy_tree_to_tar`` made into the workspace directory ``root``. Every member is placed
    beneath it (a name that climbs out is refused) and a link is created as a link, never written through."""
    root_fd = _open_root(root)
    owner = _owner(root_fd)
    total = 0
    try:
        with tarfile.open(fileobj=BytesIO(archive_bytes), mode="r:") as archive:
            for member in archive:
                relative = relative_path(member.name, "/")
                parts = PurePosixPath(relative).parts
                if member.isdir():
                    os.close(_make_dirs(root_fd, parts, member.name))
                    continue
                if not (member.isfile() or member.issym()):
                    continue
                total += member.size
                if total > max_bytes:
                    raise HostFileError(f"the snapshot unpacks to more than {max_bytes} bytes")
                parent = _make_dirs(root_fd, parts[:-1], member.name)
                try:
                    if member.issym():
                        os.symlink(member.linkname, parts[-1], dir_fd=parent)
                        if owner is not None:  # the link itself, never what it points to
                            os.chown(parts[-1], *owner, dir_fd=parent, follow_symlinks=False)
                        continue
                    source = archive.extractfile(member)
                    data = source.read() if source is not None else b""
                    # Written through the parent already open: its directories are walked once per member.
                    _write_in(parent, parts[-1], data, member.mode & 0o777, member.name, owner)
                finally:
                    os.close(parent)
    finally:
        os.close(root_fd)
