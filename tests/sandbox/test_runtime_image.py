"""The runtime image, the default root for untrusted code: built once and cached by digest, hides the host's files,
runs python3 and sh, is named in the isolation report, survives concurrent builders, and is what sandboxd applies
whatever root a request asks for (a request naming the host's /usr is refused)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from sandboxd_process import require_bwrap, running_sandboxd

from evalsi.cli.sandbox_cmd import sandbox
from evalsi.errors import BadInputError
from evalsi.sandbox.bwrap import BwrapDriver
from evalsi.sandbox.client import SandboxClient
from evalsi.sandbox.config import SandboxConfig, load_sandbox_config, root_from_path
from evalsi.sandbox.model import Level, Resources, RootFilesystem, SandboxSpec
from evalsi.sandbox.runtime_image import ensure_runtime_image, find_inputs, stage_runtime
from evalsi.sandbox.v1alpha1 import sandbox_pb2 as pb
from evalsi.sandbox.vm.images import _stage
from evalsi.sandbox.wire import spec_from_proto

SPEC = SandboxSpec(min_isolation=Level.NAMESPACED, resources=Resources(timeout_s=20.0))


@pytest.fixture
def host_file() -> Iterator[Path]:
    """A file only the host has, under /usr/local/share: the host's /usr shows it, the runtime image must not."""
    directory = Path(tempfile.mkdtemp(prefix="evalsi-test-", dir="/usr/local/share"))
    directory.chmod(0o755)
    secret = directory / "secret.txt"
    secret.write_text("host-only-4711\n")
    secret.chmod(0o644)
    yield secret
    shutil.rmtree(directory, ignore_errors=True)


async def test_the_default_root_hides_host_files_that_the_host_root_shows(host_file: Path) -> None:
    require_bwrap()
    driver = BwrapDriver()
    assert SandboxSpec().root.kind == "runtime" and SandboxConfig().root.kind == "runtime"
    image = ensure_runtime_image(driver.config.cache_dir)
    session = await driver.create(SPEC)
    try:
        assert session.isolation.bounds["root"] == f"runtime image {image.digest} read-only"
        result = await session.exec(["cat", str(host_file)])
        assert result.outcome.kind in ("exit", "denied") and result.outcome.code not in (None, 0), result
        assert b"host-only-4711" not in result.stdout
        listing = await session.exec(["ls", "/", "/usr/bin"])
        assert b"python3" in listing.stdout and b"local" not in listing.stdout, listing
    finally:
        await session.destroy()
    host = await driver.create(replace(SPEC, root=RootFilesystem("host")))  # opt-in: trusted code only
    try:
        assert host.isolation.bounds["root"] == "host /usr read-only (trusted)"
        shown = await host.exec(["cat", str(host_file)])
        assert shown.outcome.kind == "exit" and shown.stdout == b"host-only-4711\n", shown
    finally:
        await host.destroy()


async def test_python3_sh_and_the_core_utilities_work_in_the_image() -> None:
    require_bwrap()
    session = await BwrapDriver().create(SPEC)
    try:
        await session.write_files({"t.py": b"import json, unittest, ctypes, subprocess\n"
                                           b"print(json.dumps(subprocess.run(['echo', 'hi'], capture_output=True,"
                                           b" text=True).stdout))\n"})
        result = await session.exec(["sh", "-c", "id -u; python3 -I -S t.py; env | sort | head -1; "
                                                 "cat /etc/passwd | grep -c nobody; ls /etc"])
        assert result.outcome.kind == "exit" and result.outcome.code == 0, result
        lines = result.stdout.decode().split()
        assert lines[0] == "65534" and lines[1] == '"hi\\n"' and "1" in lines
        assert "shadow" not in lines and "passwd" in lines  # a minimal /etc: no host secret
    finally:
        await session.destroy()


def test_concurrent_builders_end_with_one_good_image(tmp_path: Path) -> None:
    build = ("import sys; from pathlib import Path; from evalsi.sandbox.runtime_image import ensure_runtime_image; "
             "print(ensure_runtime_image(Path(sys.argv[1])).path)")
    cache = tmp_path / "cache"
    builders = [subprocess.Popen([sys.executable, "-c", build, str(cache)], stdout=subprocess.PIPE, text=True)
                for _ in range(3)]
    paths = {builder.communicate(timeout=120)[0].strip() for builder in builders}
    assert all(builder.returncode == 0 for builder in builders)
    assert len(paths) == 1
    (path,) = paths
    entries = sorted(p.name for p in (cache / "runtime").iterdir())
    assert [name for name in entries if not name.endswith(".lock")] == [Path(path).name]  # no staging left behind
    assert (Path(path) / "usr/bin/python3").exists() and (Path(path) / "usr/bin/sh").is_symlink()
    assert (Path(path) / "tmp").stat().st_mode & 0o1777 == 0o1777


