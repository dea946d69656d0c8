"""The worker's run cancel watch: one flag read a second per run with tasks in flight, polling that stops by
itself when the run's last task leaves (never by a cancellation that Python 3.11's wait_for may swallow)."""

from __future__ import annotations

import asyncio

import pytest

from evalsi_worker.cancels import CancelWatch


class Flags:
    """Run flags as a dict, counting reads per run."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.reads: dict[str, int] = {}

    async def get(self, run_id: str) -> str:
        self.reads[run_id] = self.reads.get(run_id, 0) + 1
        await asyncio.sleep(0)
        return self.values.get(run_id, "running")


async def test_many_tasks_of_a_run_share_one_poll_a_period() -> None:
    flags = Flags()
    watch = CancelWatch(flags.get, every_s=0.05)

    async def task() -> None:
        async with watch.watching("run-a") as cancelled:
            await asyncio.sleep(0.26)
            assert not cancelled.is_set()

    await asyncio.gather(*(task() for _ in range(20)))
    # One read on entry, then one per 0.05 s for ~0.26 s: about 6, not 20 tasks x 6.
    assert 3 <= flags.reads["run-a"] <= 9, flags.reads
    await asyncio.sleep(0.12)
    assert watch.pollers == 0  # the poller ended with the last task, with nothing cancelling it
    await watch.close()


async def test_a_cancel_reaches_every_task_of_the_run_within_a_period() -> None:
    flags = Flags()
    watch = CancelWatch(flags.get, every_s=0.05)
    seen: list[str] = []

    async def task(run_id: str) -> None:
        async with watch.watching(run_id) as cancelled:
            try:
                await asyncio.wait_for(cancelled.wait(), timeout=1.0)
                seen.append(run_id)
            except TimeoutError:
                seen.append(f"{run_id} not cancelled")

    tasks = [asyncio.create_task(task(run)) for run in ("run-a", "run-a", "run-b")]
    await asyncio.sleep(0.02)
    flags.values["run-a"] = "cancelled"
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.gather(*tasks[:2])
    assert loop.time() - started < 0.2
    await tasks[2]
    assert sorted(seen) == ["run-a", "run-a", "run-b not cancelled"]
    await watch.close()


async def test_a_task_of_a_run_already_cancelled_sees_it_on_entry() -> None:
    flags = Flags()
    flags.values["run-c"] = "cancelled"
    watch = CancelWatch(flags.get, every_s=10.0)
    async with watch.watching("run-c") as cancelled:
        assert cancelled.is_set()
    assert watch.pollers == 0
    await watch.close()


async def test_a_failing_read_on_entry_propagates_and_leaves_nothing_polling() -> None:
    async def down(_run_id: str) -> str:
        raise TimeoutError("bus down")

    watch = CancelWatch(down, every_s=0.01)
    with pytest.raises(TimeoutError):
        async with watch.watching("run-d"):
            pass
    await asyncio.sleep(0.03)
    assert watch.pollers == 0
    await watch.close()
