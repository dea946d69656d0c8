"""The cyclic collector's pause around embedded runs of deterministic evaluators (runs.collector)."""

from __future__ import annotations

import gc
import threading

import evalsi
from evalsi.runs.collector import collector_paused


def test_a_pause_disables_the_collector_and_restores_it() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():  # nested
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()


def test_a_pause_leaves_a_collector_disabled_by_its_caller_disabled() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_on_two_threads_restore_the_collector_once_both_end() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen["while the second holds it"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"while the second holds it": False}
    assert gc.isenabled()


def test_evaluate_pauses_the_collector_for_deterministic_evaluators_only() -> None:
    seen: list[bool] = []

    @evalsi.evaluator("test/collector-probe", version="1.0.0")
    def probe(record: evalsi.Record) -> bool:
        seen.append(gc.isenabled())
        return True

    @evalsi.evaluator("test/collector-probe-async", version="1.0.0")
    async def probe_async(record: evalsi.Record) -> bool:
        seen.append(gc.isenabled())
        return True

    rows = [{"id": "a", "output": "x", "reference": "x"}]
    assert evalsi.evaluate(rows, [probe]).metric("collector-probe").mean == 1.0
    assert evalsi.evaluate(rows, [probe_async]).metric("collector-probe-async").mean == 1.0
    assert seen == [False, True]
    assert gc.isenabled()
