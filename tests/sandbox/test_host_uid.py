"""The sandbox's unprivileged host user (host_user.py), for real: run as root (as here and in CI), the bwrap and
landlock rungs start sandboxed programs as ``sandbox.host_uid``/``host_gid``, never as host root, so their files
belong to that user, their uid maps to it, and RLIMIT_NPROC binds them (root is exempt) without a pids cgroup.

Run by another user, the sandbox's uid maps to that user: the tests expect the caller's ids then."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox import host_files
from evalsi.sandbox.bwrap import BwrapDriver, BwrapSession
from evalsi.sandbox.config import SandboxConfig, load_sandbox_config
from evalsi.sandbox.landlock import LandlockDriver
from evalsi.sandbox.model import (
    DEFAULT_RESOURCES,
    Endpoint,
    Level,
    NetworkPolicy,
    Resources,
    RootFilesystem,
    SandboxSpec,
)
from evalsi.testing.sandbox_images import busybox_image

ROOT = os.geteuid() == 0
# A host user other than the default, so the tests see the configuration taken, not 65534 by coincidence.
HOST_UID, HOST_GID = 4242, 4343


def _expected() -> tuple[int, int]:
    return (HOST_UID, HOST_GID) if ROOT else (os.getuid(), os.getgid())


async def _bwrap(tmp_path: Path, cgroup: str = "auto", **resources: Any) -> BwrapSession:
    image = busybox_image(tmp_path / "image")
    config = SandboxConfig(cache_dir=tmp_path / "cache", host_uid=HOST_UID, host_gid=HOST_GID, cgroup=cgroup)
    spec = SandboxSpec(root=RootFilesystem("image", str(image)), resources=replace(DEFAULT_RESOURCES, **resources))
    return await BwrapDriver(config).create(spec)


async def test_the_sandbox_is_uid_65534_inside_and_the_host_user_outside(tmp_path: Path) -> None:
    session = await _bwrap(tmp_path)
    try:
        result = await session.exec(["sh", "-c", "id -u; id -g; id -G; echo made > made.txt; mkdir dir; "
                                                 "echo deeper > dir/file"])
        workspace = Path(session.host_workspace)
        owners = {name: (os.stat(workspace / name).st_uid, os.stat(workspace / name).st_gid)
                  for name in ("made.txt", "dir", "dir/file")}
        workspace_owner = (os.stat(workspace).st_uid, os.stat(workspace).st_gid)
    finally:
        await session.destroy()
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    assert result.stdout.decode().split() == ["65534", "65534", "65534"]  # no supplementary group inside either
    assert set(owners.values()) == {_expected()}, owners
    assert workspace_owner == _expected()
    if ROOT:
        assert f"host uid {HOST_UID} gid {HOST_GID}" in result.isolation.bounds["user"]
        # A thread of this process ran as the host user (it set the rlimits): the process is no longer dumpable, so
        # no process of that user may ptrace it.
        assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE


def _sandboxed(marker: str) -> int | None:
    """The host pid of the process whose command line is ``sleep <marker>``."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    if handle.read().split(b"\0")[:2] == [b"sleep", marker.encode()]:
                        return int(entry.name)
            except OSError:
                continue
    return None


async def test_the_user_namespace_maps_the_sandbox_uid_to_the_host_user(tmp_path: Path) -> None:
    session = await _bwrap(tmp_path)
    marker = "7.3219"  # a sleep nobody else runs
    try:
        running = asyncio.ensure_future(session.exec(["sleep", marker], timeout_s=20.0))
        pid = None
        deadline = time.monotonic() + 15
        while pid is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            pid = _sandboxed(marker)
        assert pid is not None, "the sandboxed sleep never showed in the host's /proc"
        # Read from the host, uid_map's second column is in the host's ids (inside, bwrap's nested namespace shows
        # its own intermediate ids instead), and the status line gives the process's host uids.
        uid_map = Path(f"/proc/{pid}/uid_map").read_text().split()
        gid_map = Path(f"/proc/{pid}/gid_map").read_text().split()
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    finally:
        await session.destroy()
    uid, gid = _expected()
    assert uid_map == ["65534", str(uid), "1"] and gid_map == ["65534", str(gid), "1"]
    assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(gid)] * 4
    assert status["Groups"].split() == []
    assert status["CapEff"].strip() == "0000000000000000"


