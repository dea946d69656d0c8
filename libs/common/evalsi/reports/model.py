"""What a report says, built from a run document (its summaries, gates, manifest and per-record results), the
records it graded when they are at hand, and an optional baseline run to compare with.

Pure: no I/O, no formatting beyond the display strings every renderer shares, so the Markdown and the HTML say the
same numbers. The comparison is ``evalsi compare``'s own (``runs.compare.compare_runs``, baseline as A, candidate
as B); nothing here computes a second one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from google.protobuf import json_format

from evalsi.reports.content import content_text, trajectory_text
from evalsi.runs.compare import compare_runs, values_by_metric
from evalsi.runs.failures import ErrorNote, error_breakdown, error_notes
from evalsi.runs.results import _fmt
from evalsi.stats.defaults import DEFAULT_ADJUSTMENT, DEFAULT_CONFIDENCE
from evalsi.v1alpha1.record_pb2 import IsolationLevel, Record
from evalsi.v1alpha1.run_pb2 import Comparison, Run, RunState
from evalsi.v1alpha1.score_pb2 import (
    OUTCOME_ERROR,
    OUTCOME_SCORED,
    VALUE_KIND_BOOLEAN,
    VALUE_KIND_LABEL,
    VALUE_KIND_NUMBER,
    EvaluationResult,
    MetricSummary,
    Outcome,
    Score,
)

HISTOGRAM_BINS = 20  # at most; fewer for few values (the square root of n), so small runs are not all gaps
TEXT_CHARS = 4000  # of one input, output, reference or explanation in a record row; the rest is cut with a mark
VERDICT_TEXT = {"no significant difference": "no significant change"}

RowKey = tuple[str, int]  # (record id, trial): one row of the record table
_Values = dict[str, dict[RowKey, float]]  # values_by_metric: metric -> (record id, trial) -> value

_KIND_NAMES = {VALUE_KIND_NUMBER: "number", VALUE_KIND_BOOLEAN: "boolean", VALUE_KIND_LABEL: "label"}


@dataclass(frozen=True)
class MetricRow:
    """One metric of a run: n, mean and interval as its summary has them."""

    metric: str
    kind: str  # number | boolean | label | structured
    n: int
    mean: float | None
    low: float | None
    high: float | None
    skipped: int
    errors: str  # error_breakdown: "0", "5 (3 infra, 2 evaluator)"
    labels: tuple[tuple[str, float], ...] = ()  # label metrics: (label, share), most frequent first


@dataclass(frozen=True)
class Bin:
    low: float
    high: float
    count: int
    label: str  # "fail"/"pass" for pass/fail metrics, the range otherwise


@dataclass(frozen=True)
class Histogram:
    metric: str
    bins: tuple[Bin, ...]


@dataclass(frozen=True)
class Gate:
    expression: str
    passed: bool
    message: str


@dataclass(frozen=True)
class BudgetUse:
    """One budget line: what the run used and its limit (None where not set or not known)."""

    name: str  # cost (USD) | tokens | wall clock (s)
    used: float | None
    limit: float | None


@dataclass(frozen=True)
class ScoreCell:
    name: str
    value: str
    explanation: str


@dataclass(frozen=True)
class ResultCell:
    """One evaluator's result on one record: its outcome, scores and reason (of a skip or an error)."""

    evaluator: str
    outcome: str  # scored | skipped | error | cancelled
    scores: tuple[ScoreCell, ...]
    reason: str


@dataclass(frozen=True)
class RecordRow:
    record_id: str
    trial: int
    input: str | None  # None: the record was not at hand (no --data); "" is an empty field
    output: str | None
    reference: str | None
    results: tuple[ResultCell, ...]
    trajectory: str = ""  # an agent record's steps (content.trajectory_text); empty when it has none


