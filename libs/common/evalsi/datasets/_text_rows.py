"""Rows of the usual text shape encoded a column at a time: each step (a type test, a field read, an encoding, a
length, a head) is one C-level ``map`` over the batch instead of a statement a row, which is what made the intake
most of an embedded ``evaluate()``.

The usual shape: a dict of a non-empty string ``id`` and string ``input``/``output``/``reference`` texts, any of them
absent or None, and no other key. The record bytes are those ``RecordBuilder.add_row`` writes for such a row
(``tests/datasets/test_text_rows.py`` holds them to it on mixed rows).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from evalsi.datasets.wire import ID, INPUT, LENGTHS, OUTPUT, REFERENCE, TEXT_HEADS, varint

TEXT_ROW_KEYS = frozenset({"id", "input", "output", "reference"})
_TEXT_TAGS = (INPUT, OUTPUT, REFERENCE)  # in field-number order, as a record's bytes have them
_NONE = type(None)
_TEXT_TYPES = frozenset({str, _NONE})
_CONTENT_TEXT = b"\x0a"  # Content.text
_SHORT = 126  # a text under this many bytes has a ready-made head (TEXT_HEADS)
_ID_HEADS = [ID + LENGTHS[size] for size in range(128)]
_HEADS = {tag: [tag + head for head in TEXT_HEADS] for tag in _TEXT_TAGS}


@dataclass
class TextRows:
    """The columns of a batch's leading text rows: each row's id, its UTF-8 bytes, its three texts (None where
    absent) and its record's bytes up to (not including) the provenance."""

    ids: list[str]
    id_bytes: list[bytes]
    texts: tuple[list[str | None], list[str | None], list[str | None]]
    bodies: list[bytes]

    def __len__(self) -> int:
        return len(self.ids)


def text_rows(rows: Sequence[Any], start: int = 0) -> TextRows:
    """The leading rows of ``rows[start:]`` that have the usual text shape (up to the first that has not, or that
    cannot be encoded: ``add_row`` says what is wrong with that one), as columns."""
    # Each test first over the whole batch at once (the usual batch passes them all), then, where one fails, row
    # by row to find the first row that fails it.
    if start < len(rows) and not _usual(rows[start]):
        # Led by a row of another shape (JSON or row contents, metadata): taken alone by add_row, and the loader
        # calls again from the next row, so scanning (or copying) the rest here each time would be quadratic.
        return TextRows([], [], ([], [], []), [])
    if start:
        rows = rows[start:]
    count = len(rows)
    if set(map(type, rows)) != {dict}:
        count = _first_false(map(operator.is_, map(type, rows), repeat(dict)), count)
        rows = rows[:count]
    if not TEXT_ROW_KEYS.issuperset(set().union(*rows)):
        count = _first_false(map(TEXT_ROW_KEYS.issuperset, rows), count)
    ids: list[Any] = [row.get("id") for row in rows[:count]]  # a comprehension: map(dict.get, ...) costs twice it
    if set(map(type, ids)) != {str} or not all(ids):
        count = min(count, _first_false(map(operator.is_, map(type, ids), repeat(str)), count),
                    _first_false(map(bool, ids), count))
    texts: list[list[Any]] = []
    absent: list[bool] = []  # whether a column may hold None (a row without that text), passed on, not looked for again
    for name in ("input", "output", "reference"):
        column = [row.get(name) for row in rows[:count]]
        kinds = set(map(type, column))
        if not _TEXT_TYPES.issuperset(kinds):
            count = _first_false(map(_TEXT_TYPES.__contains__, map(type, column)), count)
        texts.append(column)
        absent.append(_NONE in kinds)
    while True:
        del ids[count:]
        for column in texts:
            del column[count:]
        try:
            encoded = [list(map(str.encode, ids))] + [
                _encoded(column, maybe) for column, maybe in zip(texts, absent, strict=True)]
        except UnicodeEncodeError:  # a lone surrogate: the rows up to the first that has one
            count = min(_first_unencodable(column) for column in [ids, *texts])
            continue
        break
    id_bytes = encoded[0]
    sizes = list(map(len, id_bytes))
    heads = [list(map(_ID_HEADS.__getitem__, sizes)) if max(sizes, default=0) < 128
             else [_ID_HEADS[size] if size < 128 else ID + varint(size) for size in sizes]]
    pieces: list[list[bytes]] = [heads[0], id_bytes]
    for tag, column, data, maybe in zip(_TEXT_TAGS, texts, encoded[1:], absent, strict=True):
        pieces.append(_heads(tag, column, data, maybe))
        pieces.append(data)
    return TextRows(ids, id_bytes, (texts[0], texts[1], texts[2]), list(map(b"".join, zip(*pieces, strict=True))))


def _usual(row: Any) -> bool:
    """Whether one row has the usual text shape."""
    return (type(row) is dict and TEXT_ROW_KEYS.issuperset(row) and type(row.get("id")) is str and bool(row["id"])
            and all(type(row.get(name)) in _TEXT_TYPES for name in ("input", "output", "reference")))


def _first_false(flags: Any, default: int) -> int:
    """The index of the first false flag among the first ``default``, or ``default``."""
    try:
        return list(flags).index(False, 0, default)
    except ValueError:
        return default


def _encoded(column: list[str | None], absent: bool) -> list[bytes]:
    """Each text's UTF-8 bytes, b"" where absent (``absent``: where the column may hold None)."""
    if absent:
        return [b"" if text is None else text.encode() for text in column]
    return list(map(str.encode, column))  # type: ignore[arg-type]


def _first_unencodable(column: list[Any]) -> int:
    for index, text in enumerate(column):
        if text is not None:
            try:
                text.encode()
            except UnicodeEncodeError:
                return index
    return len(column)


def _heads(tag: bytes, column: list[str | None], data: list[bytes], absent: bool) -> list[bytes]:
    """What comes before each text's bytes in a record: the content field's tag and length and ``Content.text``'s
    (b"" where the row has no such text: the record has no such field)."""
    short = _HEADS[tag]
    sizes = list(map(len, data))
    if not absent:
        try:
            return list(map(short.__getitem__, sizes))
        except IndexError:  # a text of 126 bytes or more
            pass
    return [b"" if text is None else short[size] if size < _SHORT else _long_head(tag, size)
            for text, size in zip(column, sizes, strict=True)]


def _long_head(tag: bytes, size: int) -> bytes:
    inner = _CONTENT_TEXT + varint(size)
    return tag + varint(len(inner) + size) + inner
