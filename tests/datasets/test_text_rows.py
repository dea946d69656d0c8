"""Rows of the usual shape encoded in one loop (``RecordBuilder.add_text_rows``, used by every record stream) give
the bytes, ids, trials, version and errors ``add_row`` gives row by row, whatever the rows mix."""

from __future__ import annotations

import random
from typing import Any

import pytest

from evalsi.datasets import stream_rows
from evalsi.datasets.loader import parse_mapping
from evalsi.datasets.rows import RecordBuilder, RowError
from evalsi.errors import BadInputError
from evalsi.v1alpha1.record_pb2 import Record

_TEXTS = ["Paris", "", "é" * 70, "日本語", "x" * 125, "y" * 126, "z" * 300, "a\nb", "\u00a0"]


def _row(rng: random.Random, index: int) -> Any:
    row: dict[str, Any] = {"id": rng.choice([f"r{index}", f"r{index % 7}", "é" * 50, "i" * 130])}
    for name in ("input", "output", "reference"):
        pick = rng.random()
        if pick < 0.8:
            row[name] = rng.choice(_TEXTS)
        elif pick < 0.9:
            row[name] = None
    shape = rng.random()
    if shape < 0.03:
        row["metadata"] = {"topic": "geo"}  # another shape: add_row's
    elif shape < 0.05:
        row["output"] = {"json": [1, 2]}
    elif shape < 0.06:
        row["id"] = 17  # a number id: add_row's
    return row


def _row_by_row(rows: list[Any]) -> tuple[list[bytes], str]:
    builder = RecordBuilder("<memory>", parse_mapping(None))
    encoded = [builder.add_row(row) for row in rows]
    return encoded, builder.finish()


@pytest.mark.parametrize("seed", range(4))
def test_a_stream_of_mixed_rows_encodes_as_row_by_row(seed: int) -> None:
    rng = random.Random(seed)
    rows = [_row(rng, index) for index in range(3000)]
    stream = stream_rows(rows)
    encoded = list(stream.encoded())
    want, version = _row_by_row(rows)
    assert encoded == want
    assert stream.version == version and stream.count == len(rows)


def test_the_loop_takes_the_usual_rows_and_stops_at_the_first_other() -> None:
    builder = RecordBuilder("named", parse_mapping(None))
    rows = [{"id": "a", "output": "x"}, {"id": "b", "input": "q", "output": "y", "reference": "y"},
            {"id": "c", "trial": 2}, {"id": "d"}]
    out: list[bytes] = []
    assert builder.add_text_rows(rows, 0, out) == 2
    assert builder.add_text_rows(rows, 3, out) == 4
    assert len(out) == 3 and builder.count == 3
    assert builder.first_fields == ["id", "output"]
    # After a row that chose its own trial, every row goes through add_row (it checks the pairs taken).
    builder.add_row(rows[2])
    assert builder.add_text_rows([{"id": "e"}], 0, out) == 0


def test_an_explicit_trial_after_usual_rows_is_checked_against_their_numbering() -> None:
    rows = [{"id": "a", "output": "x"}, {"id": "a", "output": "y"}, {"id": "a", "trial": 1, "output": "z"}]
    with pytest.raises(BadInputError, match="record 2: id 'a' with trial 1 appears twice"):
        list(stream_rows(rows).encoded())


def test_a_bad_row_is_refused_at_its_own_position_after_the_rows_before_it() -> None:
    rows: list[Any] = [{"id": f"r{i}", "output": "ok"} for i in range(1500)]
    rows[1200] = {"id": "bad", "output": "\ud800"}  # a lone surrogate cannot be encoded
    stream = stream_rows(rows)
    seen = []
    with pytest.raises(BadInputError, match=r"record 1200: field 'output'"):
        for data in stream.encoded():
            seen.append(data)
    assert len(seen) == 1200
    with pytest.raises(RowError):
        RecordBuilder("<memory>", parse_mapping(None)).add_row(rows[1200])


def test_a_limit_stops_within_a_batch() -> None:
    rows = [{"id": f"r{i}", "output": "ok"} for i in range(3000)]
    from evalsi.datasets.loader import RecordStream

    source = stream_rows(rows)
    limited = RecordStream("<memory>", "memory", parse_mapping(None), 1500, source._open_rows)
    assert len(list(limited.encoded())) == 1500 and limited.count == 1500
    assert limited.version == _row_by_row(rows[:1500])[1]


@pytest.mark.parametrize("bad", [{"id": "bad", "trial": -1}, Record(id="bad")])
def test_runs_of_rows_of_another_shape_encode_as_row_by_row_and_a_bad_one_comes_after_them(bad: Any) -> None:
    # Tabular rows mostly (the loader takes a run of them by add_row without asking add_text_rows again), text rows
    # between; a bad row, refused by add_row or before it (a Record in a stream of rows), ends the rows before it.
    rng = random.Random(5)
    rows: list[Any] = [{"id": f"t{index}", "output": {"row": {"prediction": "a", "probabilities": {"a": 0.25}}},
                        "metadata": {"k": index}} if rng.random() < 0.8 else _row(rng, index) for index in range(3000)]
    stream = stream_rows(rows)
    assert list(stream.encoded()) == _row_by_row(rows)[0]
    rows[1700] = bad
    seen = []
    with pytest.raises(BadInputError, match="record 1700: "):
        for data in stream_rows(rows).encoded():
            seen.append(data)
    assert seen == _row_by_row(rows[:1700])[0]