@dataclass(frozen=True)
class Delta:
    """One metric of ``evalsi compare``: baseline (A), candidate (B), their paired difference and the verdict."""

    metric: str
    n_pairs: int
    baseline: float | None
    candidate: float | None
    diff: float | None
    low: float | None
    high: float | None
    test: str
    p_value: float | None
    p_adjusted: float | None
    verdict: str  # better | worse | no significant change | insufficient data

    @property
    def marker(self) -> str:
        return {"better": "▲", "worse": "▼"}.get(self.verdict, "")


@dataclass(frozen=True)
class Flip:
    """A record whose outcome changed from the baseline to the candidate: a pass/fail value or a result's outcome."""

    record_id: str
    trial: int
    metric: str  # the pass/fail metric, or the evaluator whose outcome changed
    before: str
    after: str
    improved: bool


@dataclass(frozen=True)
class ComparisonView:
    baseline_id: str
    baseline_name: str
    adjust: str
    level: float
    deltas: tuple[Delta, ...]
    flips: tuple[Flip, ...]  # at most max_records, the ones that got worse first
    flips_total: int
    flips_worse: int


@dataclass(frozen=True)
class Report:
    title: str
    identity: tuple[tuple[str, str], ...]  # (label, value) of the run: id, name, dataset, target, ...
    manifest: tuple[tuple[str, str], ...]  # (label, value): everything the run pinned, and what it could not
    state: str
    level: float
    interval_methods: tuple[str, ...]
    metrics: tuple[MetricRow, ...]
    histograms: tuple[Histogram, ...]
    gates: tuple[Gate, ...]
    budget: tuple[BudgetUse, ...]
    errors: tuple[ErrorNote, ...]
    records: tuple[RecordRow, ...]  # at most max_records, failing records first
    records_total: int
    records_at_hand: bool  # whether input, output and reference could be shown
    failures: tuple[RecordRow, ...] = field(default=())  # records with a failed or errored check, at most max_records
    failures_total: int = 0
    comparison: ComparisonView | None = None
    notes: tuple[str, ...] = ()

    @property
    def gates_failed(self) -> int:
        return sum(not gate.passed for gate in self.gates)


def build_report(
    run: Run,
    *,
    baseline: Run | None = None,
    records: Mapping[RowKey, Record] | None = None,
    title: str = "",
    max_records: int = 100,
    confidence: float = DEFAULT_CONFIDENCE,
    adjust: str = DEFAULT_ADJUSTMENT,
    notes: Sequence[str] = (),
) -> Report:
    """The report of ``run`` (with its results), compared with ``baseline`` when given. ``records`` ((record id,
    trial) to the record as graded) supplies input, output, reference and trajectory; ``max_records`` bounds the
    record rows kept (and the failures and flips listed)."""
    grouped = _results_by_record(run)
    shown, failing = _rows_kept(grouped, max_records)
    rows = {key: _record_row(key, grouped[key], records) for key in [*shown, *failing[:max_records]]}
    values = values_by_metric(run)  # once: the histograms and the flips read it
    level = run.summaries[0].ci.level if run.summaries else confidence
    return Report(
        title=title or _default_title(run),
        identity=_identity(run),
        manifest=_manifest(run),
        state=RunState.Name(run.state).removeprefix("RUN_STATE_").lower(),
        level=level or confidence,
        interval_methods=tuple(sorted({s.ci.method for s in run.summaries if s.ci.method})),
        metrics=tuple(_metric_row(s) for s in run.summaries),
        histograms=_histograms(run, values),
        gates=tuple(Gate(g.expression, g.passed, g.message) for g in run.gates),
        budget=_budget(run),
        errors=tuple(error_notes(run.summaries)),
        records=tuple(rows[key] for key in shown),
        records_total=len(grouped),
        records_at_hand=records is not None,
        failures=tuple(rows[key] for key in failing[:max_records]),
        failures_total=len(failing),
        comparison=None if baseline is None else _comparison(baseline, run, values, confidence, adjust, max_records),
        notes=tuple(notes),
    )


def _default_title(run: Run) -> str:
    return f"Evals.si report: {run.name or run.id or 'evaluation'}"


