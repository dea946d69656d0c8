"""`evalsi serve` starts evalsi-sandboxd beside the other services: on a Unix socket in its state directory, its
address handed to the workers, exec'd (never forked from the supervisor), and a sandbox runs through it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from sandboxd_process import require_bwrap

from evalsi.errors import InfraError
from evalsi.sandbox.client import SANDBOXD_ENV, SandboxClient
from evalsi.sandbox.model import Level, SandboxSpec
from evalsi.service.config import Config, SandboxdConfig
from evalsi.service.sandboxd_plan import sandboxd_plan
from evalsi.testing.stack import Stack


async def test_serve_runs_sandboxd_and_tells_the_workers_where(tmp_path: Path) -> None:
    require_bwrap()
    stack = Stack(tmp_path, schedulers=1, cpu_workers=1, judge_workers=0, harness_workers=0).start()
    try:
        children = {child.name: child for child in stack.supervisor.children}
        sandboxd = children["sandboxd"]
        assert sandboxd.exec_only and not sandboxd.fork
        address = sandboxd.argv[sandboxd.argv.index("--listen") + 1]
        assert address.startswith("unix:")
        assert children["worker-cpu-0"].env[SANDBOXD_ENV] == address
        # A sandbox host holds no store or bus secrets (§17): none of the services' URLs reach sandboxd.
        assert not {"EVALSI_METADATA_URL", "EVALSI_OBJECTS_URL", "EVALSI_NATS_URL"} & set(sandboxd.env)
        async with SandboxClient.from_environment(children["worker-cpu-0"].env, project="p") as client:
            await _ready(client)
            session = await client.create(SandboxSpec(min_isolation=Level.NAMESPACED))
            result = await session.exec(["python3", "-c", "print('served')"])
            assert (result.outcome.kind, result.outcome.code, result.stdout) == ("exit", 0, b"served\n")
            await session.destroy()
    finally:
        stack.stop()


async def _ready(client: SandboxClient) -> None:
    """Stack.start waits for the api alone; sandboxd answers once its ladder is probed and its socket bound."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await client.probe()
            return
        except InfraError:
            assert time.monotonic() < deadline, "sandboxd never answered"
            await asyncio.sleep(0.2)


def test_sandboxd_can_be_left_out_and_a_long_state_dir_gets_a_short_socket(tmp_path: Path) -> None:
    assert sandboxd_plan(Config(sandboxd=SandboxdConfig(enabled=False)), tmp_path) is None
    deep = tmp_path / ("d" * 90)
    plan = sandboxd_plan(Config(), deep)
    assert plan is not None and len(plan.address) <= 105 and plan.address.startswith("unix:")
    assert (deep / "sandboxd" / "sandboxd.yaml").stat().st_mode & 0o777 == 0o600
