"""Rows to records: one row's fields, by the conventions and the mapping, as a Record's deterministic wire bytes.

The builder assigns ids and trials, checks that no (id, trial) repeats and hashes every record into the dataset
version as it goes, keeping no record. A record is encoded once (:mod:`evalsi.datasets.wire`): those bytes are
what the version hashes, what a stored shard holds and what ``Record.FromString`` turns into the message.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Any

from google.protobuf import json_format

from evalsi.datasets._seen import SeenKeys
from evalsi.datasets._text_rows import text_rows
from evalsi.datasets.formats import _kind
from evalsi.datasets.held import RecordColumns
from evalsi.datasets.mapping import RECORD_TARGETS, USAGE_FIELDS, FieldMapping
from evalsi.datasets.wire import (
    CONTEXT,
    ID,
    INPUT,
    METADATA,
    OUTPUT,
    PROVENANCE,
    REFERENCE,
    TRAJECTORY,
    USAGE,
    content_bytes,
    dataset_field,
    field,
    map_entries,
    message_bytes,
    provenance_fields,
    provenance_parts,
    text_content_field,
    value_bytes,
    varint,
)
from evalsi.datasets.wire import (
    LENGTHS as _LENGTHS,
)
from evalsi.errors import BadInputError
from evalsi.records import canonical_json, clear_empty_contents
from evalsi.v1alpha1.record_pb2 import Record, Trajectory, Usage

CONTENT_HELP = "a string, an object with exactly one of text/messages/json/row, or any JSON value"
_CONTENT_SLOTS = {"input": (0, INPUT), "output": (1, OUTPUT), "reference": (2, REFERENCE)}  # in field-number order
_TABLED_IDS = 128  # ids shorter than this many bytes take their provenance heads from a table made once
_BIG_ENDIAN_8 = struct.Struct(">Q").pack  # a record's length as the version hashes it

_TEXT = b"\x0a"  # Content.text
_OTHER_FIELDS = frozenset(RECORD_TARGETS) - frozenset(_CONTENT_SLOTS)
_USAGE_SET = frozenset(USAGE_FIELDS)
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens")
_MAX_TRIAL = 2**31 - 1
_CONVERSION_ERRORS = (TypeError, ValueError, OverflowError)


class RowError(Exception):
    """A problem with one row; the caller adds where the row is."""


class RecordBuilder:
    """Turns rows into records, assigning ids and trials and hashing as it goes; keeps no record.

    ``check_id`` says what is wrong with a record id (None: nothing), refusing the row.
    """

    def __init__(self, source: str, mapping: FieldMapping, check_id: Callable[[str], str | None] | None = None) -> (
            None):
        self.source = source
        self._dataset = dataset_field(source)
        self.mapping = mapping
        self._split = mapping.split if mapping else None  # decided once, not per row
        self.check_id = check_id
        self.count = 0
        self.digest = hashlib.sha256()
        # Compact counters, not sets of ids: a stream keeps no per-record objects. Rows with an explicit id and no
        # trial are numbered by `occurrences`, so the pairs they take are implied (trials 0..n-1 of that id); only
        # pairs chosen otherwise (a row's own trial, a generated id) go into `pairs`. One lookup a usual row.
        self.occurrences = SeenKeys()  # explicit ids: rows so far without a trial
        self.generated = SeenKeys()  # generated ids: rows so far with the same content
        self.pairs = SeenKeys()  # (id, trial) taken by rows with a trial or a generated id
        self._claimed = False  # whether `pairs` holds any
        self.missing: set[int] = set(range(len(mapping.items)))
        self.first_fields: list[str] | None = None
        # Set by a caller that holds the records it reads (datasets.held): text rows' columns are kept beside them.
        self.columns: RecordColumns | None = None
        self._heads: tuple[list[bytes], list[bytes]] | None = None  # add_text_rows' provenance heads by id size

    def keep_columns(self) -> RecordColumns:
        """Keep the columns of the records made from here on (``RecordColumns.whole`` while all are text rows)."""
        self.columns = RecordColumns(whole=self.count == 0)
        return self.columns

    def add_row(self, row: Any) -> bytes:
        """The row's record as ``Record.SerializeToString(deterministic=True)`` bytes, ``provenance.dataset`` set."""
        if type(row) is not dict and not isinstance(row, Mapping):
            raise RowError(f"expected an object (one record), got {_kind(row)}")
        if self.columns is not None:
            self.columns.whole = False  # a record of another shape: the columns no longer describe every record
        if self.first_fields is None:
            self.first_fields = list(row)
        fields: Mapping[str, Any]
        extras: dict[str, Any] | None
        if self._split is not None:
            fields, mapped_metadata, mapped_usage, extras = self._split(row, self.missing)
        else:  # the default conventions, in the same pass as the conversion
            fields, mapped_metadata, mapped_usage, extras = row, None, None, None
        contents = [b"", b"", b""]
        record_id: str | None = None
        trial: int | None = None
        context = trajectory = b""
        metadata: dict[str, Any] | None = None
        usage: dict[str, Any] | None = None
        for name, value in fields.items():
            if value is None:
                continue
            slot = _CONTENT_SLOTS.get(name)
            if slot is not None:
                index, tag = slot
                if type(value) is str:
                    try:
                        contents[index] = text_content_field(tag, value)
                    except UnicodeEncodeError as exc:
                        raise RowError(f"field {name!r}: {exc}; accepted: {CONTENT_HELP}") from None
                else:
                    contents[index] = field(tag, _content(name, value))
            elif name not in _OTHER_FIELDS:
                if extras is None:
                    extras = {}
                extras[name] = value
            elif name == "id":
                record_id = value if type(value) is str and value else _id(value)
            elif name == "context":
                context = _context(value)
            elif name == "metadata":
                metadata = dict(_object("metadata", value))
            elif name == "usage":
                usage = dict(_object("usage", value))
            elif name == "trajectory":
                trajectory = field(TRAJECTORY, message_bytes(_trajectory(value)))
            else:  # trial
                trial = _trial(value)
        if mapped_metadata:
            metadata = {**metadata, **mapped_metadata} if metadata else mapped_metadata
        if extras:
            if metadata:
                for key, value in extras.items():
                    if key in metadata and metadata[key] != value:
                        raise RowError(
                            f"field {key!r} differs from metadata[{key!r}]; rename one, or map it with "
                            f"--map metadata.<key>={key}"
                        )
                metadata = {**extras, **metadata}
            else:
                metadata = extras
        if mapped_usage:
            usage = {**usage, **mapped_usage} if usage else mapped_usage
        if record_id is None:
            record_id = self._generated_id(_row_digest(row))
            trial = self._claim(record_id, trial or 0)
        elif trial is None:  # the usual row: the next trial of its id (inlined: this runs once a row)
            trial = self.occurrences.count(record_id)
            if self._claimed and self.pairs.seen((record_id, trial)):
                raise self._repeated(record_id, trial)
        else:
            trial = self._claim(record_id, trial)
        if self.check_id is not None:
            problem = self.check_id(record_id)
            if problem:
                raise RowError(f"its id {problem}")
        try:
            id_bytes = record_id.encode()
        except UnicodeEncodeError as exc:
            raise RowError(f"field 'id': {exc}; send UTF-8 text") from None
        body = ID + _LENGTHS[len(id_bytes)] + id_bytes if len(id_bytes) < 128 else field(ID, id_bytes)
        body += contents[0] + contents[1] + contents[2] + context + trajectory
        if usage:
            body += field(USAGE, message_bytes(_usage(usage)))
        if metadata:
            body += _metadata(metadata)
        return self._append(body, id_bytes, trial)

    def add_text_rows(self, rows: Sequence[Any], start: int, out: list[bytes]) -> int:
        """``add_row`` of each of ``rows`` from ``start`` on, appended to ``out``, while they have the usual shape:
        a dict of a non-empty string ``id`` and string ``input``/``output``/``reference`` texts (any of them
        absent), with no mapping, id check or explicit trial so far. The index of the first row it did not take;
        the caller gives that one to ``add_row`` (which refuses it, with the reason, if it is bad).

        The same bytes, ids, trials and version as ``add_row``, a column at a time (``datasets._text_rows``): each
        step one C-level pass over the rows, the version's hash fed once for them all."""
        if self._split is not None or self.check_id is not None or self._claimed:
            return start
        if self.first_fields is None and start < len(rows) and type(rows[start]) is dict:
            self.first_fields = list(rows[start])
        batch = text_rows(rows, start)
        if not batch:
            return start
        trials = self.occurrences.count_all(batch.ids)
        hashed_heads, held_heads, tails = self._around_ids(batch.id_bytes, trials)
        hashed = list(map(b"".join, zip(batch.bodies, hashed_heads, batch.id_bytes, tails, strict=True)))
        # The version hashes each record's bytes length-prefixed, in order: fed as one string, the same digest.
        prefixed = zip(map(_BIG_ENDIAN_8, map(len, hashed)), hashed, strict=True)
        self.digest.update(b"".join(chain.from_iterable(prefixed)))
        held = zip(batch.bodies, held_heads, batch.id_bytes, tails, strict=True)
        out.extend(map(b"".join, held) if self._dataset else hashed)
        columns = self.columns
        if columns is not None and columns.whole:
            columns.extend(batch.ids, trials, batch.texts)
        self.count += len(batch)
        return start + len(batch)

    def _around_ids(self, id_bytes: list[bytes], trials: list[int]) -> tuple[
            list[bytes], list[bytes], list[bytes]]:
        """What comes before each record's id from its ``provenance`` field on, as the version hashes it (no
        dataset) and as the record is held (with it), and what comes after the id (its trial)."""
        sizes = list(map(len, id_bytes))
        if not any(trials) and max(sizes, default=0) < _TABLED_IDS:
            if self._heads is None:
                pairs = [self._around_id(size, 0) for size in range(_TABLED_IDS)]
                self._heads = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
            hashed, held = self._heads
            return list(map(hashed.__getitem__, sizes)), list(map(held.__getitem__, sizes)), [b""] * len(sizes)
        parts = [self._around_id(size, trial) for size, trial in zip(sizes, trials, strict=True)]
        return [part[0] for part in parts], [part[1] for part in parts], [part[2] for part in parts]

    def _around_id(self, size: int, trial: int) -> tuple[bytes, bytes, bytes]:
        head, tail = provenance_parts(size, trial)
        inside = len(head) + size + len(tail)
        dataset = self._dataset
        return (PROVENANCE + varint(inside) + head, PROVENANCE + varint(len(dataset) + inside) + dataset + head,
                tail)

    def add_record(self, given: Record) -> Record:
        """A copy of a Record with its missing id, ``provenance.sample_id``, ``trial`` and ``dataset`` filled in."""
        if self.columns is not None:
            self.columns.whole = False
        record = Record()
        record.CopyFrom(given)
        clear_empty_contents(record)
        provenance = record.provenance
        named = provenance.dataset  # a record that names its dataset keeps that name
        provenance.dataset = ""
        if record.id:
            trial = provenance.trial
            trial = self._claim(record.id, trial) if trial else self._number(record.id)
        else:
            as_dict = json_format.MessageToDict(record, preserving_proto_field_name=True)
            record.id = self._generated_id(hashlib.sha256(canonical_json(as_dict).encode()).hexdigest())
            trial = self._claim(record.id, provenance.trial)
        provenance.trial = trial
        if not provenance.sample_id:
            provenance.sample_id = record.id
        data = record.SerializeToString(deterministic=True)
        self._hash(data)
        provenance.dataset = named or self.source
        return record

    def finish(self) -> str:
        """The version of the records added; refuses a mapping item that matched no row."""
        if self.count and self.missing:
            items = self.mapping.items
            named = ", ".join(f"--map {str(items[index])!r}" for index in sorted(self.missing))
            sources = ", ".join(repr(items[index].source) for index in sorted(self.missing))
            fields = ", ".join(self.first_fields or []) or "(none)"
            raise BadInputError(
                f"{self.source}: {named}: no row has {sources}; the first row's fields are: {fields}"
            )
        return self.digest.hexdigest()

    def _append(self, body: bytes, sample_id: bytes, trial: int) -> bytes:
        provenance = provenance_fields(sample_id, trial)
        hashed = body + field(PROVENANCE, provenance)
        self.digest.update(len(hashed).to_bytes(8, "big") + hashed)
        self.count += 1
        return body + field(PROVENANCE, self._dataset + provenance) if self._dataset else hashed

    def _hash(self, data: bytes) -> None:
        """One record in the dataset version: its bytes (``provenance.dataset`` unset), length-prefixed."""
        self.digest.update(len(data).to_bytes(8, "big") + data)
        self.count += 1

    def _generated_id(self, hexdigest: str) -> str:
        base = "r-" + hexdigest[:16]
        repeat = self.generated.count(base)
        return base if repeat == 0 else f"{base}-{repeat}"

    def _number(self, record_id: str) -> int:
        """The next trial of an explicit id given without one; refused if a row took that trial explicitly."""
        trial = self.occurrences.count(record_id)
        if self._claimed and self.pairs.seen((record_id, trial)):
            raise self._repeated(record_id, trial)
        return trial

    def _claim(self, record_id: str, trial: int) -> int:
        """Take (id, trial) chosen by the row; refused if a row took it before, explicitly or by numbering."""
        self._claimed = True
        if self.pairs.count((record_id, trial)) or (trial < self.occurrences.seen(record_id)):
            raise self._repeated(record_id, trial)
        return trial

    @staticmethod
    def _repeated(record_id: str, trial: int) -> RowError:
        return RowError(
            f"id {record_id!r} with trial {trial} appears twice; rows sharing an id are trials of one "
            "sample: give each a distinct 'trial', or none to number them in order"
        )