def _status(pid: int) -> dict[str, str]:
    return {name: value.strip() for name, value in (line.split(":", 1) for line in
                                                    Path(f"/proc/{pid}/status").read_text().splitlines())}


async def test_bwrap_itself_starts_as_the_host_user_without_groups_or_capabilities(tmp_path: Path) -> None:
    # bwrap is started by a thread of this process that became the host user (no setpriv in between): the vfork
    # copies that thread's credentials, not the root ones of the rest of the process.
    session = await _bwrap(tmp_path)
    try:
        started = await _started_bwrap(session, "7.3221")
    finally:
        await session.destroy()
    uid, gid = _expected()
    assert started["Name"] == "bwrap", started
    assert started["Uid"].split() == [str(uid)] * 4 and started["Gid"].split() == [str(gid)] * 4, started
    assert started["Groups"] == ""
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert started[capabilities] == "0000000000000000", (capabilities, started)
    # The rest of this process keeps its own credentials: only the starting thread changed.
    assert os.geteuid() == (0 if ROOT else os.getuid())


async def _started_bwrap(session: BwrapSession, marker: str) -> dict[str, str]:
    """The /proc status of the bwrap this process started for ``sleep <marker>``, while it runs."""
    running = asyncio.ensure_future(session.exec(["sleep", marker], timeout_s=20.0))
    try:
        pid = None
        deadline = time.monotonic() + 15
        while pid is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            pid = _sandboxed(marker)
        assert pid is not None, "the sandboxed sleep never showed in the host's /proc"
        while int(_status(pid)["PPid"]) != os.getpid():
            pid = int(_status(pid)["PPid"])
        return {**_status(pid), "netns": str(os.stat(f"/proc/{pid}/ns/net").st_ino)}
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


@pytest.mark.skipif(not ROOT, reason="an allowlist's network namespace takes root")
async def test_with_an_allowlist_bwrap_starts_in_its_namespace_as_the_host_user(tmp_path: Path) -> None:
    # The namespace is joined by the sandbox's own thread while still root, before it becomes the host user.
    config = SandboxConfig(cache_dir=tmp_path / "cache", host_uid=HOST_UID, host_gid=HOST_GID)
    host = RootFilesystem("host")
    session = await BwrapDriver(config).create(SandboxSpec(
        root=host, network=NetworkPolicy(allow=(Endpoint("127.0.0.1", 9),)), resources=Resources(timeout_s=20.0)))
    try:
        assert session.egress is not None and session.egress.netns_fd is not None
        sandbox_netns = str(os.fstat(session.egress.netns_fd).st_ino)
        started = [await _started_bwrap(session, marker) for marker in ("7.3231", "7.3232")]
    finally:
        await session.destroy()
    for status in started:
        assert status["netns"] == sandbox_netns != str(os.stat("/proc/self/ns/net").st_ino), status
        assert status["Uid"].split() == [str(HOST_UID)] * 4 and status["Gid"].split() == [str(HOST_GID)] * 4
        assert status["Groups"] == "" and status["CapEff"] == status["CapInh"] == "0000000000000000", status


