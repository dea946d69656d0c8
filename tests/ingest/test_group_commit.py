"""``GroupCommit`` without a server: submissions close together share one write, a write never waits past its
linger or its size, every caller hears its own write's outcome, and nothing is reported written that was not."""

from __future__ import annotations

import asyncio
import time

import pytest

from evalsi.stores.traces.group_commit import GroupCommit


class _Recorder:
    def __init__(self, delay_s: float = 0.0, fail: Exception | None = None) -> None:
        self.writes: list[list[list[int]]] = []
        self.delay_s = delay_s
        self.fail = fail

    async def __call__(self, items: list[list[int]]) -> None:
        await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        self.writes.append(items)


async def _submit_later(commit: GroupCommit[list[int]], item: list[int], after_s: float) -> None:
    await asyncio.sleep(after_s)
    await commit.submit(item)


async def test_items_within_the_linger_share_one_write() -> None:
    write = _Recorder()
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len, linger_s=0.5, max_size=100)
    started = time.monotonic()
    await asyncio.gather(commit.submit([1, 2]), _submit_later(commit, [3], 0.05), _submit_later(commit, [4], 0.1))
    assert write.writes == [[[1, 2], [3], [4]]]
    assert time.monotonic() - started >= 0.45  # nobody was answered before the one write, after the linger


async def test_a_write_goes_as_soon_as_its_items_weigh_max_size() -> None:
    write = _Recorder()
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len, linger_s=30.0, max_size=4)
    started = time.monotonic()
    await asyncio.gather(commit.submit([1, 2]), _submit_later(commit, [3, 4], 0.05))
    assert write.writes == [[[1, 2], [3, 4]]]
    assert time.monotonic() - started < 5.0  # far from the 30 s linger


async def test_without_linger_items_arriving_during_a_write_go_together_into_the_next() -> None:
    write = _Recorder(delay_s=0.2)
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len)
    await asyncio.gather(commit.submit([1]), _submit_later(commit, [2], 0.05), _submit_later(commit, [3], 0.1))
    assert write.writes == [[[1]], [[2], [3]]]


async def test_a_failed_write_fails_each_of_its_callers_and_the_next_write_still_runs() -> None:
    write = _Recorder(fail=RuntimeError("disk full"))
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len, linger_s=0.2, max_size=100)
    results = await asyncio.gather(commit.submit([1]), _submit_later(commit, [2], 0.05), return_exceptions=True)
    assert [str(result) for result in results] == ["disk full", "disk full"]
    write.fail = None
    await commit.submit([3])
    assert write.writes == [[[3]]]


async def test_cancelled_while_lingering_nothing_is_reported_written() -> None:
    write = _Recorder()
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len, linger_s=30.0, max_size=100)
    caller = asyncio.create_task(commit.submit([1]))
    await asyncio.sleep(0.05)
    writer = commit._writer
    assert writer is not None
    writer.cancel()  # the loop shutting down
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert write.writes == []


async def test_items_that_waited_for_a_write_do_not_linger_again() -> None:
    write = _Recorder(delay_s=1.0)
    commit: GroupCommit[list[int]] = GroupCommit(write, size=len, linger_s=1.0, max_size=100)
    started = time.monotonic()
    await asyncio.gather(commit.submit([1]), _submit_later(commit, [2], 1.05))
    # [1] lingers 1 s and is written by 2 s; [2], pending since 1.05 s, is written at once: done by about 3 s
    # (4 s had it lingered again).
    assert write.writes == [[[1]], [[2]]]
    assert time.monotonic() - started < 3.5