def _not_text() -> bytes:
    """A text field's value that is not a string: ``add_text_rows`` leaves the row to ``add_row``."""
    raise TypeError


# --- field conversion -------------------------------------------------------------------------------

# canonical_json, with the encoder built once rather than per call.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def _row_digest(row: Mapping[str, Any]) -> str:
    if None in row.values():
        row = {key: value for key, value in row.items() if value is not None}
    return hashlib.sha256(_canonical(row).encode()).hexdigest()


def _content(name: str, value: Any) -> bytes:
    try:
        if type(value) is str:
            return field(_TEXT, value.encode())
        return content_bytes(value)
    except _CONVERSION_ERRORS as exc:
        raise RowError(f"field {name!r}: {exc}; accepted: {CONTENT_HELP}") from None


def _context(value: Any) -> bytes:
    if isinstance(value, list | tuple):
        return b"".join([field(CONTEXT, _content(f"context.{index}", item)) for index, item in enumerate(value)])
    return field(CONTEXT, _content("context", value))


def _metadata(metadata: Mapping[str, Any]) -> bytes:
    try:
        return map_entries(METADATA, metadata)
    except _CONVERSION_ERRORS:
        for key, value in metadata.items():  # find the key or value at fault, to name it
            try:
                key.encode()
                value_bytes(value)
            except _CONVERSION_ERRORS as exc:
                raise RowError(f"field 'metadata.{key}': {exc}; accepted: JSON values") from None
        raise


