"""A worker serving other people's runs on its own ladder (no evalsi-sandboxd) never lets a run name a host path as a
sandbox's root: evalsi-sandboxd decides that by its --image-root list, and a worker has none."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.judges.panel import JudgeSet
from evalsi.runs.execute import Executor
from evalsi.runs.local import InProcessExecutor
from evalsi.sandbox.access import LadderOpener, check_served_root
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.model import RootFilesystem, SandboxSpec

HOST_ROOTS = [
    RootFilesystem("image", "/srv/images/python"),
    RootFilesystem("tarball", "/tmp/root.tar"),
    RootFilesystem("oci", "/srv/layouts/python"),
    RootFilesystem("dockerfile", "/home/someone/Dockerfile", "/home/someone"),
    RootFilesystem("host"),
]


@pytest.mark.parametrize("root", HOST_ROOTS, ids=lambda r: r.kind)
def test_a_host_path_root_is_refused_naming_it_and_what_is_accepted(root: RootFilesystem) -> None:
    with pytest.raises(BadInputError) as caught:
        check_served_root(root, RootFilesystem())
    message = str(caught.value)
    assert f"{{{root.kind}:" in message and "accepted: the runtime root or an OCI image by reference" in message
    assert "EVALSI_SANDBOXD" in message


@pytest.mark.parametrize("root", [RootFilesystem(), RootFilesystem("oci", "python:3.12-slim"),
                                  RootFilesystem("image", "/srv/operator/image")])
def test_the_runtime_root_an_oci_reference_and_the_configured_root_pass(root: RootFilesystem) -> None:
    check_served_root(root, RootFilesystem("image", "/srv/operator/image"))


def test_the_ladder_opener_refuses_before_anything_runs(tmp_path: Path) -> None:
    opener = LadderOpener(Ladder(SandboxConfig(ladder=("bwrap",))), caller_roots=False)
    image = tmp_path / "image"  # never read: the refusal comes before the ladder is asked
    spec = SandboxSpec(root=RootFilesystem("image", str(image)))
    with pytest.raises(BadInputError, match="this worker opens sandboxes on its own ladder"):
        asyncio.run(opener.open(spec, "default"))


def test_a_served_executor_refuses_by_default_and_the_embedded_one_does_not() -> None:
    async def openers() -> tuple[LadderOpener, LadderOpener]:
        async with JudgeSet({}) as judges:
            served = Executor(Registry(), judges)  # as the worker makes it, without sandboxd
            embedded = InProcessExecutor(Registry(), judges)
            return served._environment_opener().inner, embedded._environment_opener().inner  # type: ignore[attr-defined]

    served, embedded = asyncio.run(openers())
    assert served.caller_roots is False and embedded.caller_roots is True
