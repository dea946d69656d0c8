"""The compact counter behind a dataset stream's id checks: exact counts across its merges, 8 bytes a key."""

from __future__ import annotations

import json
import random
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


@pytest.mark.parametrize("seed", range(3))
def test_counting_a_batch_at_a_time_counts_as_one_key_at_a_time(seed: int) -> None:
    # Batches of new keys (the fast path), batches repeating keys within themselves, keys seen before the last
    # merge (in the sorted array) and keys seen since (in the recent set): the same counts as `count`.
    rng = random.Random(seed)
    batched, single = SeenKeys(), SeenKeys()
    fresh = 0
    for _ in range(160):
        size = rng.choice([1, 7, 1024, 2048])
        keys: list[object] = []
        for _ in range(size):
            pick = rng.random()
            if pick < 0.97 or fresh == 0:
                keys.append(f"k{fresh}")
                fresh += 1
            else:  # an old key (often one merged into the array), or one repeated within the batch
                keys.append(f"k{rng.randrange(fresh)}" if pick < 0.99 or not keys else keys[-1])
        want = [single.count(key) for key in keys]
        assert batched.count_all(keys) == want
    assert fresh > 65_536 and len(batched._older) > 0  # a merge happened between batches
    assert batched.count_all([]) == []
