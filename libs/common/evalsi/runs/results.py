"""The result of an evaluation: a Run document (per-record results, summaries, manifest) and its views.

Saved as one JSON document in the protobuf JSON mapping of ``evalsi.v1alpha1.Run`` (DESIGN.md), so
``evalsi compare A.json B.json`` and the server read the same format. The per-record results of an embedded run
beyond its memory budget are not in the ``Run`` message but in a local store (``runs.stored_results``): they are
read from it a page at a time, and saved documents are written the same way, identical to the in-memory ones.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from google.protobuf import json_format

from evalsi.errors import BadInputError
from evalsi.runs.failures import error_breakdown, error_notes, skip_notes
from evalsi.stats.defaults import DEFAULT_CONFIDENCE
from evalsi.v1alpha1.run_pb2 import Run
from evalsi.v1alpha1.score_pb2 import (
    VALUE_KIND_LABEL,
    VALUE_KIND_STRUCTURED,
    EvaluationResult,
    MetricSummary,
    Outcome,
)

if TYPE_CHECKING:
    from evalsi.runs.stored_results import StoredResults

TableFormat = Literal["table", "md"]
_RESULTS_FIELD = Run.DESCRIPTOR.fields_by_name["results"]


def _fmt(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.3f}"


def summary_row(summary: MetricSummary) -> dict[str, str]:
    """One metric as display strings: metric, n, mean, CI, skipped, errors."""
    mean = summary.mean if summary.HasField("mean") else None
    if summary.kind == VALUE_KIND_STRUCTURED and not summary.n:  # a matrix, a report: nothing to average
        return {"metric": summary.metric, "n": "—", "mean": "see results (structured)", "ci": "",
                "skipped": str(summary.skipped), "errors": error_breakdown(summary)}
    if summary.kind == VALUE_KIND_LABEL and summary.labels:
        top = sorted(summary.labels.items(), key=lambda kv: -kv[1].count)[:3]
        mean_text = ", ".join(f"{label} {entry.share:.0%}" for label, entry in top)
        ci_text = ""
    else:
        mean_text = _fmt(mean)
        ci = summary.ci
        ci_text = f"[{_fmt(ci.low)}, {_fmt(ci.high)}]" if ci.HasField("low") and ci.HasField("high") else "—"
    return {
        "metric": summary.metric,
        "n": str(summary.n),
        "mean": mean_text,
        "ci": ci_text,
        "skipped": str(summary.skipped),
        "errors": error_breakdown(summary),
    }


class _StreamedList(list[Any]):
    """A JSON array whose items are made as the encoder reaches them: ``json``'s pure-Python encoder (used with
    ``iterencode``) asks a list only whether it is empty and for its items, so a run's results are encoded a page
    at a time instead of as one list of dicts."""

    def __init__(self, items: Iterable[Any], count: int) -> None:
        super().__init__()
        self._items, self._count = items, count

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)


class EvaluationResults:
    """What ``evalsi.evaluate`` returns. Results kept in a local store (``stored``) are read back in pages; the
    store's temporary directory goes with :meth:`close` (or a ``with`` block, or when this object is collected)."""

    def __init__(self, run: Run, *, stored: StoredResults | None = None) -> None:
        self.run = run
        self.stored = stored

    def __enter__(self) -> EvaluationResults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the local store of the results (its directory is removed unless it was asked for)."""
        if self.stored is not None:
            self.stored.close()

    def __len__(self) -> int:
        return len(self.stored) if self.stored is not None else len(self.run.results)

    @property
    def summaries(self) -> dict[str, MetricSummary]:
        """Metric name to its summary, in evaluator order."""
        return {s.metric: s for s in self.run.summaries}

    @property
    def results(self) -> list[EvaluationResult]:
        """Every result in one list (iterate instead to hold a page at a time)."""
        return list(self)

    @property
    def confidence(self) -> float:
        return self.run.summaries[0].ci.level if self.run.summaries else DEFAULT_CONFIDENCE

    def metric(self, name: str) -> MetricSummary:
        try:
            return self.summaries[name]
        except KeyError:
            known = ", ".join(self.summaries) or "none"
            raise KeyError(f"no metric {name!r}; metrics: {known}") from None

    def __iter__(self) -> Iterator[EvaluationResult]:
        return iter(self.stored) if self.stored is not None else iter(self.run.results)

    def __repr__(self) -> str:
        return f"EvaluationResults({len(self)} results, metrics: {', '.join(self.summaries)})"

    def table(self, format: TableFormat = "table") -> str:
        """The metric table: n, mean, the interval, skipped and errors per metric; under it each evaluator's errors
        by kind with the first cause, and why an evaluator that skipped everything did."""
        sections = [  # (heading, its Markdown, notes)
            ("errors (excluded from the metrics)", "**Errors** (excluded from the metrics)",
             [note.text() for note in error_notes(self.run.summaries)]),
            ("measured nothing", "**Measured nothing**", skip_notes(self.run.summaries, self)),
        ]
        text = self._table(format)
        for heading, markdown, notes in sections:
            if notes and format == "md":
                text += "\n\n" + "\n".join([markdown, "", *(f"- {note}" for note in notes)])
            elif notes:
                text += "\n" + "\n".join([f"{heading}:", *(f"  {note}" for note in notes)])
        return text

    def _table(self, format: TableFormat) -> str:
        level = f"{self.confidence:.0%} CI"
        headers = ["metric", "n", "mean", level, "skipped", "errors"]
        rows = [list(summary_row(s).values()) for s in self.run.summaries]
        if format == "md":
            lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(["---"] + ["---:"] * 5) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            return "\n".join(lines)
        from rich.console import Console
        from rich.table import Table

        table = Table(
            title=self._title(),
            title_justify="left",
            header_style="bold",
            caption=self._caption(),
            caption_justify="left",
        )
        table.add_column(headers[0], style="cyan", no_wrap=True)
        for header in headers[1:]:
            table.add_column(header, justify="right")
        for row in rows:
            table.add_row(*row)
        buffer = io.StringIO()
        Console(
            file=buffer, width=max(100, 20 + max((len(r[0]) for r in rows), default=10)), force_terminal=False
        ).print(table)
        return buffer.getvalue().rstrip("\n")

    def _caption(self) -> str:
        """How the intervals were computed, so a reader knows what the brackets mean."""
        names = {
            "wilson": "Wilson",
            "korn-graubard": "Clopper-Pearson at the effective size",
            "t": "Student-t",
            "cluster-t": "cluster-robust t",
            "bootstrap": "bootstrap",
            "bootstrap-cluster": "cluster bootstrap",
        }
        methods = sorted({names.get(s.ci.method, s.ci.method) for s in self.run.summaries if s.ci.method})
        caption = f"intervals: {', '.join(methods)}" if methods else ""
        clusters = max((s.clusters for s in self.run.summaries), default=0)
        cluster_by = self.run.spec.summary.cluster_by
        if clusters:
            caption += f" ({clusters} clusters{' by ' + cluster_by if cluster_by else ''})"
        return caption

    def _title(self) -> str:
        manifest = self.run.manifest
        parts = [self.run.name or "evaluation"]
        if manifest.dataset:
            parts.append(f"{manifest.dataset} @ {manifest.dataset_version[:12]}")
        return " · ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The document as one dict, every result in it."""
        stored = self.stored
        if stored is None:
            return json_format.MessageToDict(self.run)
        return self._document_with(lambda: [json_format.MessageToDict(r) for r in stored])

    def _document_with(self, results: Any) -> dict[str, Any]:
        """The run's JSON mapping with ``results()`` as its results, where the mapping puts them (fields in number
        order), or none when there are none (as the mapping leaves an empty list out)."""
        document = json_format.MessageToDict(self.run)
        if self.stored is None or not len(self.stored):
            return document
        numbers = {f.json_name: f.number for f in Run.DESCRIPTOR.fields}
        ordered: dict[str, Any] = {}
        for key, value in document.items():
            if numbers[key] > _RESULTS_FIELD.number and _RESULTS_FIELD.json_name not in ordered:
                ordered[_RESULTS_FIELD.json_name] = results()
            ordered[key] = value
        if _RESULTS_FIELD.json_name not in ordered:
            ordered[_RESULTS_FIELD.json_name] = results()
        return ordered

    def _json_chunks(self, indent: int | None) -> Iterator[str]:
        stored = self.stored
        if stored is None:
            return iter((json.dumps(self.to_dict(), indent=indent, ensure_ascii=False),))
        pages = (json_format.MessageToDict(r) for r in stored)
        document = self._document_with(lambda: _StreamedList(pages, len(stored)))
        # iterencode is the pure-Python encoder (the C one would read the streamed list's empty storage).
        return json.JSONEncoder(indent=indent, ensure_ascii=False).iterencode(document)

    def to_json(self, indent: int | None = 2) -> str:
        return "".join(self._json_chunks(indent))

    def write_json(self, out: TextIO, indent: int | None = 2) -> None:
        """``to_json`` and a newline, written as it is made: results in a local store go a page at a time."""
        for chunk in self._json_chunks(indent):
            out.write(chunk)
        out.write("\n")

    def save(self, path: str | Path) -> Path:
        """Write the document as JSON (``write_json``)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as out:
            self.write_json(out)
        return target

    @classmethod
    def load(cls, path: str | Path) -> EvaluationResults:
        source = Path(path)
        try:
            document = json.loads(source.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInputError(f"{source}: no such file") from None
        except json.JSONDecodeError as exc:
            raise BadInputError(f"{source}:{exc.lineno}: not a saved result (invalid JSON: {exc.msg})") from None
        try:
            run = json_format.ParseDict(document, Run())
        except json_format.ParseError as exc:
            raise BadInputError(f"{source}: not a saved result (an evalsi.v1alpha1.Run document): {exc}") from None
        return cls(run)

    def to_pandas(self) -> Any:
        """One row per (record, trial, evaluator, score); needs pandas (pip install 'evalsi[pandas]')."""
        try:
            import pandas as pd
        except ImportError:
            raise BadInputError("to_pandas() needs pandas: pip install 'evalsi[pandas]'") from None
        rows: list[dict[str, Any]] = []
        for result in self:
            base = {
                "record_id": result.record_id,
                "trial": result.trial,
                "evaluator": result.evaluator,
                "evaluator_ref": result.evaluator_ref,
                "outcome": Outcome.Name(result.outcome).removeprefix("OUTCOME_").lower(),
                "reason": result.reason,
            }
            if not result.scores:
                rows.append({**base, "score": None, "value": None, "explanation": ""})
            for score in result.scores:
                kind = score.WhichOneof("value")
                value = getattr(score, kind) if kind and kind != "structured" else None
                rows.append({**base, "score": score.name, "value": value, "explanation": score.explanation})
        return pd.DataFrame(rows)
