"""A reduce over the dataset itself (no generating target) reads the run's records by reference, as a shard task
does: in process, the records as they are held, with no serialized copy of the dataset stored for it."""

from __future__ import annotations

from typing import Any

import pytest

import evalsi
from evalsi.stores.memory import MemoryRecords


def test_a_dataset_reduce_stores_no_copy_of_the_records(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"id": f"r{i}", "reference": "ab"[i % 2], "output": "ab"[i // 2 % 2]} for i in range(40)]

    def refused(self: Any, *args: Any) -> str:
        raise AssertionError("the reduce stored a copy of the dataset")

    monkeypatch.setattr(MemoryRecords, "put_outputs", refused)
    result = evalsi.evaluate(rows, ["builtin/classification"], bootstrap_resamples=50)
    accuracy = result.metric("classification.accuracy")
    assert accuracy.mean == 0.5 and accuracy.ci.low < 0.5 < accuracy.ci.high
