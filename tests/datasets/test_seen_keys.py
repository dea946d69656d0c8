"""The compact counter behind a dataset stream's id checks: exact counts across its merges, 8 bytes a key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalsi.datasets import load_dataset
from evalsi.datasets._seen import SeenKeys
from evalsi.errors import BadInputError


def test_counts_survive_the_merge_into_the_sorted_array() -> None:
    seen = SeenKeys()
    keys = [f"id-{i}" for i in range(150_000)]  # more than two merges of the recent set
    assert all(seen.count(key) == 0 for key in keys)
    assert len(seen) == 150_000 and len(seen._older) >= 131_072  # the older keys are in the 8-byte array
    assert seen._older.itemsize == 8 and list(seen._older) == sorted(seen._older)
    assert [seen.count("id-3"), seen.count("id-3"), seen.count("id-149999"), seen.count(("id-3", 1))] == [1, 2, 1, 0]
    assert seen.count("new") == 0 and seen.count("new") == 1


def test_a_big_stream_numbers_trials_and_refuses_a_repeated_pair(tmp_path: Path) -> None:
    rows = [{"id": f"s{i % 70_000}", "output": "a"} for i in range(140_000)]  # every id twice, 70,000 apart
    data = tmp_path / "trials.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    records = load_dataset(data).records
    assert [(r.id, r.provenance.trial) for r in (records[0], records[70_000], records[69_999])] == [
        ("s0", 0), ("s0", 1), ("s69999", 0)
    ]
    with data.open("a") as f:
        f.write(json.dumps({"id": "s5", "trial": 1, "output": "a"}) + "\n")
    with pytest.raises(BadInputError, match=r"trials.jsonl:140001: id 's5' with trial 1 appears twice"):
        load_dataset(data)