def _identity(run: Run) -> tuple[tuple[str, str], ...]:
    manifest = run.manifest
    pairs = [("run", run.id), ("name", run.name), ("project", run.project)]
    if run.HasField("create_time"):
        pairs.append(("created", run.create_time.ToJsonString()))
    if manifest.dataset:
        pairs.append(("dataset", f"{manifest.dataset} @ {manifest.dataset_version[:12]}"))
    pairs.append(("target", manifest.target))
    evaluators = ", ".join(f"{e.alias} = {e.ref}" for e in manifest.evaluators)
    pairs.append(("evaluators", evaluators))
    pairs.append(("judges", ", ".join(f"{name}: {model}" for name, model in sorted(manifest.judges.items()))))
    pairs.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(run.labels.items()))))
    pairs.append(("evalsi", manifest.evalsi_version))
    pairs.append(("spec hash", manifest.spec_hash[:12]))
    if manifest.unpinned:
        pairs.append(("not reproducible", "unpinned: " + ", ".join(manifest.unpinned)))
    pairs.append(("created by", run.created_by))
    pairs.append(("message", run.message))
    return tuple((label, value) for label, value in pairs if value)


def _manifest(run: Run) -> tuple[tuple[str, str], ...]:
    """The run manifest in full: what reproduces the run, and what could not be pinned."""
    manifest = run.manifest
    pairs = [("spec hash", manifest.spec_hash), ("dataset", manifest.dataset),
             ("dataset version", manifest.dataset_version), ("target", manifest.target)]
    for evaluator in manifest.evaluators:
        params = json_format.MessageToDict(evaluator.params) if evaluator.HasField("params") else {}
        details = [evaluator.ref, *([json.dumps(params, sort_keys=True)] if params else []),
                   *([f"judge {evaluator.judge}"] if evaluator.judge else []),
                   *([f"template {evaluator.template_hash[:12]}"] if evaluator.template_hash else [])]
        pairs.append((f"evaluator {evaluator.alias}", " · ".join(details)))
    pairs += [(f"judge {name}", model) for name, model in sorted(manifest.judges.items())]
    pairs.append(("seed", str(manifest.seed) if manifest.seed else ""))
    pairs += [(f"version of {name}", version) for name, version in sorted(manifest.package_versions.items())]
    pairs.append(("not pinned", ", ".join(manifest.unpinned)))
    for report in manifest.isolation:
        achieved = IsolationLevel.Name(report.achieved).removeprefix("ISOLATION_LEVEL_").lower()
        pairs.append((f"isolation ({report.driver or 'none'})",
                      f"{achieved}, {report.enforcement or 'unknown'} enforcement"
                      + (f"; not enforced: {', '.join(report.not_enforced)}" if report.not_enforced else "")))
    if manifest.HasField("created"):
        pairs.append(("manifest created", manifest.created.ToJsonString()))
    return tuple((label, value) for label, value in pairs if value)


def _metric_row(summary: MetricSummary) -> MetricRow:
    ci = summary.ci
    labels = sorted(((label, entry.share) for label, entry in summary.labels.items()), key=lambda kv: -kv[1])
    return MetricRow(
        metric=summary.metric,
        kind=_KIND_NAMES.get(summary.kind, "structured"),
        n=summary.n,
        mean=summary.mean if summary.HasField("mean") else None,
        low=ci.low if ci.HasField("low") else None,
        high=ci.high if ci.HasField("high") else None,
        skipped=summary.skipped,
        errors=error_breakdown(summary),
        labels=tuple(labels),
    )


def _histograms(run: Run, values: _Values) -> tuple[Histogram, ...]:
    out = []
    for summary in run.summaries:
        per_record = values.get(summary.metric)
        if not per_record or summary.kind not in (VALUE_KIND_NUMBER, VALUE_KIND_BOOLEAN) or summary.k:
            continue
        x = np.fromiter(per_record.values(), dtype=np.float64, count=len(per_record))
        out.append(Histogram(summary.metric, histogram_bins(x, binary=summary.kind == VALUE_KIND_BOOLEAN)))
    return tuple(out)