def _id(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    raise RowError(f"field 'id' must be a string or a number, got {_kind(value)}")


def _trial(value: Any) -> int:
    trial: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        trial = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and value.strip().isdigit()
    ):
        trial = int(value)
    if trial is None or not 0 <= trial <= _MAX_TRIAL:
        raise RowError(f"field 'trial' must be a non-negative integer, got {value!r}")
    return trial


def _object(name: str, value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):  # e.g. a CSV cell holding JSON
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        raise RowError(f"field {name!r} must be an object (or a string holding a JSON object), got a string")
    if isinstance(value, Mapping):
        return value
    raise RowError(f"field {name!r} must be an object, got {_kind(value)}")


def _trajectory(value: Any) -> Trajectory:
    obj = _object("trajectory", value)
    try:
        return json_format.ParseDict(dict(obj), Trajectory())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise RowError(
            f"field 'trajectory': {exc}; accepted: the protobuf JSON form of evalsi.v1alpha1.Trajectory "
            "(steps, session_id, trace_id)"
        ) from None


def _usage(values: Mapping[str, Any]) -> Usage:
    unknown = [key for key in values if key not in _USAGE_SET]
    if unknown:
        raise RowError(f"field 'usage': unknown key {unknown[0]!r}; accepted: {', '.join(USAGE_FIELDS)}")
    if values.get("latency_s") is not None and values.get("latency_ms") is not None:
        raise RowError("field 'usage': give latency_s or latency_ms, not both")
    if values.get("ttft_s") is not None and values.get("ttft_ms") is not None:
        raise RowError("field 'usage': give ttft_s or ttft_ms, not both")
    usage = Usage()
    for key in _TOKEN_FIELDS:
        value = values.get(key)
        if value is not None:
            setattr(usage, key, _count(key, value))
    if values.get("cost_usd") is not None:
        usage.cost_usd = _number("cost_usd", values["cost_usd"])
    for key, target, scale in (
        ("latency_s", usage.latency, 1.0),
        ("latency_ms", usage.latency, 1e-3),
        ("ttft_s", usage.time_to_first_token, 1.0),
        ("ttft_ms", usage.time_to_first_token, 1e-3),
    ):
        value = values.get(key)
        if value is not None:
            target.FromNanoseconds(round(_number(key, value) * scale * 1e9))
    return usage


def _number(key: str, value: Any) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not 0 <= number < float("inf"):
        raise RowError(f"field 'usage.{key}' must be a non-negative number, got {value!r}")
    return number


def _count(key: str, value: Any) -> int:
    number = _number(key, value)
    if not number.is_integer() or number >= 2**63:
        raise RowError(f"field 'usage.{key}' must be a non-negative integer, got {value!r}")
    return int(value) if isinstance(value, int) else int(number)
