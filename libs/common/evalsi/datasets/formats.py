"""Readers for dataset files: JSONL, JSON, CSV, Parquet, and the Hugging Face Hub.

Every reader is a generator of ``(position, row)`` pairs, so a caller that stops early (``limit``)
stops the reading too. ``position`` is a 1-based line number for the line formats (JSONL, CSV) and a
0-based record index for the others; :func:`location` turns it into the ``<file>:<line>`` or
``<file>: record <index>`` prefix every error message starts with. Readers only read; rows come out
as plain JSON-like Python values (dict, list, str, int, float, bool, None).
"""

from __future__ import annotations

import base64
import csv
import datetime as _dt
import decimal
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from evalsi.errors import BadInputError, InfraError
from evalsi.limits import MAX_JSON_DATASET_BYTES, MAX_JSONL_LINE_BYTES

FORMATS = ("jsonl", "json", "csv", "parquet")
"""The file formats :func:`read_rows` reads, by the name ``format=`` takes."""

EXTENSIONS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""File extensions (lower case) and the format each implies."""

_FORMAT_ALIASES = {"ndjson": "jsonl"}
_LINE_FORMATS = frozenset({"jsonl", "csv"})
_BOM = b"\xef\xbb\xbf"
_PARQUET_BATCH = 4096


def _accepted_formats() -> str:
    by_format: dict[str, list[str]] = {}
    for ext, fmt in EXTENSIONS.items():
        by_format.setdefault(fmt, []).append(ext)
    return "; ".join(f"{fmt} ({', '.join(exts)})" for fmt, exts in by_format.items())


def detect_format(path: str | Path, format: str | None = None) -> str:
    """The format of a file: ``format`` when given (checked), else from the file's extension."""
    name = str(path)
    fmt: str | None
    if format is not None:
        fmt = _FORMAT_ALIASES.get(format.lower(), format.lower())
        if fmt not in FORMATS:
            raise BadInputError(f"{name}: unknown format {format!r}; accepted: {', '.join(FORMATS)}")
        return fmt
    suffix = Path(name).suffix.lower()
    fmt = EXTENSIONS.get(suffix)
    if fmt is None:
        what = f"extension {suffix!r}" if suffix else "no extension"
        raise BadInputError(
            f"{name}: cannot tell the format from {what}; accepted: {_accepted_formats()}; "
            f"or name the format ({', '.join(FORMATS)})"
        )
    return fmt


def location(name: str, format: str, position: int) -> str:
    """The prefix error messages start with: ``<file>:<line>`` or ``<file>: record <index>``."""
    if format in _LINE_FORMATS:
        return f"{name}:{position}"
    return f"{name}: record {position}"


def read_rows(
    path: str | Path, format: str, *, name: str | None = None, batch_size: int | None = None
) -> Iterator[tuple[int, Any]]:
    """``(position, row)`` pairs from a file, read lazily; errors name ``name`` (default: the path).

    ``batch_size`` bounds how many Parquet rows are decoded at a time (pass the ``limit``).
    """
    path = Path(path)
    name = str(path) if name is None else name
    if format == "jsonl":
        return _read_jsonl(path, name)
    if format == "json":
        return _read_json(path, name)
    if format == "csv":
        return _read_csv(path, name)
    if format == "parquet":
        size = _PARQUET_BATCH if batch_size is None else max(1, min(batch_size, _PARQUET_BATCH))
        return _read_parquet(path, name, size)
    raise BadInputError(f"{name}: unknown format {format!r}; accepted: {', '.join(FORMATS)}")


# --- JSON values ------------------------------------------------------------------------------------


def _json_constant(name: str) -> Any:
    # Python's json module writes NaN for a missing float; read it as null. Infinity has no JSON form.
    if name == "NaN":
        return None
    raise ValueError(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_constant=_json_constant)
_decode = _DECODER.decode
_scan = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__; typeshed omits it


def _loads(text: str) -> Any:
    """``json.loads`` without its per-call overhead; errors come from the full decoder."""
    stripped = text.strip()
    try:
        value, end = _scan(stripped, 0)
    except StopIteration:
        end = -1
    if end != len(stripped):
        return _decode(text)  # raises the proper JSONDecodeError
    return value


def _json_error(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)


_SCALARS = frozenset({str, int, bool, type(None)})


