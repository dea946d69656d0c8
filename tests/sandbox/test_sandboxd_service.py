"""evalsi-sandboxd end to end: a real daemon on a Unix socket, the real bubblewrap rung, the gRPC client.

Escape attempts go through the service as a worker's would, and each must end as a refusal (denied, timeout or a
failing exit), never as the program's success; the host's reads of sandbox files never follow a planted link.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandboxd_process import running_sandboxd

from evalsi.auth.principal import PermissionDenied, Unauthenticated
from evalsi.errors import BadInputError
from evalsi.sandbox.client import SandboxClient
from evalsi.sandbox.manager import SandboxBusy, SandboxNotFound
from evalsi.sandbox.model import Endpoint, Level, NetworkPolicy, Resources, SandboxSpec, SandboxUnavailable

SECRET = "sandboxd-parent-secret-4242"


@pytest.fixture(scope="module")
def sandboxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("sbxd")
    with running_sandboxd(tmp, env={"EVALSI_TEST_SECRET": SECRET}) as (address, _):
        yield address


def _spec(**resources: float) -> SandboxSpec:
    return SandboxSpec(min_isolation=Level.NAMESPACED, resources=Resources(**resources))  # type: ignore[arg-type]


def _succeeded(result: object) -> bool:
    outcome = result.outcome  # type: ignore[attr-defined]
    return bool(outcome.kind == "exit" and outcome.code == 0)


async def test_probe_create_exec_streams_output_then_the_result(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        verdicts = await client.probe()
        assert [(v.driver, v.available, v.level) for v in verdicts] == [("bwrap", True, Level.NAMESPACED)]
        session = await client.create(_spec())
        assert session.isolation.driver == "bwrap" and session.isolation.level == Level.NAMESPACED
        assert session.isolation.bounds["network"].startswith("unshared")
        seen: list[tuple[str, bytes]] = []

        async def sink(stream: str, data: bytes) -> None:
            seen.append((stream, data))

        result = await session.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], on_output=sink)
        assert result.outcome.kind == "exit" and result.outcome.code == 3
        assert result.stdout == b"out\n" and result.stderr == b"err\n"
        assert (b"".join(d for s, d in seen if s == "stdout"), b"".join(d for s, d in seen if s == "stderr")) == (
            b"out\n", b"err\n")
        assert result.isolation.driver == "bwrap"
        await session.destroy()


async def test_files_in_and_out_and_a_planted_link_is_never_followed(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        session = await client.create(_spec())
        await session.write_files({"pkg/solution.py": b"print(6 * 7)\n"})
        result = await session.exec(["python3", "pkg/solution.py"])
        assert _succeeded(result) and result.stdout == b"42\n"
        planted = await session.exec(["sh", "-c", "ln -s /etc/passwd leak; ln -s / root; echo ok > out.txt"])
        assert _succeeded(planted)
        assert await session.read_files(["out.txt", "/workspace/pkg/solution.py"], max_bytes=1024) == {
            "out.txt": b"ok\n", "/workspace/pkg/solution.py": b"print(6 * 7)\n"}
        for path in ("leak", "root/etc/passwd", "../../etc/passwd", "/etc/passwd"):
            with pytest.raises(BadInputError, match="path"):
                await session.read_files([path], max_bytes=1 << 20)
        with pytest.raises(BadInputError, match="symbolic link"):
            await session.write_files({"leak": b"overwritten"})
        assert not Path("/etc/passwd").read_bytes().startswith(b"overwritten")
        await session.destroy()


async def test_escape_attempts_are_refused_never_a_success(sandboxd: str) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        async with SandboxClient(sandboxd, project="p") as client:
            session = await client.create(_spec(timeout_s=2.0, output_bytes=4096))
            shadow = await session.exec(["cat", "/etc/shadow"])
            assert not _succeeded(shadow) and b"root:" not in shadow.stdout
            outside = await session.exec(["sh", "-c", "echo x > /usr/escaped"])
            assert not _succeeded(outside) and not Path("/usr/escaped").exists()
            connect = await session.exec(["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', "
                                                           f"{port}), timeout=1)"])
            assert not _succeeded(connect)
            with pytest.raises(BlockingIOError):
                listener.accept()  # nothing reached the host's listener
            environment = await session.exec(["sh", "-c", "env; cat /proc/1/environ"])
            assert SECRET.encode() not in environment.stdout
            sleeper = await session.exec(["sleep", "30"])
            assert sleeper.outcome.kind == "timeout"
            flood = await session.exec(["sh", "-c", "yes xxxxxxxx | head -c 100000"])
            assert len(flood.stdout) <= 4096 and flood.stdout_truncated
            await session.destroy()
    finally:
        listener.close()


async def test_snapshot_restore_keeps_the_workspace_and_may_widen_the_network(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        session = await client.create(_spec())
        assert _succeeded(await session.exec(["sh", "-c", "mkdir -p d && echo state > d/f && ln -s d/f link"]))
        snapshot_id = await session.snapshot()
        await session.destroy()
        restored = await client.restore(snapshot_id)
        assert restored.id != session.id
        result = await restored.exec(["sh", "-c", "cat d/f; readlink link"])
        assert result.stdout == b"state\nd/f\n"
        # Restore takes another network policy (a granted escalation): the widened sandbox's egress goes through
        # its own logging proxy, which admits only the listed endpoint; Stats returns what it tried.
        widened = await client.restore(snapshot_id, network=NetworkPolicy((Endpoint("pypi.org", 443),)))
        assert "logging proxy" in widened.isolation.bounds["network"]
        tried = await widened.exec(["python3", "-c", "import urllib.request; urllib.request.urlopen("
                                    "'http://127.0.0.1:9/', timeout=5)"])
        assert (tried.outcome.kind, tried.outcome.effect) == ("denied", "egress denied"), tried
        [event] = (await widened.stats()).egress
        assert (event.host, event.port, event.allowed) == ("127.0.0.1", 9, False) and "allowlist" in event.reason
        await widened.destroy()
        denied = await client.restore(snapshot_id, network=NetworkPolicy())
        assert (await denied.exec(["cat", "d/f"])).stdout == b"state\n"
        stats = await restored.stats()
        assert stats.execs == 1 and stats.wall_s > 0
        for sandbox in (restored, denied):
            await sandbox.destroy()
        async with SandboxClient(sandboxd, project="other") as stranger:
            with pytest.raises(SandboxNotFound):
                await stranger.restore(snapshot_id)


async def test_a_sandbox_exists_only_in_its_project_and_until_destroyed(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="a") as mine, SandboxClient(sandboxd, project="b") as theirs:
        session = await mine.create(_spec())
        from evalsi.sandbox.client import RemoteSession

        borrowed = RemoteSession(theirs, session.id, session.isolation)
        with pytest.raises(SandboxNotFound, match="no such sandbox in project 'b'"):
            await borrowed.exec(["true"])
        with pytest.raises(SandboxNotFound):
            await borrowed.read_files(["x"], max_bytes=10)
        await session.destroy()
        with pytest.raises(SandboxNotFound):
            await session.exec(["true"])


async def test_no_rung_meets_the_minimum_sandbox_unavailable_and_nothing_ran(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        with pytest.raises(SandboxUnavailable) as caught:
            await client.create(SandboxSpec(min_isolation=Level.VM, ladder=("bwrap",)))
        assert str(caught.value).startswith("SANDBOX_UNAVAILABLE")
        assert [v.driver for v in caught.value.verdicts] == ["bwrap"]
        with pytest.raises(BadInputError, match="not a sandbox driver"):
            await client.create(SandboxSpec(ladder=("nonexistent",)))
        with pytest.raises(BadInputError, match="not a sandbox driver"):
            await client.probe(("made-up",))
        with pytest.raises(BadInputError, match="at most 8 driver names"):
            await client.probe(tuple(f"d{i}" for i in range(9)))


async def test_bad_specs_are_refused_naming_the_field(sandboxd: str, tmp_path: Path) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        with pytest.raises(BadInputError, match=r"spec.root.path: .* not under an image root"):
            from evalsi.sandbox.model import RootFilesystem

            await client.create(SandboxSpec(root=RootFilesystem("image", str(tmp_path))))
        with pytest.raises(BadInputError, match=r"spec.env: 'BAD-NAME'"):
            await client.create(SandboxSpec(env={"BAD-NAME": "x"}))
        with pytest.raises(BadInputError, match=r"spec\.resources\.pids"):
            await client.create(SandboxSpec(resources=Resources(pids=10**9)))


def test_the_socket_is_reachable_by_its_user_only(sandboxd: str) -> None:
    path = Path(sandboxd.removeprefix("unix:"))
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_the_cap_refuses_a_sandbox_past_it(tmp_path: Path) -> None:
    with running_sandboxd(tmp_path, flags=("--max-sandboxes", "1")) as (address, _):
        async with SandboxClient(address, project="p", call_timeout_s=3.0) as client:
            first = await client.create(_spec())
            with pytest.raises(SandboxBusy, match=r"1 sandboxes are alive, the most at once \(--max-sandboxes\)"):
                await client.create(_spec())
            waiting = asyncio.ensure_future(client.create(_spec()))
            await asyncio.sleep(0.3)
            await first.destroy()  # frees the slot the waiting Create takes
            second = await waiting
            assert _succeeded(await second.exec(["true"]))
            await second.destroy()


async def test_the_gate_admits_the_sandbox_role_only(tmp_path: Path) -> None:
    import hashlib

    worker_key = "evk_" + "w" * 43
    viewer_key = "evk_" + "v" * 43

    def digest(key: str) -> str:
        return "sha256:" + hashlib.sha256(key.encode()).hexdigest()

    auth = {"auth": {"api_keys": {"keys": [
        {"name": "worker", "key": digest(worker_key), "roles": {"p": ["sandbox"]}},
        {"name": "viewer", "key": digest(viewer_key), "roles": {"p": ["viewer"]}},
    ]}}}
    with running_sandboxd(tmp_path, config=auth) as (address, _):
        async with SandboxClient(address, project="p") as anonymous:
            with pytest.raises(Unauthenticated):
                await anonymous.probe()
        async with SandboxClient(address, project="p", authorization=f"Bearer {viewer_key}") as viewer:
            with pytest.raises(PermissionDenied, match=r"sandboxes\.use"):
                await viewer.create(_spec())
        async with SandboxClient(address, project="other", authorization=f"Bearer {worker_key}") as elsewhere:
            with pytest.raises(PermissionDenied):
                await elsewhere.create(_spec())
        async with SandboxClient(address, project="p", authorization=f"Bearer {worker_key}") as worker:
            session = await worker.create(_spec())
            assert _succeeded(await session.exec(["true"]))
            await session.destroy()


def test_a_bad_listen_address_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess

    from sandboxd_process import SANDBOXD

    done = subprocess.run([str(SANDBOXD), "--listen", "0.0.0.0:7070", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "EVALSI_CONFIG": ""})
    assert done.returncode == 2 and "0.0.0.0" in done.stderr


def _sleepers(marker: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == b"sleep\0" + marker + b"\0":
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_a_caller_that_goes_away_ends_its_execution(sandboxd: str) -> None:
    async with SandboxClient(sandboxd, project="p") as client:
        session = await client.create(_spec(timeout_s=60.0))
        started = asyncio.Event()

        async def sink(stream: str, data: bytes) -> None:
            started.set()

        running = asyncio.ensure_future(session.exec(["sh", "-c", "echo go; exec sleep 31.7"], on_output=sink))
        await asyncio.wait_for(started.wait(), 30)
        deadline = asyncio.get_running_loop().time() + 10
        while not _sleepers(b"31.7"):  # "go" arrives just before sh becomes sleep
            assert asyncio.get_running_loop().time() < deadline, "the program never started sleeping"
            await asyncio.sleep(0.05)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        deadline = asyncio.get_running_loop().time() + 10
        while _sleepers(b"31.7"):
            assert asyncio.get_running_loop().time() < deadline, "the sandboxed program outlived its caller"
            await asyncio.sleep(0.1)
        assert _succeeded(await session.exec(["true"]))  # the sandbox is free for the next execution
        await session.destroy()


async def test_a_rung_that_breaks_after_its_probe_is_a_runner_failure_never_a_denial(tmp_path: Path) -> None:
    """Infrastructure failing under a sandbox (its bwrap gone) is runner_failure through the service: retried,
    never scored; and a broken binary at start leaves the rung unavailable, so Create fails closed."""
    import shutil

    binary = tmp_path / "bwrap"
    shutil.copy(shutil.which("bwrap") or "/usr/bin/bwrap", binary)
    config = {"sandbox": {"ladder": ["bwrap"], "drivers": {"bwrap": {"binary": str(binary)}}}}
    with running_sandboxd(tmp_path, config=config) as (address, _):
        async with SandboxClient(address, project="p") as client:
            session = await client.create(_spec())
            assert _succeeded(await session.exec(["true"]))
            binary.unlink()
            broken = await session.exec(["true"])
            assert broken.outcome.kind == "runner_failure" and broken.outcome.signature, broken.outcome
            await session.destroy()
    (tmp_path / "again").mkdir()
    with running_sandboxd(tmp_path / "again", config=config) as (address, _):
        async with SandboxClient(address, project="p") as client:
            (verdict,) = await client.probe()
            assert not verdict.available and "not an executable" in verdict.reason
            with pytest.raises(SandboxUnavailable):
                await client.create(_spec())


async def test_an_image_root_under_the_servers_image_roots_is_the_sandboxs_whole_world(tmp_path: Path) -> None:
    from evalsi.sandbox.model import RootFilesystem
    from evalsi.testing.sandbox_images import busybox_image, busybox_tarball

    images = tmp_path / "images"
    image = busybox_image(images / "busybox")
    tarball = busybox_tarball(images / "busybox.tar", tmp_path / "build")
    outside = busybox_image(tmp_path / "elsewhere")
    with running_sandboxd(tmp_path, flags=("--image-root", str(images))) as (address, _):
        async with SandboxClient(address, project="p") as client:
            for root in (RootFilesystem("image", str(image)), RootFilesystem("tarball", str(tarball))):
                session = await client.create(SandboxSpec(root=root))
                result = await session.exec(["cat", "/etc/passwd"])
                # busybox_image's passwd, never the host's
                assert result.stdout == b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n", result
                assert not _succeeded(await session.exec(["ls", "/usr/lib/python3"]))  # no host /usr inside
                await session.destroy()
            with pytest.raises(BadInputError, match="not under an image root"):
                await client.create(SandboxSpec(root=RootFilesystem("image", str(outside))))
            with pytest.raises(BadInputError, match="not under an image root"):
                await client.create(SandboxSpec(root=RootFilesystem("image", f"{images}/../elsewhere")))
