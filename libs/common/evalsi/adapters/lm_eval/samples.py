"""lm-eval's sample logs (``--log_samples``) read as record rows, by our own bounded JSONL reader: importing
needs no lm-eval. A line over ``MAX_JSONL_LINE_BYTES``, a line that is not JSON or not a logged sample, is refused
naming the file and line, and nothing is written.

``PATH`` is one ``samples_<task>_<date>.jsonl`` file, or the directory lm-eval wrote (``--output_path``: its model
directory, or the directory above holding one): there, the latest run's ``results_<date>.json`` and the samples
files of that date. The results file gives the model's name; a samples file beside none is imported without it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from evalsi.adapters.lm_eval.rows import SampleContext, sample_rows
from evalsi.errors import BadInputError
from evalsi.limits import MAX_JSONL_LINE_BYTES

MAX_RESULTS_BYTES = 64 << 20
MAX_FILES = 4096  # samples files of one run (one per task)
MAX_USAGE_LINES = 10_000_000
# lm-eval's file names: ``datetime.now().isoformat()`` with ":" replaced by "-".
_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES = re.compile(rf"^samples_(?P<task>.+)_(?P<date>{_DATE})\.jsonl$")
_RESULTS = re.compile(rf"^results_(?P<date>{_DATE})\.json$")


@dataclass(frozen=True)
class SamplesFile:
    path: Path
    task: str
    date: str


@dataclass(frozen=True)
class Run:
    """What one import reads: the samples files of one run, and the model when its results file says."""

    files: tuple[SamplesFile, ...]
    model: str
    results: Path | None


@dataclass(frozen=True)
class ImportSummary:
    run: Run
    samples: int
    records: int
    with_usage: int


def find_run(path: str | Path, *, task: str = "") -> Run:
    """The samples files ``path`` names (a file, or lm-eval's output directory); ``task`` keeps that task's only."""
    path = Path(path)
    if path.is_file():
        match = _SAMPLES.match(path.name)
        if match is None or path.suffix != ".jsonl":
            raise BadInputError(f"{path}: not an lm-eval samples file; give a samples_<task>_<date>.jsonl that "
                                "`lm_eval --log_samples --output_path DIR` writes, or DIR itself")
        results = path.with_name(f"results_{match['date']}.json")
        run = Run((SamplesFile(path, match["task"], match["date"]),), "", results if results.is_file() else None)
    elif path.is_dir():
        run = _run_in(path)
    else:
        raise BadInputError(f"{path}: no such file or directory")
    if task:
        kept = tuple(f for f in run.files if f.task == task)
        if not kept:
            raise BadInputError(f"{path}: --task {task!r}: no samples of it; this run has "
                                f"{', '.join(sorted(f.task for f in run.files))}")
        run = Run(kept, run.model, run.results)
    return Run(run.files, _model(run.results) if run.results else "", run.results)


def _run_in(directory: Path) -> Run:
    results = sorted(_listed(directory, _RESULTS), key=lambda p: p.name)
    if not results:
        below = [d for d in sorted(directory.iterdir()) if d.is_dir() and _listed(d, _RESULTS)]
        if len(below) == 1:
            return _run_in(below[0])
        if below:
            raise BadInputError(f"{directory}: holds several models' runs ({', '.join(d.name for d in below)}); "
                                "give one of those directories")
        samples = _listed(directory, _SAMPLES)
        if not samples:
            raise BadInputError(f"{directory}: no lm-eval results_<date>.json or samples_<task>_<date>.jsonl here; "
                                "run lm_eval with --log_samples --output_path and give that directory")
        dates = sorted({_matched(_SAMPLES, p)["date"] for p in samples})
        return Run(_samples_of(directory, dates[-1]), "", None)
    latest = results[-1]
    date = _matched(_RESULTS, latest)["date"]
    files = _samples_of(directory, date)
    if not files:
        raise BadInputError(f"{latest}: no samples_<task>_{date}.jsonl beside it; the run was not logged with "
                            "--log_samples")
    return Run(files, "", latest)


def _listed(directory: Path, pattern: re.Pattern[str]) -> list[Path]:
    found = []
    for entry in directory.iterdir():
        if pattern.match(entry.name) and entry.is_file():
            found.append(entry)
            if len(found) > MAX_FILES:
                raise BadInputError(f"{directory}: over {MAX_FILES} lm-eval files; give one samples file")
    return found


def _matched(pattern: re.Pattern[str], path: Path) -> re.Match[str]:
    match = pattern.match(path.name)
    assert match is not None  # listed by the same pattern
    return match


def _samples_of(directory: Path, date: str) -> tuple[SamplesFile, ...]:
    files = [SamplesFile(p, m["task"], m["date"]) for p in _listed(directory, _SAMPLES)
             if (m := _matched(_SAMPLES, p))["date"] == date]
    return tuple(sorted(files, key=lambda f: f.task))


def _model(results: Path) -> str:
    """The model lm-eval names in its results: ``model_name`` (the model argument), else the model type."""
    if results.stat().st_size > MAX_RESULTS_BYTES:
        raise BadInputError(f"{results}: {results.stat().st_size} bytes, over the {MAX_RESULTS_BYTES} read")
    try:
        doc = json.loads(results.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInputError(f"{results}: not lm-eval's results JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadInputError(f"{results}: not lm-eval's results JSON (a {type(doc).__name__}, not an object)")
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    name = doc.get("model_name") or (config or {}).get("model") or ""
    return str(name)


def run_rows(run: Run, *, limit: int | None = None, usage: Path | None = None,
             filter_name: str = "") -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(sample, record row) for each record of the run: file by file in task order, line by line; with ``usage``
    (the ``usage_log`` of ``--model evalsi``), each record carries its model call's tokens, cost and latency.

    A task with several filters logs each document once per filter: ``filter_name`` picks one; without it, a file
    with more than one is refused (their records would share ids)."""
    calls = read_usage(usage) if usage is not None else {}
    prefix = len({f.task for f in run.files}) > 1
    count = 0
    filters: set[str] = set()
    for samples in run.files:
        context = SampleContext(task=samples.task, model=run.model, prefix_ids=prefix)
        first = ""
        for where, sample in _lines(samples.path):
            rows = sample_rows(sample, context, where)  # checks the line first
            name = str(sample.get("filter", ""))
            filters.add(name)
            if filter_name and name != filter_name:
                continue
            first = first or name
            if name != first:
                raise BadInputError(f"{where}: the task {samples.task} logs several filters ({first}, {name}); "
                                    "choose one with --filter")
            for row in rows:
                if limit is not None and count >= limit:
                    return
                spent = calls.get((samples.task, sample["doc_id"]))
                if spent:
                    row["usage"] = spent.pop(0)
                count += 1
                yield sample, row
    if filter_name and filter_name not in filters:
        raise BadInputError(f"--filter {filter_name!r}: no sample of this run has it; its filters: "
                            f"{', '.join(sorted(filters)) or 'none'}")


def import_samples(run: Run, out: IO[str], *, limit: int | None = None, usage: Path | None = None,
                   filter_name: str = "") -> ImportSummary:
    """Write the run's record rows to ``out`` as JSONL; what was read, for the caller to say."""
    samples = records = with_usage = 0
    last: dict[str, Any] | None = None
    for sample, row in run_rows(run, limit=limit, usage=usage, filter_name=filter_name):
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        records += 1
        with_usage += "usage" in row
        samples += sample is not last  # a sample's trials come together
        last = sample
    return ImportSummary(run, samples, records, with_usage)


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    with path.open("rb") as stream:
        number = 0
        while line := stream.readline(MAX_JSONL_LINE_BYTES + 1):
            number += 1
            where = f"{path}:{number}"
            if len(line) > MAX_JSONL_LINE_BYTES:
                raise BadInputError(f"{where}: a line over {MAX_JSONL_LINE_BYTES} bytes; not an lm-eval sample")
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadInputError(f"{where}: not JSON: {exc}") from None
            if not isinstance(sample, dict):
                raise BadInputError(f"{where}: a {type(sample).__name__}, not an lm-eval sample object")
            yield where, sample


def read_usage(path: Path) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The usage log's calls by (task, doc_id), in the order they were written: a document asked k times (its
    repeats) has k calls, given to its trials in that order (lm-eval asks the same request k times; which answer
    came back with which call is not kept)."""
    calls: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for number, (where, call) in enumerate(_lines(path), start=1):
        if number > MAX_USAGE_LINES:
            raise BadInputError(f"{path}: over {MAX_USAGE_LINES} calls")
        try:
            key = (str(call["task"]), int(call["doc_id"]))
            inputs, outputs = int(call["input_tokens"]), int(call["output_tokens"])
        except (KeyError, TypeError, ValueError):
            raise BadInputError(f"{where}: not a usage line of --model evalsi (task, doc_id, input_tokens, "
                                "output_tokens)") from None
        spent: dict[str, Any] = {"input_tokens": inputs, "output_tokens": outputs, "total_tokens": inputs + outputs}
        for name in ("cost_usd", "latency_s"):
            if isinstance(call.get(name), int | float) and not isinstance(call.get(name), bool):
                spent[name] = float(call[name])
        calls[key].append(spent)
    return calls