def test_a_crashed_build_leaves_nothing_that_counts_and_is_cleaned_by_the_next(tmp_path: Path) -> None:
    inputs = find_inputs()
    leftover = tmp_path / "runtime" / f".stage-{inputs.digest()}-crashed"
    (leftover / "root/usr").mkdir(parents=True)  # what a killed build leaves: never taken as the image
    image = ensure_runtime_image(tmp_path, inputs)
    assert image.path == tmp_path / "runtime" / inputs.digest() and not leftover.exists()


def test_the_vm_runtime_disk_is_staged_from_the_same_tree(tmp_path: Path) -> None:
    inputs = find_inputs()
    stage_runtime(tmp_path / "runtime", inputs)
    _stage(tmp_path / "vm", inputs)
    runtime = {str(p.relative_to(tmp_path / "runtime")) for p in (tmp_path / "runtime").rglob("*")}
    vm = {str(p.relative_to(tmp_path / "vm")) for p in (tmp_path / "vm").rglob("*")}
    assert runtime <= vm  # the guest's disk is the runtime image plus its agent and mount points
    assert vm - runtime >= {"evalsi/agent.py", "etc/shadow"}


def test_roots_by_name_and_the_config_key() -> None:
    assert root_from_path("", "--root") == RootFilesystem("runtime") == root_from_path("runtime", "--root")
    assert root_from_path("host", "--root") == RootFilesystem("host")
    assert load_sandbox_config({"root": "host"}).root == RootFilesystem("host")
    assert load_sandbox_config(None).root == RootFilesystem("runtime")
    with pytest.raises(BadInputError, match=r"sandbox.root: '/nope' .* accepted: runtime .* host"):
        load_sandbox_config({"root": "/nope"})


def test_a_request_naming_the_host_root_is_refused_and_the_servers_root_applies() -> None:
    served = RootFilesystem("image", "/srv/images/python")
    for asked in (pb.RootFilesystem(), pb.RootFilesystem(kind="runtime")):
        spec = spec_from_proto(pb.SandboxSpec(root=asked), default_level=Level.NAMESPACED,
                               default_resources=Resources(), default_root=served)
        assert spec.root == served
    with pytest.raises(BadInputError, match=r"spec.root.kind: 'host' .* not a request's choice"):
        spec_from_proto(pb.SandboxSpec(root=pb.RootFilesystem(kind="host")), default_level=Level.NAMESPACED,
                        default_resources=Resources(), default_root=RootFilesystem("host"))
    with pytest.raises(BadInputError, match=r"spec.root.path: the runtime root takes no path"):
        spec_from_proto(pb.SandboxSpec(root=pb.RootFilesystem(kind="runtime", path="/")),
                        default_level=Level.NAMESPACED, default_resources=Resources())


async def test_sandboxd_gives_the_runtime_image_and_refuses_the_host_root(tmp_path: Path, host_file: Path) -> None:
    with running_sandboxd(tmp_path) as (address, _):
        async with SandboxClient(address, project="p") as client:
            with pytest.raises(BadInputError, match=r"spec.root.kind: 'host'"):
                await client.create(replace(SPEC, root=RootFilesystem("host")))
            session = await client.create(SPEC)
            try:
                assert session.isolation.bounds["root"].startswith("runtime image ")
                result = await session.exec(["sh", "-c", f"cat {host_file}; python3 -c 'print(6*7)'"])
                assert b"host-only-4711" not in result.stdout and result.stdout.endswith(b"42\n"), result
            finally:
                await session.destroy()


def test_the_image_command_and_run_with_root_host(tmp_path: Path, host_file: Path) -> None:
    require_bwrap()
    config = tmp_path / "evalsi.yaml"
    config.write_text(f"sandbox: {{ladder: [bwrap], cache_dir: {tmp_path / 'cache'}}}\n")
    runner = CliRunner()
    shown = runner.invoke(sandbox, ["image", "--config", str(config), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    summary = json.loads(shown.output)
    assert summary["path"].startswith(str(tmp_path / "cache" / "runtime"))
    assert summary["python"].endswith(f"/bin/{find_inputs().python.name}") and summary["shell"] == "busybox sh"
    assert 10 << 20 < summary["size_bytes"] < 200 << 20
    default = runner.invoke(sandbox, ["run", "--config", str(config), "--format", "json", "--", "cat", str(host_file)])
    assert default.exit_code != 0, default.output
    assert json.loads(default.output)["isolation"]["bounds"]["root"].startswith("runtime image "), default.output
    host = runner.invoke(sandbox, ["run", "--config", str(config), "--root", "host", "--format", "json", "--",
                                   "cat", str(host_file)])
    assert host.exit_code == 0, host.output
    assert json.loads(host.output)["stdout"] == "host-only-4711\n"
