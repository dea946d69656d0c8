"""The vm rung (a QEMU microVM under TCG) under real escape attempts: each ends as ``denied`` (or ``timeout``), never
as a successful exit, and a broken runner is a ``runner_failure``, never a denial.

The guest boots the small guest kernel (``evalsi sandbox kernel build``, the rung's default once built); one test
boots Debian's packaged kernel, the fallback. The kernels, initramfs, runtime disk and template snapshots are built
once per machine into a cache shared by these tests (vm_cache.py); every test then restores its own guest from the
template, as sandboxd does.
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from vm_cache import CACHE, small_kernel

from evalsi.errors import BadInputError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.manager import SandboxManager
from evalsi.sandbox.model import (
    Level,
    Outcome,
    Resources,
    RootFilesystem,
    SandboxSpec,
    SandboxUnavailable,
)
from evalsi.sandbox.vm.driver import VmDriver, VmOptions
from evalsi.sandbox.vm.firecracker import FirecrackerDriver
from evalsi.sandbox.vm.kernel import find_kernel
from evalsi.sandbox.vm.session import VmSession
from evalsi.testing.sandbox_images import busybox_image

RESOURCES = Resources(timeout_s=20.0, memory_bytes=128 << 20, pids=32, output_bytes=64 * 1024,
                      disk_bytes=16 << 20)
SPEC = SandboxSpec(min_isolation=Level.VM, resources=RESOURCES)


def _driver(**options: object) -> VmDriver:
    base = VmOptions(warm=0, boot_timeout_s=60, kernel="small")
    return VmDriver(SandboxConfig(cache_dir=CACHE), options=replace(base, **options))  # type: ignore[arg-type]


@pytest.fixture(scope="module", autouse=True)
def template() -> None:
    """The first use on a machine builds the artifacts (the small kernel: minutes, unless scripts/test.sh built it)
    and cold-boots the template (seconds under TCG)."""
    small_kernel()

    async def warm() -> None:
        driver = _driver()
        session = await driver.create(SPEC)
        await session.destroy()
        await driver.close()
    asyncio.run(warm())


@pytest.fixture
async def session() -> AsyncIterator[VmSession]:
    driver = _driver()
    session = await driver.create(SPEC)
    yield session
    await session.destroy()
    await driver.close()


async def test_probe_boots_a_guest_and_runs_true() -> None:
    verdict = await _driver().probe()
    assert verdict.available, verdict.reason
    assert verdict.level is Level.VM and verdict.driver == "qemu"
    assert verdict.reason == f"kernel: {small_kernel().label}"  # which kernel booted


async def test_the_workspace_is_writable_and_read_back_as_an_unprivileged_user(session: VmSession) -> None:
    await session.write_files({"in.txt": b"from the host\n"})
    result = await session.exec(["sh", "-c", "cat in.txt; echo made > out.txt; id -u; uname -r"])
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == b"from the host" and lines[1] == b"65534"
    assert lines[2].decode() == small_kernel().version  # the guest's own kernel answers uname
    assert (await session.read_files(["out.txt"], max_bytes=100)) == {"out.txt": b"made\n"}
    iso = result.isolation
    assert iso.driver == "qemu" and iso.level is Level.VM and iso.enforcement == "full"
    assert iso.bounds["network"] == "no network device"
    assert "memory.max=134217728" in iso.bounds["memory"]
    assert iso.bounds["kernel"].startswith(f"separate guest kernel: {small_kernel().label} (QEMU microvm")


async def test_debians_kernel_still_boots_the_guest_with_its_modules() -> None:
    driver = _driver(kernel="debian")
    session = await driver.create(SPEC)
    try:
        assert session.isolation.bounds["kernel"].startswith(f"separate guest kernel: debian {find_kernel().version}")
        seen = await session.exec(["sh", "-c", "uname -r; id -u"])
        assert seen.stdout.decode().split() == [find_kernel().version, "65534"], seen
        shadow = await session.exec(["cat", "/etc/shadow"])
        assert shadow.outcome.kind == "denied" and shadow.outcome.effect == "guest: permission denied"
        bomb = await session.exec(["python3", "-c", "import os\nwhile True:\n    os.fork()"], timeout_s=20)
        assert bomb.outcome.kind in ("denied", "timeout"), bomb
    finally:
        await session.destroy()
        await driver.close()


async def test_python_runs_in_the_guest(session: VmSession) -> None:
    result = await session.exec(["python3", "-c", "import sys; print(sum(range(10)), sys.version_info[:2])"])
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result.stderr
    assert result.stdout.startswith(b"45 (3, 11)")
    # What it used, from its guest cgroup: a Python start is megabytes and some CPU.
    assert result.cpu_s > 0 and result.max_rss_bytes > 1 << 20, (result.cpu_s, result.max_rss_bytes)


async def test_host_files_are_not_in_the_guest(session: VmSession) -> None:
    secret = Path(tempfile.mkdtemp(prefix="evalsi-host-")) / "secret.txt"
    secret.write_text("host secret 7f3a\n")
    secret.chmod(0o666)
    secret.parent.chmod(0o777)
    try:
        result = await session.exec(["cat", str(secret)])
        assert result.outcome.kind == "denied", result  # an escape attempt, never an ordinary exit
        assert result.outcome.effect == f"host path not visible in the guest: {secret}", result
        assert b"7f3a" not in result.stdout
        # The guest's own shadow file is root's: refused by the guest kernel, and it is not the host's.
        shadow = await session.exec(["cat", "/etc/shadow"])
        assert shadow.outcome.kind == "denied", shadow
        assert shadow.outcome.effect == "guest: permission denied"
        assert shadow.stdout == b""
    finally:
        secret.unlink()
        secret.parent.rmdir()


async def test_writing_outside_the_workspace_is_denied(session: VmSession) -> None:
    for target in ("/usr/bin/planted", "/etc/passwd", "/evalsi/agent.py", "/root/x"):
        result = await session.exec(["sh", "-c", f"echo pwned > {target}"])
        assert result.outcome.kind == "denied", (target, result)
    check = await session.exec(["cat", "/etc/passwd"])
    assert b"pwned" not in check.stdout


async def test_a_loopback_listener_on_the_host_is_unreachable(session: VmSession) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3)"
        result = await session.exec(["python3", "-c", code])
        assert result.outcome.kind == "denied", result
        assert result.outcome.effect == "guest: no network device"
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


async def test_a_fork_bomb_stops_at_the_pids_bound(session: VmSession) -> None:
    result = await session.exec(["python3", "-c", "import os\nwhile True:\n    os.fork()"], timeout_s=20)
    assert result.outcome.kind in ("denied", "timeout"), result
    if result.outcome.kind == "denied":
        assert "pids" in result.outcome.effect
    after = await session.exec(["sh", "-c", "pgrep python3 || echo none"])
    assert after.stdout.strip() == b"none", after.stdout  # cgroup.kill ended every fork


async def test_allocating_past_the_memory_bound_is_an_oom_denial(session: VmSession) -> None:
    result = await session.exec(["python3", "-c", "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096])"])
    assert result.outcome.kind == "denied", result
    assert result.outcome.effect in ("oom-kill", "memory limit (guest cgroup memory.max)")


async def test_sleeping_past_the_timeout_is_a_timeout(session: VmSession) -> None:
    started = time.monotonic()
    result = await session.exec(["sh", "-c", "sleep 60 & sleep 60"], timeout_s=2)
    assert result.outcome.kind == "timeout"
    assert time.monotonic() - started < 10
    # The background sleep went with its group: the next command sees none.
    after = await session.exec(["sh", "-c", "pgrep sleep || echo none"])
    assert after.stdout.strip() == b"none"


async def test_printing_past_the_output_cap_is_denied_and_truncated(session: VmSession) -> None:
    result = await session.exec(["sh", "-c", "yes 0123456789"])
    assert result.outcome.kind == "denied" and result.outcome.effect == "output cap"
    assert result.stdout_truncated and len(result.stdout) == RESOURCES.output_bytes


async def test_a_planted_symlink_is_never_followed_by_the_host(session: VmSession) -> None:
    planted = await session.exec(["sh", "-c", "ln -s /etc/passwd link && mkdir d && ln -s /etc dir && echo ok"])
    assert planted.stdout == b"ok\n", planted
    with pytest.raises(BadInputError, match="link"):
        await session.read_files(["link"], max_bytes=1 << 20)
    with pytest.raises(BadInputError, match="dir/passwd"):
        await session.read_files(["dir/passwd"], max_bytes=1 << 20)
    with pytest.raises(BadInputError):
        await session.write_files({"dir/evil": b"x"})
    with pytest.raises(BadInputError, match="outside the workspace"):
        await session.read_files(["../etc/passwd"], max_bytes=1 << 20)


async def test_the_parent_environment_does_not_reach_the_guest(session: VmSession,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSI_PARENT_SECRET", "parent-secret-91c2")
    result = await session.exec(["sh", "-c", "env; cat /proc/1/environ"], env={"GIVEN": "yes"})
    assert b"parent-secret-91c2" not in result.stdout + result.stderr
    assert b"GIVEN=yes" in result.stdout
    assert result.outcome.kind == "denied"  # /proc/1/environ is the guest agent's, root only


async def test_a_vmm_that_dies_mid_exec_is_a_runner_failure_not_a_denial(session: VmSession) -> None:
    machine = session.machine
    assert machine is not None
    task = asyncio.ensure_future(session.exec(["sleep", "30"]))
    await asyncio.sleep(1.0)
    machine.process.kill()
    result = await task
    assert result.outcome.kind == "runner_failure", result
    assert result.outcome.signature.startswith("vm: guest agent connection")
    again = await session.exec(["true"])
    assert again.outcome.kind == "runner_failure" and "the guest is gone" in again.outcome.signature


async def test_a_broken_qemu_binary_is_unavailable_and_the_ladder_fails_closed() -> None:
    broken = _driver(binary="/nonexistent/qemu-system-x86_64")
    verdict = await broken.probe()
    assert not verdict.available and "/nonexistent/qemu-system-x86_64 not found" in verdict.reason
    ladder = Ladder(drivers={"qemu": broken, "firecracker": FirecrackerDriver()})
    with pytest.raises(SandboxUnavailable) as caught:
        await ladder.select(Level.VM, ("firecracker", "qemu"))
    assert {v.driver for v in caught.value.verdicts} == {"firecracker", "qemu"}


async def test_the_ladder_picks_the_microvm_for_a_vm_minimum() -> None:
    ladder = Ladder(drivers={"qemu": _driver(), "firecracker": FirecrackerDriver()})
    driver, verdict = await ladder.select(Level.VM, ("firecracker", "qemu"))
    assert driver.name == "qemu" and verdict.available


async def test_snapshot_state_round_trips_and_clones_do_not_share_entropy() -> None:
    driver = _driver()
    first = await driver.create(SPEC)
    second = await driver.create(SPEC)
    try:
        await first.write_files({"kept.txt": b"before the snapshot\n"})
        state = await first.save_state()
        await first.exec(["sh", "-c", "echo after > later.txt"])
        with pytest.raises(BadInputError, match="not a saved microVM state"):
            await second.load_state(b"not a state")
        await second.load_state(state)
        assert await second.read_files(["kept.txt"], max_bytes=100) == {"kept.txt": b"before the snapshot\n"}
        listing = await second.exec(["ls"])
        assert listing.stdout.split() == [b"kept.txt"]
        draw = ["python3", "-c", "import os; print(os.urandom(16).hex())"]
        a, b = await first.exec(draw), await second.exec(draw)
        # second is a restore of first's state: fresh entropy at restore keeps their streams apart
        assert a.stdout != b.stdout and len(a.stdout) == 33
        # Two clones of the template, each reseeded at create, draw apart too.
        third, fourth = await driver.create(SPEC), await driver.create(SPEC)
        try:
            c, d = await third.exec(draw), await fourth.exec(draw)
            assert c.stdout != d.stdout and len(c.stdout) == 33
        finally:
            await third.destroy()
            await fourth.destroy()
    finally:
        await first.destroy()
        await second.destroy()
        await driver.close()


async def test_a_warm_pool_hands_out_a_ready_guest() -> None:
    driver = _driver(warm=1)
    first = await driver.create(SPEC)
    try:
        for _ in range(200):  # the refill restores one in the background
            if driver._warm:
                break
            await asyncio.sleep(0.1)
        assert driver._warm, "the pool refilled"
        started = time.monotonic()
        second = await driver.create(SPEC)
        took = time.monotonic() - started
        result = await second.exec(["true"])
        assert result.outcome.kind == "exit" and result.outcome.code == 0
        await second.destroy()
        assert took < 5, took
    finally:
        await first.destroy()
        await driver.close()


async def test_sandboxd_manager_snapshots_and_restores_a_microvm(tmp_path: Path) -> None:
    manager = SandboxManager(Ladder(SandboxConfig(ladder=("qemu",), cache_dir=CACHE), drivers={"qemu": _driver()}),
                             tmp_path / "snapshots")
    try:
        # The manager bounds a snapshot by the spec's disk bytes: a guest's compressed state is tens of MB.
        sandbox = await manager.create(replace(SPEC, resources=replace(RESOURCES, disk_bytes=64 << 20)), "p1")
        await sandbox.session.write_files({"answer.txt": b"42\n"})
        snapshot_id, size = await manager.snapshot(sandbox.id, "p1")
        assert size > 1 << 20  # the guest's memory, not a workspace tarball
        restored = await manager.restore(snapshot_id, "p1")
        assert restored.id != sandbox.id and restored.isolation.driver == "qemu"
        result = await restored.session.exec(["cat", "answer.txt"])
        assert result.stdout == b"42\n", result
    finally:
        await manager.close()


async def test_an_exec_cancelled_mid_way_retires_the_guest_instead_of_desynchronizing_it(session: VmSession) -> None:
    task = asyncio.ensure_future(session.exec(["sh", "-c", "while true; do echo tick; sleep 0.1; done"]))
    await asyncio.sleep(1.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The ticks still in flight would otherwise be read as this call's answer.
    after = await session.exec(["echo", "after"])
    assert after.outcome.kind == "runner_failure" and "the guest is gone" in after.outcome.signature
    assert session.machine is None


async def test_a_command_that_leaves_a_child_holding_its_output_ends_when_it_exits(session: VmSession) -> None:
    started = time.monotonic()
    result = await session.exec(["sh", "-c", "echo started; sleep 60 &"])
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result
    assert result.stdout == b"started\n" and time.monotonic() - started < 10
    after = await session.exec(["sh", "-c", "pgrep sleep || echo none"])
    assert after.stdout.strip() == b"none"  # the background child went with the execution's group


async def test_hostile_requests_are_refused_naming_the_limit(session: VmSession) -> None:
    with pytest.raises(BadInputError, match="over the limit of 4096"):
        await session.read_files([f"f{i}" for i in range(5000)], max_bytes=1)
    with pytest.raises(BadInputError, match="no NUL"):
        await session.write_files({"a\0b": b"x"})
    with pytest.raises(BadInputError, match=r"stdin: .* over the limit"):
        await session.exec(["cat"], stdin=b"x" * (33 << 20))
    with pytest.raises(BadInputError, match="argv"):
        await session.exec([])
    # None of it reached the guest: it still answers.
    result = await session.exec(["echo", "still here"])
    assert result.stdout == b"still here\n"


async def test_read_only_file_access_and_a_cpu_bound_are_enforced_in_the_guest() -> None:
    driver = _driver()
    spec = replace(SPEC, file_access="read-only", resources=replace(RESOURCES, cpu_seconds=1))
    session = await driver.create(spec)
    try:
        assert session.isolation.enforcement == "full" and session.isolation.bounds["cpu"] == "RLIMIT_CPU=1"
        await session.write_files({"given.txt": b"task\n"})  # the host's writes still land
        read = await session.exec(["cat", "given.txt"])
        assert read.stdout == b"task\n"
        write = await session.exec(["sh", "-c", "echo x > made.txt"])
        assert write.outcome.kind == "denied" and write.outcome.effect == "guest: read-only file system", write
        spin = await session.exec(["python3", "-c", "while True: pass"])
        assert spin.outcome.kind == "denied" and spin.outcome.effect == "cpu time limit (RLIMIT_CPU)", spin
    finally:
        await session.destroy()
        await driver.close()
    for outside in ("/srv", "/workspace/../etc", "workspace"):
        with pytest.raises(BadInputError, match="workdir"):
            await driver.create(replace(SPEC, workdir=outside))
    driver = _driver()
    nested = await driver.create(replace(SPEC, workdir="/workspace/src/app"))
    try:
        where = await nested.exec(["pwd"])
        assert where.stdout == b"/workspace/src/app\n", where
    finally:
        await nested.destroy()
        await driver.close()


async def test_an_image_root_is_the_commands_root_read_only() -> None:
    image = CACHE / "busybox-image"  # kept across runs: its disk and template are cached by its tree's digest
    if not image.is_dir():
        busybox_image(image)
    driver = _driver()
    session = await driver.create(replace(SPEC, root=RootFilesystem("image", str(image))))
    try:
        assert session.isolation.bounds["filesystem"].startswith(f"image root {image}")
        await session.write_files({"given.txt": b"task\n"})
        seen = await session.exec(["sh", "-c", "cat given.txt; id -u; pwd; ls /"])
        assert seen.outcome.kind == "exit" and seen.outcome.code == 0, seen
        lines = seen.stdout.decode().split()
        assert lines[:3] == ["task", "65534", "/workspace"]
        assert "evalsi" not in lines and "bin" in lines  # the image's root, not the runtime disk's
        shadow = await session.exec(["cat", "/etc/shadow"])
        assert shadow.outcome.kind == "denied" and b"image-shadow" not in shadow.stdout
        assert (await session.exec(["python3", "-c", "1"])).outcome == Outcome("exit", code=127)
        write = await session.exec(["sh", "-c", "echo x > /bin/planted"])
        assert write.outcome.kind == "denied", write
        made = await session.exec(["sh", "-c", "echo made > out.txt"])
        assert made.outcome.kind == "exit" and await session.read_files(["out.txt"], max_bytes=10) == {
            "out.txt": b"made\n"}
    finally:
        await session.destroy()
        await driver.close()


async def test_stdin_is_fed_as_read_and_a_program_that_never_reads_it_does_not_stall(session: VmSession) -> None:
    data = b"0123456789" * 20_000  # 200 kB: more than a pipe holds
    counted = await session.exec(["wc", "-c"], stdin=data)
    assert counted.outcome.kind == "exit" and counted.stdout.strip() == b"200000", counted
    started = time.monotonic()
    ignored = await session.exec(["sh", "-c", "sleep 1; echo done"], stdin=data)
    assert ignored.outcome.kind == "exit" and ignored.stdout == b"done\n", ignored
    assert time.monotonic() - started < 10


async def test_filling_the_disk_bound_is_denied(session: VmSession) -> None:
    one_file = await session.exec(["dd", "if=/dev/zero", "of=big", "bs=1M", "count=64"])
    assert one_file.outcome.kind == "denied", one_file  # RLIMIT_FSIZE = disk_bytes (16 MiB)
    assert one_file.outcome.effect == "file size limit (RLIMIT_FSIZE)"
    many = await session.exec(["sh", "-c", "rm -f big; for i in 1 2 3; do dd if=/dev/zero of=f$i bs=1M count=10 "
                                           "|| exit 1; done"])
    assert many.outcome.kind == "denied" and many.outcome.effect == "guest: workspace full (disk_bytes)", many
