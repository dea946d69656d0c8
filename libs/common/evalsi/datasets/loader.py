"""Loading datasets: files, the Hugging Face Hub or in-memory rows, as :class:`Dataset` of Records.

Row conventions (DESIGN.md): ``id``, ``input``, ``output``, ``reference``, ``context`` and ``metadata``
become those record fields; ``usage`` (an object of :data:`~evalsi.datasets.mapping.USAGE_FIELDS`),
``trajectory`` (the protobuf JSON form of ``Trajectory``) and ``trial`` (an int) too. Every other
top-level key lands in ``metadata`` under its own name, so nothing in a row is silently dropped.

Ids: an ``id`` becomes a string; a row without one gets ``r-`` plus 16 hex digits of the sha256 of the
row's canonical JSON (``-<n>`` added for the n-th repeat of the same content), so reruns pair up. Rows
sharing an explicit id are trials of one sample: ``provenance.trial`` is the row's ``trial`` or else
the occurrence index. Every record gets ``provenance.sample_id`` (its id) and ``provenance.dataset``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2

from evalsi.datasets._seen import SeenKeys
from evalsi.datasets.formats import (
    HF_PREFIX,
    _kind,
    check_file,
    detect_format,
    location,
    plain_row,
    read_hf_rows,
    read_rows,
)
from evalsi.datasets.mapping import RECORD_TARGETS, USAGE_FIELDS, FieldMapping, parse_mapping
from evalsi.errors import BadInputError
from evalsi.records import canonical_json, clear_empty_contents, to_content, to_value
from evalsi.v1alpha1.record_pb2 import Content, Record, Trajectory, Usage

MappingSpec = Mapping[str, str] | Sequence[str] | FieldMapping | None

CONTENT_HELP = "a string, an object with exactly one of text/messages/json, or any JSON value"
_CONTENT_FIELDS = frozenset({"input", "output", "reference"})
_OTHER_FIELDS = frozenset(RECORD_TARGETS) - _CONTENT_FIELDS
_USAGE_SET = frozenset(USAGE_FIELDS)
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens")
_MAX_TRIAL = 2**31 - 1
_Value = struct_pb2.Value
_NULL = struct_pb2.NULL_VALUE


@dataclass(frozen=True)
class Dataset:
    """Records loaded from one source, with a content version.

    ``version`` is the sha256 (hex) of the records in order; see :func:`dataset_version`.
    """

    records: list[Record]
    version: str
    source: str
    format: str

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)


def load_dataset(
    source: str | Path,
    *,
    mapping: MappingSpec = None,
    limit: int | None = None,
    format: str | None = None,
    split: str | None = None,
) -> Dataset:
    """Load a JSONL, JSON, CSV or Parquet file, or ``hf://owner/name[/config]``, as a :class:`Dataset`.

    ``mapping`` maps record fields to row fields (``{"input": "question"}`` or ``["input=question"]``);
    ``limit`` stops reading after that many records; ``format`` overrides the file extension;
    ``split`` picks the Hub split (default ``train``). Raises ``BadInputError`` for anything wrong
    with the input, its message starting with the file and line (or record index) at fault.
    Every record is held in memory: :func:`stream_dataset` reads the same source one record at a time.
    """
    stream = stream_dataset(source, mapping=mapping, limit=limit, format=format, split=split)
    records = list(stream)
    return Dataset(records=records, version=stream.version, source=stream.source, format=stream.format)


def stream_dataset(
    source: str | Path,
    *,
    mapping: MappingSpec = None,
    limit: int | None = None,
    format: str | None = None,
    split: str | None = None,
    name: str | None = None,
    check_id: Callable[[str], str | None] | None = None,
) -> RecordStream:
    """The records of a file or ``hf://`` source, read lazily: the arguments and errors of :func:`load_dataset`.

    JSONL and CSV are read a line at a time; Parquet and the Hub in bounded batches; a JSON file (one
    document) is parsed whole. Arguments are checked here; the file is read as the stream is iterated.
    ``name`` is what errors and ``provenance.dataset`` call the source (default: ``source`` as given), e.g. the
    name a client gave an uploaded file rather than where the server keeps it. ``check_id`` says what is wrong
    with a record id (None: nothing), refusing the record where it is, e.g. an id a store cannot key.
    """
    field_mapping = parse_mapping(mapping)
    name = str(source) if name is None else name
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadInputError(f"{name}: limit must be a positive integer, got {limit!r}")
    if isinstance(source, str) and source.startswith(HF_PREFIX):
        if format not in (None, "hf"):
            raise BadInputError(f"{name}: format {format!r} does not apply to hf:// sources")
        return RecordStream(name, "hf", field_mapping, limit,
                            lambda: read_hf_rows(name, split=split or "train", streaming=limit is not None), check_id)
    if split is not None:
        raise BadInputError(f"{name}: split={split!r} applies to hf:// sources only")
    path = Path(source).expanduser()
    check_file(path, name)
    fmt = detect_format(name, format)
    return RecordStream(
        name, fmt, field_mapping, limit, lambda: read_rows(path, fmt, name=name, batch_size=limit), check_id
    )


class RecordStream:
    """Records of one source, produced one at a time as they are read; iterable once.

    ``version`` (see :func:`dataset_version`) and ``count`` are known once the stream is exhausted. Errors
    (``BadInputError``, naming the file and line) surface while iterating, including a mapping that matched
    no row and a source with no records, which are found only at its end.
    """

    def __init__(self, source: str, format: str, mapping: FieldMapping, limit: int | None,
                 open_rows: Callable[[], Iterator[tuple[int, Any]]],
                 check_id: Callable[[str], str | None] | None = None) -> None:
        self.source = source
        self.format = format
        self._builder = _Builder(source, mapping)
        self._limit = limit
        self._open_rows = open_rows
        self._check_id = check_id
        self._version: str | None = None
        self._started = False

    @property
    def count(self) -> int:
        return self._builder.count

    @property
    def version(self) -> str:
        if self._version is None:
            raise RuntimeError(f"{self.source}: the version is known once every record was read")
        return self._version

    def __iter__(self) -> Iterator[Record]:
        if self._started:
            raise RuntimeError(f"{self.source}: a record stream is read once")
        self._started = True
        return self._records()

    def _records(self) -> Iterator[Record]:
        builder, limit, fmt, check_id = self._builder, self._limit, self.format, self._check_id
        rows = self._open_rows()
        try:
            for position, row in rows:
                try:
                    record = builder.add_row(row)
                    problem = check_id(record.id) if check_id is not None else None
                    if problem:
                        raise _RowError(f"its id {problem}")
                except _RowError as exc:
                    raise BadInputError(f"{location(self.source, fmt, position)}: {exc}") from None
                yield record
                if builder.count == limit:
                    break
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()
        if not builder.count:
            raise BadInputError(f"{self.source}: no records")
        self._version = builder.finish()


def records_from_rows(
    rows: Iterable[Mapping[str, Any] | Record] | Any,
    *,
    mapping: MappingSpec = None,
    source: str = "<memory>",
) -> Dataset:
    """A :class:`Dataset` from in-memory rows (dicts) or Records, or a pandas DataFrame.

    Rows follow the same conventions and mapping as files; Records are copied, their missing id,
    ``provenance.sample_id``, ``provenance.trial`` and ``provenance.dataset`` filled in.
    """
    field_mapping = parse_mapping(mapping)
    if isinstance(rows, Mapping | str | bytes):
        raise BadInputError(f"{source}: expected an iterable of rows (objects or Records), got {_kind(rows)}")
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        rows = rows.to_dict("records")
    elif hasattr(rows, "to_dicts"):  # a polars DataFrame
        rows = rows.to_dicts()
    builder = _Builder(source, field_mapping)
    records: list[Record] = []
    for index, row in enumerate(rows):
        try:
            if isinstance(row, Record):
                if field_mapping:
                    raise _RowError("a mapping applies to rows, not to Records")
                records.append(builder.add_record(row))
            else:
                try:
                    row = plain_row(row)
                except (TypeError, ValueError) as exc:
                    raise _RowError(f"{exc}; accepted: JSON-like values") from None
                records.append(builder.add_row(row))
        except _RowError as exc:
            raise BadInputError(f"{source}: record {index}: {exc}") from None
    return Dataset(records=records, version=builder.finish(), source=source, format="memory")


def dataset_version(records: Iterable[Record]) -> str:
    """sha256 (hex) over the records in order, ``provenance.dataset`` left out.

    Each record contributes its deterministic protobuf serialization, length-prefixed: a function of
    the records' content alone, so the same records give the same version whichever file, format,
    path or in-memory form they came from, and any change to a record changes it.
    """
    digest = hashlib.sha256()
    for record in records:
        _hash_record(digest, record)
    return digest.hexdigest()


def _hash_record(digest: Any, record: Record) -> None:
    if record.provenance.dataset:
        record = _copy(record)
        record.provenance.dataset = ""
    data = record.SerializeToString(deterministic=True)
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)


class _RowError(Exception):
    """A problem with one row; the caller adds where the row is."""


class _Builder:
    """Turns rows into Records, assigning ids and trials and hashing as it goes; keeps no record."""

    def __init__(self, source: str, mapping: FieldMapping) -> None:
        self.source = source
        self.mapping = mapping
        self.count = 0
        self.digest = hashlib.sha256()
        # Compact counters, not sets of ids: a stream keeps no per-record objects.
        self.occurrences = SeenKeys()  # explicit ids: rows so far without a trial
        self.generated = SeenKeys()  # generated ids: rows so far with the same content
        self.pairs = SeenKeys()  # (id, trial) claimed so far
        self.missing: set[int] = set(range(len(mapping.items)))
        self.first_fields: list[str] | None = None

    def add_row(self, row: Any) -> Record:
        if type(row) is not dict and not isinstance(row, Mapping):
            raise _RowError(f"expected an object (one record), got {_kind(row)}")
        if self.first_fields is None:
            self.first_fields = list(row)
        fields: Mapping[str, Any]
        extras: dict[str, Any] | None
        if self.mapping:
            fields, mapped_metadata, mapped_usage, extras = self.mapping.split(row, self.missing)
        else:  # the default conventions, in the same pass as the conversion
            fields, mapped_metadata, mapped_usage, extras = row, None, None, None
        kwargs: dict[str, Any] = {}
        record_id: str | None = None
        trial: int | None = None
        metadata: dict[str, Any] | None = None
        usage: dict[str, Any] | None = None
        for name, value in fields.items():
            if value is None:
                continue
            if name in _CONTENT_FIELDS:
                kwargs[name] = {"text": value} if type(value) is str else _content(name, value)
            elif name not in _OTHER_FIELDS:
                if extras is None:
                    extras = {}
                extras[name] = value
            elif name == "id":
                record_id = _id(value)
            elif name == "context":
                kwargs["context"] = _context(value)
            elif name == "metadata":
                metadata = dict(_object("metadata", value))
            elif name == "usage":
                usage = dict(_object("usage", value))
            elif name == "trajectory":
                kwargs["trajectory"] = _trajectory(value)
            else:  # trial
                trial = _trial(value)
        if mapped_metadata:
            metadata = {**metadata, **mapped_metadata} if metadata else mapped_metadata
        if extras:
            if metadata:
                for key, value in extras.items():
                    if key in metadata and metadata[key] != value:
                        raise _RowError(
                            f"field {key!r} differs from metadata[{key!r}]; rename one, or map it with "
                            f"--map metadata.<key>={key}"
                        )
                metadata = {**extras, **metadata}
            else:
                metadata = extras
        if mapped_usage:
            usage = {**usage, **mapped_usage} if usage else mapped_usage
        if usage:
            kwargs["usage"] = _usage(usage)
        if record_id is None:
            record_id = self._generated_id(_row_digest(row))
            if trial is None:
                trial = 0
        elif trial is None:
            trial = self.occurrences.count(record_id)
        kwargs["provenance"] = {"sample_id": record_id, "trial": trial}
        record = Record(id=record_id, **kwargs)
        if metadata:
            _fill_metadata(record.metadata, metadata)
        self._claim(record_id, trial)
        return self._append(record)

    def add_record(self, given: Record) -> Record:
        record = _copy(given)
        provenance = record.provenance
        if record.id:
            trial = provenance.trial
            if not trial:
                trial = self.occurrences.count(record.id)
        else:
            as_dict = json_format.MessageToDict(record, preserving_proto_field_name=True)
            record.id = self._generated_id(hashlib.sha256(canonical_json(as_dict).encode()).hexdigest())
            trial = provenance.trial
        self._claim(record.id, trial)
        provenance.trial = trial
        if not provenance.sample_id:
            provenance.sample_id = record.id
        return self._append(record)

    def _generated_id(self, hexdigest: str) -> str:
        base = "r-" + hexdigest[:16]
        repeat = self.generated.count(base)
        return base if repeat == 0 else f"{base}-{repeat}"

    def _claim(self, record_id: str, trial: int) -> None:
        key = (record_id, trial)
        if self.pairs.count(key):
            raise _RowError(
                f"id {record_id!r} with trial {trial} appears twice; rows sharing an id are trials of one "
                "sample: give each a distinct 'trial', or none to number them in order"
            )

    def _append(self, record: Record) -> Record:
        provenance = record.provenance
        if provenance.dataset:
            _hash_record(self.digest, record)
        else:
            data = record.SerializeToString(deterministic=True)
            self.digest.update(len(data).to_bytes(8, "big"))
            self.digest.update(data)
            provenance.dataset = self.source
        self.count += 1
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


# --- field conversion -------------------------------------------------------------------------------


def _copy(record: Record) -> Record:
    out = Record()
    out.CopyFrom(record)
    return clear_empty_contents(out)


# canonical_json, with the encoder built once rather than per call.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def _row_digest(row: Mapping[str, Any]) -> str:
    if None in row.values():
        row = {key: value for key, value in row.items() if value is not None}
    return hashlib.sha256(_canonical(row).encode()).hexdigest()


def _content(name: str, value: Any) -> Content:
    """``records.to_content``, with JSON content filled in place."""
    try:
        if isinstance(value, str | Content) or (isinstance(value, Mapping) and len(value) == 1):
            return to_content(value)
        content = Content()
        _fill(content.json, value)
        return content
    except (TypeError, ValueError, OverflowError) as exc:
        raise _RowError(f"field {name!r}: {exc}; accepted: {CONTENT_HELP}") from None


def _context(value: Any) -> list[Content]:
    if isinstance(value, str):
        return [Content(text=value)]
    if isinstance(value, list | tuple):
        return [_content(f"context.{index}", item) for index, item in enumerate(value)]
    return [_content("context", value)]


def _id(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    raise _RowError(f"field 'id' must be a string or a number, got {_kind(value)}")


def _trial(value: Any) -> int:
    trial: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        trial = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and value.strip().isdigit()
    ):
        trial = int(value)
    if trial is None or not 0 <= trial <= _MAX_TRIAL:
        raise _RowError(f"field 'trial' must be a non-negative integer, got {value!r}")
    return trial


def _object(name: str, value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):  # e.g. a CSV cell holding JSON
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
        raise _RowError(f"field {name!r} must be an object (or a string holding a JSON object), got a string")
    if isinstance(value, Mapping):
        return value
    raise _RowError(f"field {name!r} must be an object, got {_kind(value)}")


def _fill(message: _Value, obj: Any) -> None:
    """Set a Value in place from a JSON-like value: ``records.to_value`` without the nested copies."""
    kind = type(obj)
    if kind is str:
        message.string_value = obj
    elif kind is bool:
        message.bool_value = obj
    elif kind is int or kind is float:
        message.number_value = obj
    elif obj is None:
        message.null_value = _NULL
    elif kind is dict:
        struct = message.struct_value
        struct.SetInParent()
        fields = struct.fields
        for key, inner in obj.items():
            _fill(fields[key], inner)
    elif kind is list:
        values = message.list_value
        values.SetInParent()
        add = values.values.add
        for inner in obj:
            _fill(add(), inner)
    else:
        message.CopyFrom(to_value(obj))


def _fill_metadata(target: Any, metadata: Mapping[str, Any]) -> None:
    for key, value in metadata.items():
        try:
            _fill(target[key], value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _RowError(f"field 'metadata.{key}': {exc}; accepted: JSON values") from None


def _trajectory(value: Any) -> Trajectory:
    obj = _object("trajectory", value)
    try:
        return json_format.ParseDict(dict(obj), Trajectory())
    except (json_format.ParseError, TypeError, ValueError) as exc:
        raise _RowError(
            f"field 'trajectory': {exc}; accepted: the protobuf JSON form of evalsi.v1alpha1.Trajectory "
            "(steps, session_id, trace_id)"
        ) from None


def _usage(values: Mapping[str, Any]) -> Usage:
    unknown = [key for key in values if key not in _USAGE_SET]
    if unknown:
        raise _RowError(f"field 'usage': unknown key {unknown[0]!r}; accepted: {', '.join(USAGE_FIELDS)}")
    if values.get("latency_s") is not None and values.get("latency_ms") is not None:
        raise _RowError("field 'usage': give latency_s or latency_ms, not both")
    if values.get("ttft_s") is not None and values.get("ttft_ms") is not None:
        raise _RowError("field 'usage': give ttft_s or ttft_ms, not both")
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
        raise _RowError(f"field 'usage.{key}' must be a non-negative number, got {value!r}")
    return number


def _count(key: str, value: Any) -> int:
    number = _number(key, value)
    if not number.is_integer() or number >= 2**63:
        raise _RowError(f"field 'usage.{key}' must be a non-negative integer, got {value!r}")
    return int(value) if isinstance(value, int) else int(number)
