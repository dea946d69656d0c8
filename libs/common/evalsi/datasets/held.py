"""Records held in memory as their wire bytes, parsed only where a record is read, and the columns of rows of the
usual text shape (ids, trials, input/output/reference texts) kept beside them as the rows gave them.

An embedded run encodes each row once into a record's bytes (``datasets.rows``: what the version hashes and a shard
stores). Parsing every one into a ``Record`` message, and then reading ids, trials and texts back out of those
messages through the protobuf runtime (about a microsecond a field a record), cost more than evaluating them with a
deterministic evaluator. So the bytes are held as they are and the runner reads the columns the rows were made of
(``evaluators.runner``: keys, required fields, a batch form's texts); a record becomes a message only where an
evaluator's function is called with it, once, and is kept. Every record read is exactly ``Record.FromString`` of its
bytes, so what an evaluator sees is what it saw before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from evalsi.bus.v1alpha1.bus_pb2 import TaskRecords
from evalsi.datasets.wire import TASK_RECORD, entries
from evalsi.v1alpha1.record_pb2 import Record

TEXT_FIELDS = ("input", "output", "reference")
_PARSE_BATCH = 4096  # records parsed at once when all of them are read (one parse for many costs less than one each)


@dataclass
class RecordColumns:
    """The columns of records made from text rows: each record's id and trial, and its input, output and reference
    texts (``text``, in ``TEXT_FIELDS`` order), None where the row had none (the record has no such field). Lists
    by column, each extended a batch at a time: a tuple a record cost a fifth of the intake. ``whole`` is False
    once a record was made from anything else: the columns then do not describe the records, and nobody reads
    them."""

    ids: list[str] = field(default_factory=list)
    trials: list[int] = field(default_factory=list)
    text: tuple[list[str | None], list[str | None], list[str | None]] = field(default_factory=lambda: ([], [], []))
    whole: bool = True

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def keys(self) -> list[tuple[str, int]]:
        """Each record's (id, trial)."""
        return list(zip(self.ids, self.trials, strict=True))

    def extend(self, ids: list[str], trials: list[int], text: Sequence[list[str | None]]) -> None:
        self.ids += ids
        self.trials += trials
        for column, more in zip(self.text, text, strict=True):
            column += more

    def sliced(self, start: int, stop: int) -> RecordColumns:
        given, output, reference = (column[start:stop] for column in self.text)
        return RecordColumns(self.ids[start:stop], self.trials[start:stop], (given, output, reference), self.whole)

    def values(self, name: str) -> list[str | None]:
        """The column of text field ``name`` (one of ``TEXT_FIELDS``): each record's text, None where absent. The
        column itself: read it, do not change it."""
        return self.text[TEXT_FIELDS.index(name)]

    def texts(self, name: str) -> list[str]:
        """``record.<name>.text`` of each record: its text, "" where the field is absent."""
        values = self.values(name)
        return [text or "" for text in values] if None in values else values[:]  # type: ignore[return-value]


class HeldRecords(Sequence[Record]):
    """Records as their ``Record.SerializeToString(deterministic=True)`` bytes, each parsed when first read and then
    kept; with ``columns`` when every one was made from a text row. A slice is another ``HeldRecords`` over the same
    bytes (a run's shard), whose records are parsed on their own."""

    __slots__ = ("_data", "_parsed", "columns")

    def __init__(self, data: list[bytes], columns: RecordColumns | None = None) -> None:
        if columns is not None and (not columns.whole or len(columns) != len(data)):
            columns = None
        self._data = data
        self._parsed: list[Record | None] = [None] * len(data)
        self.columns = columns

    def __len__(self) -> int:
        return len(self._data)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> HeldRecords: ...

    def __getitem__(self, index: int | slice) -> Record | HeldRecords:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self._data))
            if step != 1:
                return HeldRecords([self._data[i] for i in range(start, stop, step)])
            columns = self.columns.sliced(start, stop) if self.columns is not None else None
            held = HeldRecords(self._data[start:stop], columns)
            held._parsed = self._parsed[start:stop]  # records read already stay read
            return held
        record = self._parsed[index]
        if record is None:
            record = self._parsed[index] = Record.FromString(self._data[index])
        return record

    def __iter__(self) -> Iterator[Record]:
        self.parse_all()
        return iter(self._parsed)  # type: ignore[arg-type]

    def parse_all(self) -> None:
        """Every record as a message, those not read yet parsed a batch at a time."""
        parsed, data = self._parsed, self._data
        start = 0
        while start < len(parsed):
            if parsed[start] is not None:
                start += 1
                continue
            stop = start
            while stop < len(parsed) and stop - start < _PARSE_BATCH and parsed[stop] is None:
                stop += 1
            batch = TaskRecords.FromString(entries(TASK_RECORD, data[start:stop])).records
            parsed[start:stop] = batch
            start = stop

    def data(self) -> list[bytes]:
        """The records' bytes, in order (a shard's ``TaskRecords`` is their entries concatenated)."""
        return self._data