async def test_a_fork_bomb_without_a_pids_cgroup_is_stopped_by_nproc(tmp_path: Path) -> None:
    session = await _bwrap(tmp_path, cgroup="none", pids=16, timeout_s=20.0)
    try:
        result = await session.exec(["sh", "-c", "i=0; while [ $i -lt 200 ]; do sleep 5 & i=$((i+1)); done; wait"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied" and result.outcome.effect == "process limit", result
    # Enforced by the rlimit alone, and said so: no partial enforcement for want of a pids cgroup.
    assert result.isolation.bounds["pids"] == "rlimit NPROC=16"
    assert result.isolation.enforcement == "full", result.isolation.not_enforced


async def test_each_sandbox_has_its_own_nproc_count(tmp_path: Path) -> None:
    # RLIMIT_NPROC counts per user namespace: two sandboxes of the same host user, each holding 10 processes under
    # a bound of 16, both succeed (counted together, the second would run out).
    sessions = [await _bwrap(tmp_path / str(index), cgroup="none", pids=16, timeout_s=20.0) for index in range(2)]
    try:
        results = await asyncio.gather(*(session.exec(
            ["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 2 & done; wait"]) for session in sessions))
    finally:
        for session in sessions:
            await session.destroy()
    assert [(result.outcome.kind, result.outcome.code) for result in results] == [("exit", 0)] * 2, results


async def test_files_the_host_writes_belong_to_the_host_user_and_the_sandbox_can_change_them(tmp_path: Path) -> None:
    session = await _bwrap(tmp_path)
    try:
        await session.write_files({"task/given.py": b"print('given')\n"})
        workspace = Path(session.host_workspace)
        owners = {(os.stat(path).st_uid, os.stat(path).st_gid) for path in (workspace / "task",
                                                                           workspace / "task/given.py")}
        result = await session.exec(["sh", "-c", "echo changed > task/given.py; touch task/new"])
        read = await session.read_files(["task/given.py"], max_bytes=1024)
    finally:
        await session.destroy()
    assert owners == {_expected()}
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    assert read == {"task/given.py": b"changed\n"}


@pytest.mark.skipif(not ROOT, reason="only root's sandboxes change user; another user's need no reachability check")
async def test_a_root_the_host_user_cannot_reach_is_refused_naming_the_directory(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    image = busybox_image(closed / "image")
    driver = BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache", host_uid=HOST_UID, host_gid=HOST_GID))
    with pytest.raises(BadInputError, match=f"root: .*{closed} \\(mode 0700, owner 0:0\\) is not searchable by "
                                            f"host uid {HOST_UID}"):
        await driver.create(SandboxSpec(root=RootFilesystem("image", str(image))))


async def test_the_confined_rung_runs_as_the_configured_host_user() -> None:
    host = RootFilesystem("host")
    driver = LandlockDriver(SandboxConfig(root=host, host_uid=HOST_UID, host_gid=HOST_GID))
    session = await driver.create(SandboxSpec(min_isolation=Level.CONFINED, root=host,
                                              resources=Resources(timeout_s=5.0, pids=32)))
    try:
        result = await session.exec(["sh", "-c", "id -u; id -g; echo x > made.txt"])
        made = os.stat(Path(session.host_workspace) / "made.txt")
    finally:
        await session.destroy()
    uid, gid = _expected()
    assert result.outcome.kind == "exit" and result.stdout.decode().split() == [str(uid), str(gid)], result
    assert (made.st_uid, made.st_gid) == (uid, gid)


def test_the_host_user_is_configured_in_the_sandbox_section_and_never_root() -> None:
    config = load_sandbox_config({"host_uid": 1500, "host_gid": 1600})
    assert (config.host_uid, config.host_gid) == (1500, 1600)
    assert (SandboxConfig().host_uid, SandboxConfig().host_gid) == (65533, 65533)  # not nobody's
    with pytest.raises(BadInputError, match=r"sandbox\.host_uid: 0 is out of range; accepted: 1 to 4294967294"):
        load_sandbox_config({"host_uid": 0})
    with pytest.raises(BadInputError, match=r"sandbox\.host_gid: expected an integer"):
        load_sandbox_config({"host_gid": "nogroup"})


def test_a_restored_snapshot_belongs_to_the_workspace_owner_and_planted_links_stay_refused(tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    for path in (source, target):
        path.mkdir()
    (source / "dir").mkdir()
    (source / "dir" / "file.txt").write_bytes(b"kept\n")
    (source / "link").symlink_to("dir/file.txt")
    archive = host_files.copy_tree_to_tar(str(source), max_bytes=1 << 20)
    os.chown(target, *_expected())  # as a rung hands its workspace to the host user
    host_files.restore_tar(str(target), archive, max_bytes=1 << 20)
    owners = {name: (os.lstat(target / name).st_uid, os.lstat(target / name).st_gid)
              for name in ("dir", "dir/file.txt", "link")}
    assert set(owners.values()) == {_expected()}, owners
    assert (target / "link").readlink() == Path("dir/file.txt")
    (target / "escape").symlink_to("/etc/passwd")  # as the sandbox could plant it
    with pytest.raises(host_files.HostFileError, match=r"symbolic link|outside the workspace"):
        host_files.write_beneath(str(target), "escape", b"x")
    assert os.stat("/etc/passwd").st_uid == 0