def to_plain(obj: Any) -> Any:
    """A value as plain JSON-like Python: dates as ISO strings, NaN as None, numpy values unwrapped.

    Raises ``TypeError`` for a value with no JSON form and ``ValueError`` for an infinite number.
    """
    kind = type(obj)
    if kind in _SCALARS:
        return obj
    if kind is float:
        if math.isfinite(obj):
            return obj
        if math.isnan(obj):
            return None
        raise ValueError(f"{obj} is not a JSON number")
    if isinstance(obj, Mapping):
        return {str(key): to_plain(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(value) for value in obj]
    if isinstance(obj, str):  # subclasses, e.g. enums
        return str.__str__(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return to_plain(float(obj))
    if isinstance(obj, _dt.date | _dt.time):  # datetime is a date
        return obj.isoformat()
    if isinstance(obj, _dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, decimal.Decimal):
        return to_plain(float(obj))
    if isinstance(obj, bytes | bytearray | memoryview):
        data = bytes(obj)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii")
    if hasattr(obj, "tolist"):  # numpy arrays and scalars
        return to_plain(obj.tolist())
    raise TypeError(f"cannot store a {kind.__name__} as JSON")


_FLAT = _SCALARS | {float}
_CONTAINERS = frozenset({dict, list})
_STR_KEYS = frozenset({str})
# A dict of at most this many entries is tested entry by entry: a row's small maps (a row, its features, its
# probabilities, its metadata) cost a third of the passes below, whose sets and comprehensions cost more than a
# few entries do.
_SMALL_DICT = 16


def is_plain(obj: Any) -> bool:
    """Whether :func:`to_plain` gives ``obj`` back as it is (the same types, equal values): dicts with string keys,
    lists, strings, ints, bools, None and finite floats. A row of them needs no converted copy. A small dict is
    tested entry by entry; a larger one's or a list's scalars a C-level pass at a time, and only its dicts and lists
    are looked into, one call each."""
    kind = type(obj)
    if kind is dict:
        if len(obj) <= _SMALL_DICT:
            for key, value in obj.items():
                if type(key) is not str:
                    return False
                kind = type(value)
                if kind in _SCALARS:
                    continue
                if kind is float:
                    if not math.isfinite(value):
                        return False
                elif kind not in _CONTAINERS or not is_plain(value):
                    return False
            return True
        if not _STR_KEYS.issuperset(map(type, obj)):
            return False
        values: Any = obj.values()
    elif kind is list:
        values = obj
    elif kind is float:
        return math.isfinite(obj)
    else:
        return kind in _SCALARS
    kinds = set(map(type, values))
    if kinds <= _SCALARS:
        return True
    if float in kinds and not all(map(math.isfinite, [value for value in values if type(value) is float])):
        return False
    nested = kinds - _FLAT
    if not nested:
        return True
    return nested <= _CONTAINERS and all(map(is_plain, [value for value in values if type(value) in _CONTAINERS]))


def plain_row(row: Any) -> Any:
    """:func:`to_plain` of a row; a row that is not a mapping is returned as is for the caller to refuse."""
    if not isinstance(row, Mapping):
        return row
    return {str(key): to_plain(value) for key, value in row.items()}


# --- JSONL --------------------------------------------------------------------------------------------


def _bounded_lines(handle: Any, name: str) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` of a binary file, its BOM dropped; a line over ``MAX_JSONL_LINE_BYTES`` is refused
    after reading only that much of it, so one line without a newline cannot take the process's memory."""
    readline = handle.readline
    lineno = 0
    while raw := readline(MAX_JSONL_LINE_BYTES + 1):
        lineno += 1
        if len(raw) > MAX_JSONL_LINE_BYTES:
            raise BadInputError(f"{name}:{lineno}: a line over {MAX_JSONL_LINE_BYTES:,} bytes, the limit of one "
                                "record; keep large content in files the record names")
        if lineno == 1 and raw.startswith(_BOM):
            raw = raw[3:]
        yield lineno, raw


def _read_jsonl(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    with _open(path, name, "rb") as handle:
        loads = _loads
        for lineno, raw in _bounded_lines(handle, name):
            if not raw or raw.isspace():
                continue
            try:
                row = loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise BadInputError(f"{name}:{lineno}: not valid UTF-8; files must be UTF-8 text") from None
            except ValueError as exc:
                raise BadInputError(
                    f"{name}:{lineno}: not valid JSON ({_json_error(exc)}); "
                    "each line must hold one JSON object"
                ) from None
            yield lineno, row


# --- JSON ---------------------------------------------------------------------------------------------


def _read_json(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    with _open(path, name, "rb") as handle:
        data = handle.read(MAX_JSON_DATASET_BYTES + 1)
    if len(data) > MAX_JSON_DATASET_BYTES:
        raise BadInputError(f"{name}: a JSON document over {MAX_JSON_DATASET_BYTES:,} bytes is read whole, in memory; "
                            "write a dataset this large as JSON lines (.jsonl), CSV or Parquet, read a record at a "
                            "time")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise BadInputError(f"{name}:{line}: not valid UTF-8; files must be UTF-8 text") from None
    if not text.strip():
        return
    try:
        doc = _decode(text)
    except json.JSONDecodeError as exc:
        raise BadInputError(
            f"{name}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); expected a list of "
            'objects, or an object with a "records" or "data" list'
        ) from None
    except ValueError as exc:
        raise BadInputError(f"{name}: not valid JSON ({exc})") from None
    items = doc
    if isinstance(doc, dict):
        items = next((doc[key] for key in ("records", "data") if isinstance(doc.get(key), list)), None)
    if not isinstance(items, list):
        keys = f" with keys {', '.join(map(repr, list(doc)[:10]))}" if isinstance(doc, dict) else ""
        raise BadInputError(
            f'{name}: expected a JSON list of objects, or an object with a "records" or "data" list; '
            f"got {_kind(doc)}{keys}"
        )
    yield from enumerate(items)


# --- CSV ----------------------------------------------------------------------------------------------


def _read_csv(path: Path, name: str) -> Iterator[tuple[int, Any]]:
    with _open(path, name, "rb") as handle:
        reader = csv.reader(_utf8_lines(handle, name))
        line = 0
        try:
            header: list[str] | None = None
            while header is None:
                first = next(reader, None)
                if first is None:
                    return
                line = reader.line_num
                if first:
                    header = first
            _check_header(header, name, line)
            width = len(header)
            for cells in reader:
                start, line = line + 1, reader.line_num
                if not cells:
                    continue
                if len(cells) > width and any(cells[width:]):
                    raise BadInputError(
                        f"{name}:{start}: the row has {len(cells)} cells but the header has {width} columns"
                    )
                row: dict[str, str] = {}
                for column, cell in zip(header, cells, strict=False):
                    if cell == "":
                        continue
                    if column == "":
                        raise BadInputError(
                            f"{name}:{start}: a value ({cell!r}) in a column with no name; name the column "
                            "in the header line"
                        )
                    row[column] = cell
                yield start, row
        except csv.Error as exc:
            raise BadInputError(f"{name}:{line + 1}: not valid CSV ({exc})") from None


def _utf8_lines(handle: Any, name: str) -> Iterator[str]:
    """The lines of a binary file as text, so a bad byte is reported on its own line."""
    for lineno, raw in _bounded_lines(handle, name):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadInputError(f"{name}:{lineno}: not valid UTF-8; files must be UTF-8 text") from None


def _check_header(header: list[str], name: str, line: int) -> None:
    seen: set[str] = set()
    for column in header:
        if column and column in seen:
            raise BadInputError(f"{name}:{line}: the header names column {column!r} twice")
        seen.add(column)


# --- Parquet ------------------------------------------------------------------------------------------


def _read_parquet(path: Path, name: str, batch_size: int) -> Iterator[tuple[int, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_file(path, name)
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise BadInputError(f"{name}: not a readable Parquet file ({exc})") from None
    index = 0
    with parquet:
        try:
            for batch in parquet.iter_batches(batch_size=batch_size):
                for row in batch.to_pylist():
                    yield index, _plain_or_error(row, f"{name}: record {index}")
                    index += 1
        except (pa.ArrowException, OSError) as exc:
            raise BadInputError(f"{name}: record {index}: cannot read the Parquet data ({exc})") from None


def _plain_or_error(row: Any, where: str) -> Any:
    if not isinstance(row, Mapping):
        return row
    out = {}
    for key, value in row.items():
        try:
            out[str(key)] = to_plain(value)
        except (TypeError, ValueError) as exc:
            raise BadInputError(f"{where}: field {key!r}: {exc}; accepted: JSON-like values") from None
    return out


# --- Hugging Face Hub ---------------------------------------------------------------------------------

HF_PREFIX = "hf://"


def parse_hf_source(source: str) -> tuple[str, str | None]:
    """``hf://owner/name[/config]`` as ``("owner/name", config or None)``."""
    parts = source[len(HF_PREFIX) :].strip("/").split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise BadInputError(f"{source}: expected hf://owner/name or hf://owner/name/config")
    return "/".join(parts[:2]), (parts[2] if len(parts) == 3 else None)


def read_hf_rows(source: str, *, split: str = "train", streaming: bool = False) -> Iterator[tuple[int, Any]]:
    """``(index, row)`` pairs of one split of a Hub dataset, through the optional ``datasets`` package."""
    repo, config = parse_hf_source(source)
    try:
        import datasets as hf_datasets

        load = hf_datasets.load_dataset
    except (ImportError, AttributeError):  # AttributeError: a local folder named datasets, not the package
        raise BadInputError(
            f"{source}: loading from the Hugging Face Hub needs the `datasets` package: "
            "pip install 'evalsi[hf]'"
        ) from None
    try:
        data = load(repo, config, split=split, streaming=streaming)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise BadInputError(f"{source}: cannot load split {split!r}: {exc}") from None
    except OSError as exc:  # network and Hub failures: not the user's input
        raise InfraError(f"{source}: the Hugging Face Hub failed: {exc}") from exc
    return _hf_rows(data, source)


def _hf_rows(data: Any, source: str) -> Iterator[tuple[int, Any]]:
    for index, row in enumerate(data):
        yield index, _plain_or_error(row, f"{source}: record {index}")


# --- helpers ------------------------------------------------------------------------------------------


def check_file(path: Path, name: str) -> None:
    """A ``BadInputError`` naming the path unless it is an existing file."""
    if not path.exists():
        raise BadInputError(f"{name}: no such file")
    if path.is_dir():
        raise BadInputError(f"{name}: is a directory, not a dataset file")


def _open(path: Path, name: str, mode: str, **kwargs: Any) -> Any:
    check_file(path, name)
    try:
        return open(path, mode, **kwargs)
    except OSError as exc:
        raise BadInputError(f"{name}: cannot read ({exc.strerror or exc})") from None


def _kind(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"
