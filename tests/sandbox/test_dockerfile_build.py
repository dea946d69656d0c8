"""Images built from a Dockerfile on the real bubblewrap rung: COPY, RUN, ENV and WORKDIR from the runtime image,
a rebuild that runs nothing, a failing RUN naming its line, COPY refused outside the context, a link planted by a
RUN resolved inside the image, no network for RUN, and a sandbox opened on the built image through the ladder."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import cast

import pytest

from evalsi.errors import BadInputError
from evalsi.sandbox.config import load_sandbox_config
from evalsi.sandbox.image_build import BuildDriver, BuiltImage, build_image, find_image
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import Level, RootFilesystem, SandboxSpec

DOCKERFILE = """\
FROM evalsi/runtime
ARG FLAVOR=plain
ENV GREETING="hello there" \\
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
COPY tool.py ./
COPY data/ /opt/data/
RUN cat /proc/sys/kernel/random/uuid > stamp && echo "$GREETING $FLAVOR $(pwd)" > info \\
    && python3 tool.py >> info && id -u >> info
"""


def _context(tmp_path: Path, dockerfile: str = DOCKERFILE) -> Path:
    context = tmp_path / "ctx"
    (context / "data" / "nested").mkdir(parents=True)
    (context / "Dockerfile").write_text(dockerfile)
    (context / "tool.py").write_text("print('tool ran')\n")
    (context / "data" / "a.txt").write_text("A\n")
    (context / "data" / "nested" / "b.txt").write_text("B\n")
    os.symlink("../a.txt", context / "data" / "nested" / "link-to-a")
    return context


def _ladder(tmp_path: Path) -> Ladder:
    return Ladder(load_sandbox_config({"ladder": ["bwrap"], "cache_dir": str(tmp_path / "cache")}))


async def _build(tmp_path: Path, context: Path) -> BuiltImage:
    ladder = _ladder(tmp_path)
    return await build_image(RootFilesystem("dockerfile", str(context / "Dockerfile")), ladder.config,
                             cast(BuildDriver, ladder.driver("bwrap")))


async def test_copy_run_env_and_workdir_from_the_runtime_image(tmp_path: Path) -> None:
    context = _context(tmp_path)
    image = await _build(tmp_path, context)
    root = image.path
    assert (image.steps_run, image.steps_cached) == (6, 0)  # ARG and ENV are steps of the chain too
    assert image.config.workdir == "/app"
    assert dict(image.config.env) == {"GREETING": "hello there", "PYTHONDONTWRITEBYTECODE": "1"}
    # RUN ran in the image as the sandbox's user, in WORKDIR, with ENV and ARG as variables, writing the image.
    assert (root / "app" / "info").read_text() == "hello there plain /app\ntool ran\n65534\n"
    assert (root / "app" / "tool.py").read_text() == "print('tool ran')\n"
    assert (root / "opt" / "data" / "nested" / "b.txt").read_text() == "B\n"
    assert os.readlink(root / "opt" / "data" / "nested" / "link-to-a") == "../a.txt"
    assert (root / "usr" / "bin" / "busybox").is_file()  # the base's files are in it
    # Settled after the RUN: owned by this process's user again, no group/other write bits.
    info = os.stat(root / "app" / "stamp")
    assert (info.st_uid, info.st_mode & 0o022) == (os.geteuid(), 0)
    meta = json.loads((root.parent / "image.json").read_text())
    assert meta["digest"] == image.digest and meta["config"]["workdir"] == "/app"
    assert find_image(RootFilesystem("dockerfile", str(context / "Dockerfile")), tmp_path / "cache").path == root


async def test_a_rebuild_is_a_lookup_and_a_changed_file_reruns_only_what_follows(tmp_path: Path) -> None:
    context = _context(tmp_path)
    first = await _build(tmp_path, context)
    stamp = (first.path / "app" / "stamp").read_text()
    created = {path.parent.name: json.loads(path.read_text()).get("created")
               for path in (tmp_path / "cache" / "dockerfile" / "sha256").glob("*/image.json")}
    again = await _build(tmp_path, context)
    assert (again.digest, again.steps_run, again.steps_cached) == (first.digest, 0, 6)
    # The RUN did not run again: its random stamp is the first build's, and no entry was rewritten.
    assert (again.path / "app" / "stamp").read_text() == stamp
    assert {path.parent.name: json.loads(path.read_text()).get("created")
            for path in (tmp_path / "cache" / "dockerfile" / "sha256").glob("*/image.json")} == created
    (context / "data" / "a.txt").write_text("A changed\n")
    changed = await _build(tmp_path, context)
    assert changed.digest != first.digest
    assert (changed.steps_run, changed.steps_cached) == (2, 4)  # COPY data/ and the RUN after it
    assert (changed.path / "app" / "stamp").read_text() != stamp
    assert (changed.path / "opt" / "data" / "a.txt").read_text() == "A changed\n"
    assert (first.path / "opt" / "data" / "a.txt").read_text() == "A\n"  # the old image is untouched


async def test_a_failing_run_names_its_line_exit_status_and_stderr(tmp_path: Path) -> None:
    context = _context(tmp_path, "FROM evalsi/runtime\nCOPY tool.py /t.py\n"
                                 "RUN echo fine && echo 'no such package: left-pad' >&2 && exit 3\n")
    with pytest.raises(BadInputError, match=r"Dockerfile:3: RUN \"/bin/sh -c echo fine .*\" exited 3: no such "
                                            r"package: left-pad$"):
        await _build(tmp_path, context)
    base = tmp_path / "cache" / "dockerfile"
    assert not list(base.glob(".build-*"))  # no staging left
    assert len(list((base / "sha256").glob("*/image.json"))) == 2  # the base and the COPY; the RUN never stored
    with pytest.raises(BadInputError, match="not built yet"):
        find_image(RootFilesystem("dockerfile", str(context / "Dockerfile")), tmp_path / "cache")


@pytest.mark.parametrize(("copy", "message"), [
    ("COPY ../outside.txt /x", r"Dockerfile:2: COPY: '\.\./outside\.txt' leaves the build context"),
    ("COPY escape /x", r"Dockerfile:2: COPY: 'escape' leads outside the build context"),
    ("COPY tree/ /x/", r"Dockerfile:2: COPY: 'tree/out': a symbolic link to '/etc/passwd' points outside"),
    ("COPY uptree/ /x/", r"Dockerfile:2: COPY: 'uptree/up': a symbolic link to '\.\./\.\./outside\.txt' points "
                         r"outside"),
    ("COPY missing.txt /x", r"Dockerfile:2: COPY: 'missing\.txt': no such file in the build context"),
    ("COPY *.nothing /x/", r"Dockerfile:2: COPY: '\*\.nothing' matches no file"),
])
async def test_copy_outside_the_context_is_refused(tmp_path: Path, copy: str, message: str) -> None:
    context = _context(tmp_path, f"FROM evalsi/runtime\n{copy}\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    os.symlink(tmp_path / "outside.txt", context / "escape")
    (context / "tree").mkdir()
    os.symlink("/etc/passwd", context / "tree" / "out")
    (context / "uptree").mkdir()
    os.symlink("../../outside.txt", context / "uptree" / "up")
    with pytest.raises(BadInputError, match=message):
        await _build(tmp_path, context)


async def test_a_link_planted_by_run_is_resolved_inside_the_image_never_on_the_host(tmp_path: Path) -> None:
    name = f"evalsi-planted-{os.getpid()}.txt"
    context = _context(tmp_path, f"FROM evalsi/runtime\nRUN mkdir -p /app && ln -s /etc /app/out\n"
                                 f"COPY tool.py /app/out/{name}\n")
    image = await _build(tmp_path, context)
    assert (image.path / "etc" / name).read_text() == "print('tool ran')\n"
    assert not Path("/etc", name).exists()


async def test_run_has_no_network_to_the_host(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        context = _context(tmp_path, f"FROM evalsi/runtime\nRUN [\"python3\", \"-c\", \"{probe}\"]\n")
        with pytest.raises(BadInputError, match=r"(?s)Dockerfile:2: RUN .* was denied by the sandbox \(network "
                                                r"denied\): .*Connection refused"):
            await _build(tmp_path, context)
        with pytest.raises(BlockingIOError):
            server.accept()  # nothing reached the host's port


async def test_a_sandbox_on_the_built_image_starts_in_its_workdir_with_its_files_and_env(tmp_path: Path) -> None:
    context = _context(tmp_path)
    ladder = _ladder(tmp_path)
    root = RootFilesystem("dockerfile", str(context / "Dockerfile"))
    session = await ladder.create(SandboxSpec(root=root, env={"GREETING": "overridden"}))
    try:
        result = await session.exec(["sh", "-c", "pwd; cat info; echo $GREETING $PYTHONDONTWRITEBYTECODE; "
                                                 "echo edited >> tool.py && tail -1 tool.py; ls /opt/data"])
    finally:
        await session.destroy()
    assert result.outcome.kind == "exit" and result.outcome.code == 0, result.stderr
    assert result.stdout.decode().splitlines() == [
        "/app", "hello there plain /app", "tool ran", "65534", "overridden 1", "edited", "a.txt", "nested"]
    image = find_image(root, tmp_path / "cache")
    assert result.isolation.bounds["root"] == f"dockerfile {image.digest} ({context / 'Dockerfile'}) read-only"
    assert (image.path / "app" / "tool.py").read_text() == "print('tool ran')\n"  # the workspace was a copy


async def test_the_built_image_is_the_root_of_the_gvisor_rung_too(tmp_path: Path) -> None:
    context = _context(tmp_path)
    ladder = Ladder(load_sandbox_config({"ladder": ["gvisor"], "cache_dir": str(tmp_path / "cache")}))
    session = await ladder.create(SandboxSpec(min_isolation=Level.KERNEL,
                                              root=RootFilesystem("dockerfile", str(context / "Dockerfile"))))
    try:
        result = await session.exec(["sh", "-c", "pwd; cat info; echo $GREETING"])
    finally:
        await session.destroy()
    assert (result.outcome.kind, result.isolation.driver) == ("exit", "gvisor"), result.stderr
    assert result.stdout.decode().splitlines() == ["/app", "hello there plain /app", "tool ran", "65534",
                                                   "hello there"]
    assert result.isolation.bounds["root"].startswith("dockerfile sha256:")
