"""Lanes: synchronous calls run in order on a worker thread while the event loop watches each call's deadline.

Python cannot stop a thread, so a call past its deadline is abandoned: the loop reports it (``expire``), and the
rest of the items go on in a fresh lane; the abandoned thread ends when that call returns and commits nothing.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

# How often the loop looks at a lane that is between calls or not started yet.
_IDLE_LOOK_S = 0.05


class Lane:
    """Calls ``call`` on ``items[start:]`` in order, on one thread, committing each answer.

    Once abandoned (its call in progress overran, or its awaiting task was cancelled) the lane commits nothing
    more and starts no further call. The lock makes "the call finished and was committed" and "the call was
    abandoned" exclusive, so an abandoned call's late answer never lands in a result; one lock section per call
    commits an answer and starts the next call's clock.
    """

    def __init__(
        self, items: Sequence[Any], call: Callable[[Any], Any], commit: Callable[[Any, Any], None], start: int
    ) -> None:
        self.items, self.call, self.commit, self.start = items, call, commit, start
        self.lock = threading.Lock()
        self.index = start
        self.started = time.monotonic()
        self.in_call = False
        self.abandoned = False

    def run(self) -> None:
        items, call, commit, lock = self.items, self.call, self.commit, self.lock
        index, end = self.start, len(items)
        if index >= end:
            return
        with lock:
            if self.abandoned:
                return
            self.index, self.started, self.in_call = index, time.monotonic(), True
        while True:
            value = call(items[index])
            with lock:
                if self.abandoned:
                    return
                commit(items[index], value)
                index += 1
                if index == end:
                    self.in_call = False
                    return
                self.index, self.started = index, time.monotonic()

    def abandon_overdue(self, timeout_s: float) -> tuple[int | None, float]:
        """(index of the call abandoned now, None if none) and the seconds until the call in progress is due."""
        with self.lock:
            if not self.in_call:
                return None, min(timeout_s, _IDLE_LOOK_S)
            left = self.started + timeout_s - time.monotonic()
            if left > 0:
                return None, left
            self.abandoned = True
            return self.index, 0.0

    def abandon(self) -> None:
        with self.lock:
            self.abandoned = True


async def in_lanes(
    items: Sequence[Any],
    call: Callable[[Any], Any],
    commit: Callable[[Any, Any], None],
    expire: Callable[[Any], object],
    timeout_s: float | None,
) -> None:
    """``commit(item, call(item))`` for each item in order off the loop; an overdue call is ``expire(item)``.

    A ``BadInputError`` raised by ``call`` or ``commit`` ends the whole evaluation (it reaches the awaiting task).
    """
    loop = asyncio.get_running_loop()
    if timeout_s is None:
        # No deadline to watch (embedded runs): the plain loop, without a lane's per-call locking.
        stopped = threading.Event()

        def run_all() -> None:
            for item in items:
                if stopped.is_set():
                    return
                commit(item, call(item))

        try:
            await loop.run_in_executor(None, run_all)
        except asyncio.CancelledError:
            stopped.set()
            raise
        return
    start = 0
    while start < len(items):
        lane = Lane(items, call, commit, start)
        future = loop.run_in_executor(None, lane.run)
        try:
            while True:
                overdue, wait = lane.abandon_overdue(timeout_s)
                if overdue is not None:
                    expire(items[overdue])
                    start = overdue + 1
                    break
                done, _ = await asyncio.wait({future}, timeout=wait)
                if done:
                    future.result()
                    return
        except asyncio.CancelledError:
            lane.abandon()
            raise
