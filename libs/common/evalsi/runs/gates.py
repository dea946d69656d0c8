"""Gates: CEL expressions over a run's metric summaries, such as ``metric('exact-match').mean >= 0.8``.

``metric(name)`` is the summary of one metric (DESIGN.md names: the alias, ``alias.output``). Its fields:
``mean``, ``std``, ``n``, ``ci_low``, ``ci_high``, ``skipped``, ``errors``, ``infra_errors``, ``cancelled``;
its methods ``passAtK(k)`` and ``passHatK(k)`` read the summaries ``<metric>.pass@k`` and ``<metric>.pass^k``.
``n``, ``skipped``, ``errors``, ``infra_errors`` and ``cancelled`` are integers; the others doubles.

A gate is type-checked when it is compiled (``compile_gate``, ``gate_problems``: evalsi.cel over these declared
types), so a mistake is refused before the run is spent; integers compare with doubles (``n >= 0.5``) at check
and evaluation time alike.

A gate never passes on something it could not read: a missing metric, or a figure that is undefined
(the mean of no scored values, an interval from one value), fails the gate with a message saying why,
whatever the rest of the expression says (so ``metric('typo').mean >= 0.8 || true`` fails too). A failed
gate's message shows the values it read: ``metric('exact-match').mean = 0.5667 < 0.8``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

from evalsi.cel import (
    DOUBLE,
    INT,
    STRING,
    Declarations,
    Function,
    calls,
    check_expression,
    describe_problems,
    object_type,
    parse_expression,
    program,
    require_bool,
)
from evalsi.errors import BadInputError
from evalsi.limits import MAX_EXPRESSION_CHARS
from evalsi.v1alpha1.run_pb2 import GateResult
from evalsi.v1alpha1.score_pb2 import MetricSummary

FIELDS = ("mean", "std", "n", "ci_low", "ci_high", "skipped", "errors", "infra_errors", "cancelled")
METHODS = {"passAtK": "pass@", "passHatK": "pass^"}
_COUNTS = frozenset({"n", "skipped", "errors", "infra_errors", "cancelled"})
_COMPARISON = re.compile(
    r"^\s*(?P<lhs>.+?)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<rhs>-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
_NEGATED = {">=": "<", "<=": ">", ">": "<=", "<": ">=", "==": "!=", "!=": "=="}

# What a gate may name, for the type check: ``metric(name)`` and its typed fields and methods, as evaluated below.
_METRIC = object_type(
    "metric",
    {name: INT if name in _COUNTS else DOUBLE for name in FIELDS},
    {method: Function((INT,), DOUBLE) for method in METHODS},
)
DECLARATIONS = Declarations(functions={"metric": Function((STRING,), _METRIC)})


@dataclass(frozen=True)
class MetricReference:
    """One ``metric('name')`` (or ``metric('name').method(k)``) written in a gate."""

    metric: str
    member: str = ""
    k: int | None = None

    @property
    def text(self) -> str:
        suffix = f".{self.member}({self.k})" if self.member in METHODS else ""
        return f"metric('{self.metric}'){suffix}"


@dataclass(frozen=True)
class Gate:
    """A compiled gate; compile once (``compile_gate``), evaluate against any set of summaries."""

    expression: str
    references: tuple[MetricReference, ...]
    _program: Any = field(repr=False, compare=False)


def _parse(expression: str) -> tuple[Any, tuple[MetricReference, ...], list[str]]:
    """The parse tree, the metric reads and every problem that needs no knowledge of the run: syntax, types,
    a result that is not true/false, a metric name that is not a quoted string, a bad k."""
    if not isinstance(expression, str) or not expression.strip():
        raise BadInputError("a gate must be a non-empty CEL expression, e.g. metric('exact-match').mean >= 0.8")
    if len(expression) > MAX_EXPRESSION_CHARS:  # refused before parsing: parsing is what a huge one costs
        raise BadInputError(f"{len(expression)} characters exceed the limit of {MAX_EXPRESSION_CHARS} for a gate")
    tree = parse_expression(expression)
    kind, type_problems = check_expression(tree, DECLARATIONS, expression)
    problems = describe_problems(expression, type_problems)
    not_bool = require_bool(kind, expression, "a gate")
    if not_bool and not type_problems:
        problems.append(not_bool)
    references: list[MetricReference] = []
    for call in calls(tree, frozenset({"metric"})):
        base = call.receiver or call
        if not isinstance(base.args[0] if base.args else None, str):
            if call.receiver is None:
                problems.append(f"metric() takes the metric's name as a quoted string, e.g. metric('exact-match') "
                                f"(in {expression.strip()!r} at column {call.column})")
            continue
        name = base.args[0]
        if call.receiver is None:
            references.append(MetricReference(name))
        elif call.name in METHODS:
            k = call.args[0] if len(call.args) == 1 else None
            if isinstance(k, str):
                continue  # a string: the type check said so
            if not isinstance(k, int) or k < 1:
                problems.append(f"metric('{name}').{call.name}: takes a whole number k >= 1, e.g. {call.name}(3)")
                continue
            references.append(MetricReference(name, call.name, k))
    return tree, tuple(dict.fromkeys(references)), problems


def compile_gate(expression: str) -> Gate:
    """Parse and type-check a gate; every problem is in one ``BadInputError``."""
    tree, references, problems = _parse(expression)
    if problems:
        raise BadInputError("; ".join(problems))
    return Gate(expression=expression, references=references, _program=tree)


def gate_problems(
    expression: str, expected: Mapping[str, bool] | None = None, *, trials: int | None = None
) -> list[str]:
    """Every problem of a gate, before a run: syntax, types and, given the metrics a run's evaluators produce,
    the metrics it names.

    ``expected`` maps each metric name to whether it gets pass@k / pass^k; ``trials``, when the spec fixes
    it, bounds k (pass@k needs k trials per sample).
    """
    try:
        _, references, problems = _parse(expression)
    except BadInputError as exc:
        return [str(exc)]
    if expected is None:
        return problems
    for ref in references:
        if ref.member and ref.metric not in expected:
            continue  # reported once, for metric('name') itself
        base, _, suffix = ref.metric.partition(".pass")
        name = ref.metric if ref.metric in expected else base if suffix[:1] in ("@", "^") else ref.metric
        if name not in expected:
            close = _close(name, expected)
            hint = f"; did you mean {close}?" if close else f"; the run's metrics: {', '.join(expected) or 'none'}"
            problems.append(f"metric {ref.metric!r} is not produced by any evaluator of this run{hint}")
            continue
        if ref.member in METHODS:
            if not expected[name]:
                problems.append(
                    f"{ref.text}: pass@k and pass^k exist only for pass/fail metrics of record-scope evaluators"
                )
            elif trials is not None and ref.k is not None and ref.k > trials:
                problems.append(f"{ref.text}: needs at least {ref.k} trials per sample; spec.trials is {trials}")
    return problems


def _close(name: str, names: Iterable[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return close[0] if close else None


# --- evaluation ----------------------------------------------------------------------------------------


class _Reads:
    """What one evaluation read, and what it could not: the material of the message."""

    def __init__(self, summaries: Sequence[MetricSummary]) -> None:
        self.by_name = {s.metric: s for s in summaries}
        self.values: dict[str, float | int] = {}
        self.problems: list[str] = []

    def problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    def metric(self, name: Any) -> Any:
        name = str(name)
        summary = self.by_name.get(name)
        if summary is None:
            self.problem(f"no metric {name!r} in this run{self._known_hint(name)}")
            return celpy.CELEvalError(f"no metric {name!r}")
        return _MetricMap(self, summary)

    def pass_k(self, which: str) -> Any:
        def method(target: Any, k: Any) -> Any:
            if not isinstance(target, _MetricMap):
                return celpy.CELEvalError(f"{which}() applies to metric('name')")
            base = target.summary.metric
            text = f"metric('{base}').{which}({k})"
            name = f"{base}.{METHODS[which]}{int(k)}"
            summary = self.by_name.get(name)
            if summary is None:
                available = sorted(m for m in self.by_name if m.startswith(f"{base}.pass"))
                why = (
                    f"this run has {', '.join(available)}" if available else
                    "pass@k and pass^k need several trials per sample (spec.trials), and exist for pass/fail metrics"
                )
                self.problem(f"{text}: no metric {name!r} ({why})")
                return celpy.CELEvalError(f"no metric {name!r}")
            if not summary.HasField("mean"):
                self.problem(f"{text} is undefined ({_why_undefined(summary)})")
                return celpy.CELEvalError(f"{text} is undefined")
            self.values[text] = summary.mean
            return celtypes.DoubleType(summary.mean)

        return method

    def _known_hint(self, name: str) -> str:
        close = _close(name, self.by_name)
        if close:
            return f"; did you mean {close}?"
        return f"; metrics: {', '.join(self.by_name) or 'none'}"


class _MetricMap(celtypes.MapType):
    """``metric('x')``: reading a field records its value, or the reason it is undefined."""

    def __init__(self, reads: _Reads, summary: MetricSummary) -> None:
        super().__init__({})
        self.reads = reads
        self.summary = summary

    def __getitem__(self, key: Any) -> Any:
        member = str(key)
        text = f"metric('{self.summary.metric}').{member}"
        if member not in FIELDS:
            self.reads.problem(f"{text}: no such field; fields: {', '.join(FIELDS)}")
            raise KeyError(member)
        value = _figure(self.summary, member)
        if value is None:
            self.reads.problem(f"{text} is undefined ({_why_undefined(self.summary, member)})")
            raise KeyError(member)
        self.reads.values[text] = value
        return celtypes.IntType(value) if member in _COUNTS else celtypes.DoubleType(value)

    def __contains__(self, key: object) -> bool:
        return str(key) in FIELDS and _figure(self.summary, str(key)) is not None

    def __repr__(self) -> str:
        return f"metric({self.summary.metric!r})"

    # MapType is a dict, which typeshed declares unhashable (``__hash__: None``); this one is hashed by identity
    # on purpose. CEL never hashes one, but be safe.
    def __hash__(self) -> int:  # type: ignore[override]
        return id(self)


def _figure(summary: MetricSummary, member: str) -> float | int | None:
    if member in _COUNTS:
        return int(getattr(summary, member))
    if member in ("mean", "std"):
        return getattr(summary, member) if summary.HasField(member) else None
    ci = summary.ci
    part = "low" if member == "ci_low" else "high"
    return getattr(ci, part) if ci.HasField(part) else None


def _why_undefined(summary: MetricSummary, member: str = "mean") -> str:
    if summary.n == 0:
        parts = [f"{summary.skipped} skipped", f"{summary.errors} errors"]
        if summary.cancelled:
            parts.append(f"{summary.cancelled} cancelled")
        return f"n = 0: no scored values; {', '.join(parts)}"
    if member in ("std", "ci_low", "ci_high"):
        return f"n = {summary.n}: too few values (or a single cluster) for it"
    return f"n = {summary.n}"


def evaluate_gate(gate: Gate | str, summaries: Sequence[MetricSummary]) -> GateResult:
    """One gate against summaries: passed only when it evaluates to true and read nothing undefined."""
    if isinstance(gate, str):
        try:
            compiled = compile_gate(gate)
        except BadInputError as exc:  # validation refuses these before a run; a gate never raises at its end
            return GateResult(expression=gate, passed=False, message=f"not evaluated: {exc}")
    else:
        compiled = gate
    reads = _Reads(summaries)
    runnable = program(
        compiled._program,
        {"metric": reads.metric, "passAtK": reads.pass_k("passAtK"), "passHatK": reads.pass_k("passHatK")},
    )
    error: Exception | None = None
    try:
        value = runnable.evaluate({})
    except celpy.CELEvalError as exc:
        value, error = None, exc
    except Exception as exc:  # a bug in an expression's types (e.g. comparing an int to a string)
        value, error = None, exc
    if isinstance(value, celpy.CELEvalError):
        value, error = None, value
    result = GateResult(expression=compiled.expression)
    if reads.problems:
        result.passed = False
        result.message = "; ".join(reads.problems)
    elif error is not None:
        result.passed = False
        result.message = f"could not be evaluated: {_error_text(error)}"
    elif not isinstance(value, celtypes.BoolType | bool):
        result.passed = False
        kind = type(value).__name__.removesuffix("Type").lower()
        result.message = f"must evaluate to true or false, got {kind} {value!s}"  # bytes show as b'...'
    else:
        result.passed = bool(value)
        result.message = _explain(compiled.expression, reads.values, result.passed)
    return result


def evaluate_gates(exprs: Iterable[Gate | str], summaries: Sequence[MetricSummary]) -> list[GateResult]:
    """Every gate against the same summaries, in order."""
    return [evaluate_gate(expr, summaries) for expr in exprs]


def _error_text(error: BaseException) -> str:
    args = getattr(error, "args", ())
    text = args[0] if args and isinstance(args[0], str) else str(error)
    return " ".join(text.split())


def _explain(expression: str, values: Mapping[str, float | int], passed: bool) -> str:
    """The values a gate read, as ``metric('x').mean = 0.5667 < 0.8`` for a simple comparison."""
    match = _COMPARISON.match(expression)
    if match is not None and len(values) == 1:
        ((text, value),) = values.items()
        if _normalize(match.group("lhs")) == _normalize(text):
            op = match.group("op") if passed else _NEGATED[match.group("op")]
            return f"{text} = {_fmt(value, match.group('rhs'))} {op} {match.group('rhs')}"
    shown = ", ".join(f"{text} = {_fmt(value)}" for text, value in values.items())
    if passed:
        return shown
    return f"false: {shown}" if shown else "false"


def _normalize(text: str) -> str:
    return "".join(text.split()).replace('"', "'")


def _fmt(value: float | int, threshold: str | None = None) -> str:
    if isinstance(value, int):
        return str(value)
    text = f"{value:.4g}"
    if threshold is not None and text == threshold.rstrip("0").rstrip(".") and float(threshold) != value:
        return repr(value)  # 0.7999999 shown as "0.8" next to "< 0.8" would read as a contradiction
    return text
