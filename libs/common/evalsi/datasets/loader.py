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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any

from evalsi.datasets._text_rows import _usual as usual_text_row
from evalsi.datasets.formats import (
    HF_PREFIX,
    _kind,
    check_file,
    detect_format,
    is_plain,
    location,
    plain_row,
    read_hf_rows,
    read_rows,
)
from evalsi.datasets.held import RecordColumns
from evalsi.datasets.importers import imported_rows
from evalsi.datasets.mapping import FieldMapping, parse_mapping
from evalsi.datasets.rows import RecordBuilder, RowError
from evalsi.errors import BadInputError
from evalsi.v1alpha1.record_pb2 import Record

MappingSpec = Mapping[str, str] | Sequence[str] | FieldMapping | None

_ROW_BATCH = 1024  # rows read and encoded at a time


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
    imported = imported_rows(source, format, name)
    if imported is not None:  # a benchmark's files (bfcl://, tau2://, or their format): evalsi.datasets.importers
        if split is not None:
            raise BadInputError(f"{name}: split={split!r} applies to hf:// sources only")
        return RecordStream(name, imported[0], field_mapping, limit, imported[1], check_id)
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
    no row and a source with no records, which are found only at its end. :meth:`encoded` gives the records
    as their serialized bytes instead, for a caller that stores them (nothing parses them twice).
    """

    def __init__(self, source: str, format: str, mapping: FieldMapping, limit: int | None,
                 open_rows: Callable[[], Iterator[tuple[int, Any]]],
                 check_id: Callable[[str], str | None] | None = None,
                 plain: Callable[[int, Any], Any] | None = None) -> None:
        self.source = source
        self.format = format
        self._builder = RecordBuilder(source, mapping, check_id)
        self._limit = limit
        self._open_rows = open_rows
        # Makes a row plain (or refuses it) where the rows are not plain already: called only for a row that is
        # not of the usual text shape (``RecordBuilder.add_text_rows`` takes those as they are), before ``add_row``.
        self._plain = plain
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
        return map(Record.FromString, self.encoded())

    def keep_columns(self) -> RecordColumns:
        """Keep the columns of the records as they are read (``datasets.held``: whole while every row is a text
        row), for a caller that holds the records it reads."""
        return self._builder.keep_columns()

    def drop_columns(self) -> None:
        """Keep no more columns (a caller that stopped holding the records: they go to shards as they are read)."""
        self._builder.columns = None

    def encoded(self) -> Iterator[bytes]:
        """The records as ``Record.SerializeToString(deterministic=True)`` bytes, read lazily, once."""
        return chain.from_iterable(self.encoded_batches())

    def encoded_batches(self) -> Iterator[list[bytes]]:
        """``encoded`` a list at a time (as many records as were read together), for a caller that holds them."""
        if self._started:
            raise RuntimeError(f"{self.source}: a record stream is read once")
        self._started = True
        return self._encoded()

    def _encoded(self) -> Iterator[list[bytes]]:
        builder, limit, fmt, to_plain = self._builder, self._limit, self.format, self._plain
        add_row, add_text_rows = builder.add_row, builder.add_text_rows
        rows = self._open_rows()
        try:
            # A batch at a time: rows of the usual shape are encoded in one loop (RecordBuilder.add_text_rows),
            # any other row, and a bad one, by add_row, which names what is wrong with it.
            failed: Exception | None = None
            while not failed:
                # A batch read ahead; a row the reader cannot read ends it, raised once the rows before it are out.
                batch: list[tuple[int, Any]] = []
                try:
                    batch.extend(islice(rows, _ROW_BATCH if limit is None else min(_ROW_BATCH, limit - builder.count)))
                except Exception as exc:
                    failed = exc
                if not batch:
                    break
                plain = [row for _position, row in batch]
                index, size = 0, len(batch)
                while index < size:
                    encoded: list[bytes] = []
                    taken = add_text_rows(plain, index, encoded)
                    # The row it stopped at, and each next row not of the usual shape (every row of a tabular
                    # dataset), by add_row, yielded with them: add_text_rows is asked again only for a usual row,
                    # and a bad row raises once the rows before it are out.
                    while taken < size:
                        position, row = batch[taken]
                        try:
                            if to_plain is not None:
                                row = to_plain(position, row)
                            encoded.append(add_row(row))
                        except (RowError, BadInputError) as exc:
                            if encoded:
                                yield encoded
                            if isinstance(exc, BadInputError):
                                raise
                            raise BadInputError(f"{location(self.source, fmt, position)}: {exc}") from None
                        taken += 1
                        if taken < size and usual_text_row(plain[taken]):
                            break
                    if encoded:
                        yield encoded
                    index = taken
                if builder.count == limit:
                    break
            if failed is not None:
                raise failed
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
    rows = _iterable_rows(rows, source)
    builder = RecordBuilder(source, field_mapping)
    add_row, parse = builder.add_row, Record.FromString
    records: list[Record] = []
    for index, row in enumerate(rows):
        try:
            if type(row) is dict and is_plain(row):
                records.append(parse(add_row(row)))  # plain already: nothing to convert
            elif isinstance(row, Record):
                if field_mapping:
                    raise RowError("a mapping applies to rows, not to Records")
                records.append(builder.add_record(row))
            else:
                try:
                    row = plain_row(row)
                except (TypeError, ValueError) as exc:
                    raise RowError(f"{exc}; accepted: JSON-like values") from None
                records.append(parse(add_row(row)))
        except RowError as exc:
            raise BadInputError(f"{source}: record {index}: {exc}") from None
    return Dataset(records=records, version=builder.finish(), source=source, format="memory")


def _iterable_rows(rows: Any, source: str) -> Iterable[Any]:
    """Rows as an iterable: a pandas or polars DataFrame as its dicts; a single object or a string refused."""
    if isinstance(rows, Mapping | str | bytes):
        raise BadInputError(f"{source}: expected an iterable of rows (objects or Records), got {_kind(rows)}")
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a pandas DataFrame
        return rows.to_dict("records")
    if hasattr(rows, "to_dicts"):  # a polars DataFrame
        return rows.to_dicts()
    return rows


def stream_rows(
    rows: Iterable[Mapping[str, Any]] | Any, *, mapping: MappingSpec = None, source: str = "<memory>"
) -> RecordStream:
    """:func:`records_from_rows` for rows that are objects (dicts, or a DataFrame), as a :class:`RecordStream`:
    each row becomes a record only as the stream is read, so a caller storing the records as shards (an embedded
    run beyond its memory budget) never holds them all as messages. The same records, ids and version."""
    field_mapping = parse_mapping(mapping)
    rows = _iterable_rows(rows, source)

    def plain(index: int, row: Any) -> Any:
        if type(row) is dict and is_plain(row):
            return row
        if isinstance(row, Record):
            raise BadInputError(f"{source}: record {index}: a stream of rows takes objects, not Records")
        try:
            return plain_row(row)
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"{source}: record {index}: {exc}; accepted: JSON-like values") from None

    # Rows as they come: one of the usual text shape is plain already, so only the others are checked (``plain``).
    return RecordStream(source, "memory", field_mapping, None, lambda: enumerate(rows), plain=plain)


def dataset_version(records: Iterable[Record]) -> str:
    """sha256 (hex) over the records in order, ``provenance.dataset`` left out.

    Each record contributes its deterministic protobuf serialization, length-prefixed: a function of
    the records' content alone, so the same records give the same version whichever file, format,
    path or in-memory form they came from, and any change to a record changes it.
    """
    digest = hashlib.sha256()
    for record in records:
        hash_record(digest, record)
    return digest.hexdigest()


def hash_record(digest: Any, record: Record) -> None:
    """One record's part of :func:`dataset_version`: its bytes without ``provenance.dataset``, length-prefixed.

    The field is cleared and restored rather than the record copied.
    """
    provenance = record.provenance
    named = provenance.dataset
    if named:
        provenance.dataset = ""
    data = record.SerializeToString(deterministic=True)
    if named:
        provenance.dataset = named
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)