def histogram_bins(x: np.ndarray, *, binary: bool) -> tuple[Bin, ...]:
    """Pass/fail as two bars; numbers in equal-width bins over their range (one bin when all are equal)."""
    if binary:
        passed = int(np.count_nonzero(x))
        return (Bin(0.0, 0.0, x.size - passed, "fail"), Bin(1.0, 1.0, passed, "pass"))
    low, high = float(x.min()), float(x.max())
    if low == high:
        return (Bin(low, high, int(x.size), f"{low:.3g}"),)
    count = int(min(HISTOGRAM_BINS, max(2, np.ceil(np.sqrt(x.size)))))
    counts, edges = np.histogram(x, bins=count, range=(low, high))
    return tuple(
        Bin(float(edges[i]), float(edges[i + 1]), int(counts[i]), f"{edges[i]:.3g} – {edges[i + 1]:.3g}")
        for i in range(count)
    )


def _budget(run: Run) -> tuple[BudgetUse, ...]:
    budget, usage = run.spec.budget, run.progress.usage
    cost = usage.cost_usd if usage.HasField("cost_usd") else None
    tokens = float(usage.total_tokens or usage.input_tokens + usage.output_tokens) or None
    wall = None
    if run.HasField("start_time") and run.HasField("end_time"):
        wall = (run.end_time.ToNanoseconds() - run.start_time.ToNanoseconds()) / 1e9
    limit_wall = budget.wall_clock.ToNanoseconds() / 1e9 if budget.HasField("wall_clock") else None
    lines = [
        BudgetUse("cost (USD)", cost, budget.usd or None),
        BudgetUse("tokens", tokens, float(budget.tokens) or None),
        BudgetUse("wall clock (s)", wall, limit_wall or None),
    ]
    return tuple(line for line in lines if line.used is not None or line.limit is not None)


def outcome_name(outcome: int) -> str:
    return Outcome.Name(outcome).removeprefix("OUTCOME_").lower()


def score_value(score: Score) -> str:
    """A score's value as a reader sees it: pass/fail, a number, a label or the JSON of a structured value."""
    kind = score.WhichOneof("value")
    if kind == "passed":
        return "pass" if score.passed else "fail"
    if kind == "number":
        return _fmt(score.number)
    if kind == "label":
        return score.label
    if kind == "structured":
        return json_format.MessageToJson(score.structured, indent=None)
    return ""


def clip(text: str, limit: int = TEXT_CHARS) -> str:
    """At most ``limit`` characters, the cut marked with how many were left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


def result_failed(result: EvaluationResult) -> bool:
    """Whether a result is an error or holds a failed pass/fail score: what a reviewer looks at first."""
    return result.outcome == OUTCOME_ERROR or any(
        score.WhichOneof("value") == "passed" and not score.passed for score in result.scores
    )


def rows_kept(run: Run, max_records: int) -> list[RowKey]:
    """The (record id, trial) rows a report of ``run`` shows or lists as failures: whose records it needs."""
    shown, failing = _rows_kept(_results_by_record(run), max_records)
    return list(dict.fromkeys([*shown, *failing[:max_records]]))


def _rows_kept(grouped: Mapping[RowKey, list[EvaluationResult]], max_records: int) -> tuple[list[RowKey], list[RowKey]]:
    """The rows shown (failing ones first, at most ``max_records``) and every failing row, in the run's order."""
    failing = [key for key, results in grouped.items() if any(map(result_failed, results))]
    failing_set = set(failing)
    shown = (failing + [key for key in grouped if key not in failing_set])[:max_records]
    return shown, failing


def _results_by_record(run: Run) -> dict[RowKey, list[EvaluationResult]]:
    """A run's results by (record id, trial), in the order the run has them."""
    grouped: dict[RowKey, list[EvaluationResult]] = defaultdict(list)
    for result in run.results:
        grouped[(result.record_id, result.trial)].append(result)
    return grouped


