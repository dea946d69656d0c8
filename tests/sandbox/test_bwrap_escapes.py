"""The bwrap rung against programs that try to break out, run for real (bwrap, seccomp, cgroups, rlimits).

Each attempt must end as a denial or a timeout, never as a successful exit, and nothing must leak: the host's files,
its environment, its loopback listeners."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.bwrap import BwrapDriver, BwrapSession
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.model import DEFAULT_RESOURCES, RootFilesystem, SandboxSpec
from evalsi.testing.sandbox_images import busybox_image

SECRET = "evalsi-host-secret-7f3a"


@pytest.fixture
def image(tmp_path: Path) -> Path:
    return busybox_image(tmp_path / "image")


@pytest.fixture
def driver(tmp_path: Path) -> BwrapDriver:
    return BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache"))


async def _session(driver: BwrapDriver, image: Path | None, **resources: object) -> BwrapSession:
    root = RootFilesystem("image", str(image)) if image is not None else RootFilesystem()
    return await driver.create(SandboxSpec(root=root, resources=replace(DEFAULT_RESOURCES, **resources)))


async def test_the_profile_runs_true_as_an_unprivileged_user_in_the_image(driver: BwrapDriver, image: Path) -> None:
    verdict = await driver.probe()
    assert verdict.available and verdict.enforcement == "full", verdict
    session = await _session(driver, image)
    try:
        result = await session.exec(["sh", "-c", "id -u; head -1 /etc/passwd; cat /etc/shadow; "
                                                 "grep Cap /proc/self/status"])
    finally:
        await session.destroy()
    # /etc/passwd is the image's own, never the host's; its /etc/shadow (root's, 0600) is closed to the sandbox's
    # user, which as root is an unprivileged host uid (host_user.py), not host root mapped to 65534.
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "65534" and lines[1] == "root:x:0:0:root:/root:/bin/sh"
    assert b"image-shadow" not in result.stdout and b"Permission denied" in result.stderr, result
    assert all(line.split()[1] == "0000000000000000" for line in lines[2:]), lines
    assert result.isolation.driver == "bwrap" and result.isolation.bounds["network"] == "unshared (loopback only)"


async def test_a_host_file_outside_the_root_cannot_be_read(driver: BwrapDriver, image: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    session = await _session(driver, image)
    try:
        result = await session.exec(["sh", "-c", f"cat {secret}; cat /proc/1/root{secret}; cat /host/etc/shadow"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied", result  # an escape attempt, never an ordinary exit
    assert result.outcome.effect.startswith("host path not visible in the sandbox: "), result
    assert SECRET.encode() not in result.stdout + result.stderr


async def test_writes_outside_the_workspace_are_denied(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image)
    try:
        outside = await session.exec(["sh", "-c", "echo x > /bin/planted"])
        inside = await session.exec(["sh", "-c", "echo kept > /workspace/out.txt"])
        read_back = await session.read_files(["/workspace/out.txt"], max_bytes=100)
    finally:
        await session.destroy()
    assert outside.outcome.kind == "denied" and outside.outcome.effect == "write to a read-only path", outside
    assert not (image / "bin" / "planted").exists()
    assert inside.outcome.kind == "exit" and read_back == {"/workspace/out.txt": b"kept\n"}


async def test_a_loopback_listener_on_the_host_is_unreachable(driver: BwrapDriver) -> None:
    accepted: list[int] = []
    server = await asyncio.start_server(lambda r, w: accepted.append(1) or w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = ("import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=2)\n")
    session = await _session(driver, None)  # the host's /usr, for python3
    try:
        result = await session.exec(["python3", "-c", code])
    finally:
        await session.destroy()
        server.close()
        await server.wait_closed()
    assert result.outcome.kind == "denied" and result.outcome.effect == "network denied", result
    assert accepted == []


async def test_sockets_outside_unix_and_inet_are_refused_by_seccomp(driver: BwrapDriver) -> None:
    code = "import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n"
    session = await _session(driver, None)
    try:
        result = await session.exec(["python3", "-c", code])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied", result
    assert b"Address family not supported" in result.stderr


async def test_a_fork_bomb_stops_at_the_pids_bound(driver: BwrapDriver) -> None:
    code = ("import os, time\n"
            "children = []\n"
            "while True:\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        time.sleep(30)\n"
            "        os._exit(0)\n"
            "    children.append(pid)\n")
    session = await _session(driver, None, pids=24, timeout_s=20.0)
    try:
        result = await session.exec(["python3", "-c", code])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied" and result.outcome.effect in ("pids limit", "process limit"), result
    assert "pids.max=24" in result.isolation.bounds["pids"]
    # The sleeping children went with the execution's cgroup.
    assert not [line for line in os.popen("ps -eo args").read().splitlines() if "while True" in line]


async def test_allocating_past_the_memory_bound_is_an_oom_kill(driver: BwrapDriver) -> None:
    code = "data = bytearray(400 * 1024 * 1024)\nprint('allocated', len(data))\n"
    session = await _session(driver, None, memory_bytes=64 * 1024 * 1024)
    try:
        result = await session.exec(["python3", "-c", code])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied", result
    assert result.outcome.effect in ("oom-kill", "memory limit"), result
    assert b"allocated" not in result.stdout
    if "cgroup" in result.isolation.bounds["memory"]:
        assert result.outcome.effect == "oom-kill", result


async def test_outliving_the_timeout_is_a_timeout(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image)
    try:
        result = await session.exec(["sh", "-c", "sleep 60 & sleep 60"], timeout_s=1.0)
    finally:
        await session.destroy()
    assert result.outcome.kind == "timeout", result
    assert result.duration_s < 10


async def test_printing_past_the_output_cap_is_denied_and_truncated(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image, output_bytes=4096)
    try:
        result = await session.exec(["yes", "spam"], timeout_s=20.0)
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied" and result.outcome.effect == "output cap", result
    assert len(result.stdout) == 4096 and result.stdout_truncated


async def test_a_planted_symlink_is_not_followed_by_the_host(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image)
    try:
        planted = await session.exec(["ln", "-s", "/etc/passwd", "/workspace/answer.txt"])
        assert planted.outcome.kind == "exit" and planted.outcome.code == 0, planted
        with pytest.raises(BadInputError):
            await session.read_files(["/workspace/answer.txt"], max_bytes=1 << 20)
        with pytest.raises(BadInputError):
            await session.write_files({"/workspace/answer.txt": b"overwritten"})
    finally:
        await session.destroy()
    assert Path("/etc/passwd").read_bytes() != b"overwritten"


async def test_the_parents_environment_is_not_visible(driver: BwrapDriver, image: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_TEST_SECRET", SECRET)
    session = await _session(driver, image)
    try:
        result = await session.exec(["sh", "-c", "env; cat /proc/1/environ; cat /proc/$PPID/environ"],
                                    env={"GIVEN": "yes"})
    finally:
        await session.destroy()
    assert SECRET.encode() not in result.stdout + result.stderr
    assert b"GIVEN=yes" in result.stdout
    assert f"/proc/{os.getpid()}".encode() not in result.stdout


async def test_a_broken_driver_binary_is_a_runner_failure_not_a_denial(tmp_path: Path, image: Path) -> None:
    broken = BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache",
                                       drivers={"bwrap": {"binary": "/nonexistent/bwrap"}}))
    verdict = await broken.probe()
    assert not verdict.available and "/nonexistent/bwrap" in verdict.reason
    session = await _session(broken, image)
    try:
        result = await session.exec(["true"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "runner_failure" and "nonexistent" in result.outcome.signature, result


async def test_a_setup_failure_is_a_runner_failure_and_a_forged_one_is_not(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image)
    try:
        forged = await session.exec(["sh", "-c", "echo 'bwrap: Can not mount proc: Permission denied' >&2; exit 1"])
        os.rmdir(session.host_workspace)  # bwrap cannot bind a workspace that is gone: its setup fails
        failed = await session.exec(["true"])
    finally:
        await session.destroy()
    assert failed.outcome.kind == "runner_failure", failed
    assert failed.outcome.signature.startswith("bwrap:"), failed
    assert forged.outcome.kind != "runner_failure", forged



async def test_a_command_missing_from_the_image_is_the_programs_exit_127(driver: BwrapDriver, image: Path) -> None:
    session = await _session(driver, image)
    try:
        result = await session.exec(["python3", "-c", "print(1)"])  # the busybox image has no python
    finally:
        await session.destroy()
    assert result.outcome.kind == "exit" and result.outcome.code == 127, result


async def test_without_cgroups_rlimits_bound_memory_and_the_report_says_what_is_not_bound(tmp_path: Path) -> None:
    driver = BwrapDriver(SandboxConfig(cache_dir=tmp_path / "cache", cgroup="none"))
    session = await _session(driver, None, memory_bytes=64 * 1024 * 1024)
    try:
        result = await session.exec(["python3", "-c", "data = bytearray(400 * 1024 * 1024)"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "denied" and result.outcome.effect == "memory limit", result
    assert result.isolation.bounds["memory"] == f"rlimit AS={64 * 1024 * 1024}"
    # Even run by root: the sandbox's host user is unprivileged (host_user.py), so RLIMIT_NPROC binds it.
    assert result.isolation.bounds["pids"] == f"rlimit NPROC={DEFAULT_RESOURCES.pids}"
    assert result.isolation.enforcement == "full", result.isolation.not_enforced
