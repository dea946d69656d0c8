"""Inspect logs (``.eval`` and ``.json``) read as record rows, through ``inspect_ai``'s own reader.

Inspect's reader, not ours: its ``.eval`` files are zip archives whose members are zstd-compressed by the
versions pinned here (the standard library cannot open them before Python 3.14), and the reader migrates the
logs older versions wrote. So importing needs ``inspect_ai`` installed (``pip install 'evalsi[inspect]'``); the
contract tests hold the mapping to the pinned version's logs.

A ``.eval`` log is read a sample at a time (a large log never sits in memory whole); a ``.json`` log is one
document, which Inspect parses whole, so it is bounded by size (``MAX_JSON_LOG_BYTES``).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from inspect_ai.log import EvalLog, EvalSample, read_eval_log, read_eval_log_samples

from evalsi.adapters.inspect.rows import SampleParts, sample_row
from evalsi.errors import BadInputError

LOG_SUFFIXES = (".eval", ".json")
# Inspect parses a .json log whole; beyond this, convert it (`inspect log convert --to eval`) and import that.
MAX_JSON_LOG_BYTES = 1 << 30
# What an import never reads: the event transcript and the store are most of a sample's bytes.
UNREAD_FIELDS = frozenset({"events", "store"})
# How much of a reader's complaint a refusal quotes (a validation error lists every field it checked).
_PROBLEM_LINES = 4


@dataclass(frozen=True)
class LogHeader:
    """What the log says about its run: the task, the model, whether it finished, its epochs and samples."""

    path: Path
    task: str
    model: str
    status: str
    epochs: int
    samples: int
    listed: bool  # the header lists its sample ids, so a .eval log can be read a sample at a time


@dataclass(frozen=True)
class ImportSummary:
    header: LogHeader
    records: int
    halted: int  # samples Inspect recorded with an error or a limit (imported, their output as far as it got)


def read_header(path: str | Path) -> LogHeader:
    """The log's header, the file checked first: a missing file, another suffix, an oversized ``.json`` or a
    log Inspect cannot read is refused, naming the file and what is wrong."""
    path = _checked(Path(path))
    with _refusing(path):
        log = read_eval_log(str(path), header_only=True)
    return _header(path, log)


def log_rows(path: str | Path, *, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """The log's samples as record rows (``rows.sample_row``), in the dataset's order, each sample's epochs in turn;
    with ``limit``, the first ``limit`` of them."""
    for _, row in _read(read_header(path), limit):
        yield row


def import_log(path: str | Path, out: IO[str], *, limit: int | None = None) -> ImportSummary:
    """Write the log's record rows to ``out`` as JSONL (one record a line); what was read, for the caller to say."""
    header = read_header(path)
    records = halted = 0
    for sample, row in _read(header, limit):
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        records += 1
        halted += bool(sample.error or sample.limit)
    return ImportSummary(header, records, halted)


def _read(header: LogHeader, limit: int | None) -> Iterator[tuple[EvalSample, dict[str, Any]]]:
    for count, sample in enumerate(_samples(header)):
        if limit is not None and count >= limit:
            return
        yield sample, sample_row(_parts(sample, header))


def _checked(path: Path) -> Path:
    if path.suffix not in LOG_SUFFIXES:
        raise BadInputError(f"{path}: not an Inspect log; give a .eval or .json log file (`inspect eval` writes them "
                            "under ./logs)")
    if not path.is_file():
        raise BadInputError(f"{path}: no such file")
    if path.suffix == ".json" and path.stat().st_size > MAX_JSON_LOG_BYTES:
        raise BadInputError(
            f"{path}: a .json log of {path.stat().st_size} bytes is over the {MAX_JSON_LOG_BYTES} this import reads "
            "whole; convert it with `inspect log convert --to eval` and import the .eval log, read a sample at a time"
        )
    return path


@contextmanager
def _refusing(path: Path) -> Iterator[None]:
    """Whatever Inspect's reader raises on a damaged log (a truncated zip, bad JSON, a field that fails validation)
    becomes a refusal naming the file."""
    try:
        yield
    except BadInputError:
        raise
    except Exception as exc:  # the reader's failures have no common base: zip, JSON, pydantic, its own
        damaged = " (a .eval log is a zip archive: this one is truncated or damaged)" if _zip_problem(exc) else ""
        raise BadInputError(f"{path}: not a readable Inspect log{damaged}: {_problem(exc)}") from None


def _zip_problem(exc: BaseException) -> bool:
    return isinstance(exc, zipfile.BadZipFile) or "EOCD" in str(exc)  # Inspect's own zip reader says "EOCD not found"


def _problem(exc: BaseException) -> str:
    """What is wrong, from the innermost cause (Inspect wraps the JSON or validation error in "Unable to read")."""
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    text = "\n".join(line for line in str(exc).strip().splitlines()[:_PROBLEM_LINES] if line.strip())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _header(path: Path, log: EvalLog) -> LogHeader:
    spec = log.eval
    return LogHeader(
        path=path,
        task=spec.task,
        model=spec.model,
        status=log.status,
        epochs=spec.config.epochs or 1,
        samples=spec.dataset.samples or 0,
        listed=spec.dataset.sample_ids is not None,
    )


def _samples(header: LogHeader) -> Iterator[EvalSample]:
    """The samples the log holds; a log that stopped early (error, cancelled, still running) gives those it has."""
    path = str(header.path)
    with _refusing(header.path):
        if header.path.suffix == ".json" or not header.listed:
            # One document (or a log too old to list its samples): read whole, and put in the order a .eval log is
            # read in (a .json log holds its samples in the order they finished).
            log = read_eval_log(path, resolve_attachments=True)
            order = {sample_id: index for index, sample_id in enumerate(log.eval.dataset.sample_ids or ())}
            yield from sorted(log.samples or (), key=lambda s: (order.get(s.id, len(order)), s.epoch))
            return
        yield from read_eval_log_samples(
            path, all_samples_required=False, resolve_attachments=True, exclude_fields=set(UNREAD_FIELDS)
        )


def _parts(sample: EvalSample, header: LogHeader) -> SampleParts:
    usage = sample.model_usage.get(header.model) or sample.output.usage
    return SampleParts(
        sample_id=sample.id,
        epoch=sample.epoch,
        input=sample.input,
        messages=sample.messages,
        output=sample.output,
        target=sample.target,
        metadata=sample.metadata,
        model=header.model,
        task=header.task,
        usage=usage,
        working_time=sample.working_time,
        scores={name: score.value for name, score in (sample.scores or {}).items()},
        error=sample.error.message if sample.error else "",
        limit=sample.limit.type if sample.limit else "",
    )