def _record_row(key: RowKey, results: list[EvaluationResult], records: Mapping[RowKey, Record] | None) -> RecordRow:
    record_id, trial = key
    record = None if records is None else records.get(key)
    cells = tuple(
        ResultCell(
            evaluator=r.evaluator,
            outcome=outcome_name(r.outcome),
            scores=tuple(ScoreCell(s.name, score_value(s), clip(s.explanation)) for s in r.scores),
            reason=clip(r.reason),
        )
        for r in results
    )
    return RecordRow(
        record_id=record_id,
        trial=trial,
        input=None if record is None else clip(content_text(record.input)),
        output=None if record is None else clip(content_text(record.output)),
        reference=None if record is None else clip(content_text(record.reference)),
        results=cells,
        trajectory="" if record is None else clip(trajectory_text(record.trajectory)),
    )


def _comparison(baseline: Run, candidate: Run, values: _Values, confidence: float, adjust: str,
                max_records: int) -> ComparisonView:
    compared = compare_runs(baseline, candidate, confidence=confidence, adjust=adjust)
    flips = _flips(baseline, candidate, values)
    flips.sort(key=lambda f: f.improved)  # stable: the ones that got worse first, each part in record order
    return ComparisonView(
        baseline_id=baseline.id,
        baseline_name=baseline.name,
        adjust=compared.adjust,
        level=confidence,
        deltas=deltas_of(compared),
        flips=tuple(flips[:max_records]),
        flips_total=len(flips),
        flips_worse=sum(not f.improved for f in flips),
    )


def deltas_of(compared: Comparison) -> tuple[Delta, ...]:
    """``evalsi compare``'s metrics as report rows (A is the baseline, B the candidate)."""

    def optional(message: object, name: str) -> float | None:
        return getattr(message, name) if message.HasField(name) else None  # type: ignore[attr-defined]

    return tuple(
        Delta(
            metric=m.metric,
            n_pairs=m.n_pairs,
            baseline=optional(m, "mean_a"),
            candidate=optional(m, "mean_b"),
            diff=optional(m, "diff"),
            low=optional(m.ci, "low"),
            high=optional(m.ci, "high"),
            test=m.test,
            p_value=optional(m, "p_value"),
            p_adjusted=optional(m, "p_value_adjusted"),
            verdict=VERDICT_TEXT.get(m.verdict, m.verdict),
        )
        for m in compared.metrics
    )


def _flips(baseline: Run, candidate: Run, after_values: _Values) -> list[Flip]:
    """Pass/fail values that changed on a (record, trial) both runs scored, then results whose outcome changed
    (scored in one run, an error or a skip in the other), in record order."""
    flips: list[Flip] = []
    before_values = values_by_metric(baseline)
    for summary in candidate.summaries:
        if summary.kind != VALUE_KIND_BOOLEAN or summary.k:
            continue
        before, after = before_values.get(summary.metric, {}), after_values.get(summary.metric, {})
        for key in sorted(set(before) & set(after)):
            if before[key] != after[key]:
                improved = (after[key] > before[key]) == summary.higher_is_better
                flips.append(Flip(key[0], key[1], summary.metric, _pass(before[key]), _pass(after[key]), improved))
    outcomes_before = {(r.record_id, r.trial, r.evaluator): r.outcome for r in baseline.results}
    for result in candidate.results:
        was = outcomes_before.get((result.record_id, result.trial, result.evaluator))
        if was is not None and was != result.outcome:
            flips.append(
                Flip(result.record_id, result.trial, result.evaluator, outcome_name(was), outcome_name(result.outcome),
                     result.outcome == OUTCOME_SCORED)
            )
    flips.sort(key=lambda f: (f.record_id, f.trial, f.metric))
    return flips


def _pass(value: float) -> str:
    return "pass" if value else "fail"
