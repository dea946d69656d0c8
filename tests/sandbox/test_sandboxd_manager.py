"""The manager's leases, cap, reaping and snapshots over the real bubblewrap rung (evalsi.sandbox.manager)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sandboxd_process import require_bwrap

from evalsi.errors import BadInputError
from evalsi.sandbox.config import SandboxConfig
from evalsi.sandbox.ladder import Ladder
from evalsi.sandbox.manager import ManagerLimits, SandboxBusy, SandboxManager, SandboxNotFound
from evalsi.sandbox.model import SandboxSpec


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _manager(tmp_path: Path, clock: Clock, **limits: float) -> SandboxManager:
    require_bwrap()
    return SandboxManager(Ladder(SandboxConfig(ladder=("bwrap",))), tmp_path / "snapshots",
                          ManagerLimits(**limits), clock=clock)  # type: ignore[arg-type]


async def test_an_idle_sandbox_is_reaped_when_its_lease_runs_out_and_each_call_renews_it(tmp_path: Path) -> None:
    clock = Clock()
    manager = _manager(tmp_path, clock, max_sandboxes=2)
    try:
        sandbox = await manager.create(SandboxSpec(), "p", lease_s=10)
        workspace = sandbox.session.host_workspace  # type: ignore[attr-defined]
        clock.now += 8
        await manager.exec(sandbox.id, "p", ["true"])  # renews: 10 s from now
        clock.now += 8
        assert await manager.reap() == []
        clock.now += 3
        assert await manager.reap() == [sandbox.id]
        with pytest.raises(SandboxNotFound, match="reaped after its lease"):
            manager.get(sandbox.id, "p")
        assert not Path(workspace).exists() and manager.count == 0
    finally:
        await manager.close()


async def test_a_running_execution_holds_its_sandbox_past_the_lease(tmp_path: Path) -> None:
    clock = Clock()
    manager = _manager(tmp_path, clock)
    try:
        sandbox = await manager.create(SandboxSpec(), "p", lease_s=1)
        running = asyncio.ensure_future(manager.exec(sandbox.id, "p", ["sleep", "1"]))
        await asyncio.sleep(0.3)
        clock.now += 60
        assert await manager.reap() == []  # busy: never reaped under its own execution
        result = await running
        assert result.outcome.kind == "exit" and result.outcome.code == 0
        clock.now += 60
        assert await manager.reap() == [sandbox.id]
    finally:
        await manager.close()


async def test_the_cap_waits_then_refuses_and_a_failed_create_frees_its_slot(tmp_path: Path) -> None:
    manager = _manager(tmp_path, Clock(), max_sandboxes=1)
    try:
        first = await manager.create(SandboxSpec(), "p")
        with pytest.raises(SandboxBusy, match="1 sandboxes are alive"):
            await manager.create(SandboxSpec(), "p", wait_s=0.2)
        await manager.destroy(first.id, "p")
        with pytest.raises(BadInputError):
            await manager.create(SandboxSpec(ladder=("nope",)), "p")
        second = await manager.create(SandboxSpec(), "p", wait_s=0.2)  # the refused create left the slot free
        assert second.id != first.id
    finally:
        await manager.close()
    assert manager.count == 0


async def test_a_flood_of_creates_past_the_waiting_bound_is_refused_at_once(tmp_path: Path) -> None:
    manager = _manager(tmp_path, Clock(), max_sandboxes=1, max_waiting=2)
    try:
        first = await manager.create(SandboxSpec(), "p")
        waiting = [asyncio.ensure_future(manager.create(SandboxSpec(), "p", wait_s=5)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(SandboxBusy, match="2 Creates already wait"):
            await manager.create(SandboxSpec(), "p", wait_s=5)
        await manager.destroy(first.id, "p")
        winner = await asyncio.wait_for(waiting[0], 5)
        await manager.destroy(winner.id, "p")
        await manager.destroy((await asyncio.wait_for(waiting[1], 5)).id, "p")
    finally:
        await manager.close()


async def test_calls_on_one_sandbox_past_the_queue_bound_are_refused(tmp_path: Path) -> None:
    manager = _manager(tmp_path, Clock(), max_queued_calls=2)
    try:
        sandbox = await manager.create(SandboxSpec(), "p")
        running = [asyncio.ensure_future(manager.exec(sandbox.id, "p", ["sleep", "0.5"])) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(SandboxBusy, match="2 calls already run or wait on it"):
            await manager.exec(sandbox.id, "p", ["true"])
        assert [r.outcome.code for r in await asyncio.gather(*running)] == [0, 0]
        assert (await manager.exec(sandbox.id, "p", ["true"])).outcome.code == 0
    finally:
        await manager.close()


async def test_leases_and_transfers_are_bounded(tmp_path: Path) -> None:
    manager = _manager(tmp_path, Clock(), max_lease_s=60, default_lease_s=30, max_transfer_bytes=1024)
    try:
        with pytest.raises(BadInputError, match="lease_s 61: at most 60"):
            await manager.create(SandboxSpec(), "p", lease_s=61)
        sandbox = await manager.create(SandboxSpec(), "p")
        assert sandbox.lease_s == 30
        with pytest.raises(BadInputError, match="over the limit of 1024"):
            await manager.write_files(sandbox.id, "p", {"big": b"x" * 2000})
        with pytest.raises(BadInputError, match="max_bytes"):
            await manager.read_files(sandbox.id, "p", ["big"], max_bytes=4096)
        with pytest.raises(BadInputError, match="argv"):
            await manager.exec(sandbox.id, "p", [])
    finally:
        await manager.close()


async def test_snapshots_past_the_cap_drop_the_oldest_and_close_removes_them(tmp_path: Path) -> None:
    manager = _manager(tmp_path, Clock(), max_snapshots=2)
    sandbox = await manager.create(SandboxSpec(), "p")
    await manager.write_files(sandbox.id, "p", {"f": b"1"})
    ids = [(await manager.snapshot(sandbox.id, "p"))[0] for _ in range(3)]
    with pytest.raises(SandboxNotFound):
        await manager.restore(ids[0], "p")
    restored = await manager.restore(ids[2], "p")
    assert await manager.read_files(restored.id, "p", ["f"]) == {"f": b"1"}
    assert len(list((tmp_path / "snapshots").iterdir())) == 2
    await manager.close()
    assert list((tmp_path / "snapshots").iterdir()) == []
