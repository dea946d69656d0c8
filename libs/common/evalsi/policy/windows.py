"""Windowed aggregates per metric, with intervals, and the alert rules that read them.

Windows are tumbling, aligned to multiples of the window length since the Unix epoch, so every replica puts a
score in the same window. Each window's aggregate per metric comes from ``evalsi.stats.summarize`` (Wilson for
pass/fail, Student-t for numbers). An alert rule is CEL over the window: ``mean('m')``, ``ci_low('m')``,
``ci_high('m')``, ``std('m')`` (doubles) and ``n('m')`` (an int). It is evaluated only when every metric it reads
has at least ``min_samples`` scored values in the window (and the figures it reads are defined); it fires at
most once per (rule, window): ``AlertTracker`` remembers what it fired.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes

from evalsi.errors import BadInputError
from evalsi.stats import Aggregate, summarize

from .expressions import ALERT, ALERT_FIGURES, checked_expression
from .selection import evaluate_cel


def window_start(at: float, window_s: float) -> float:
    """The start (Unix seconds) of the tumbling window that holds ``at``."""
    return math.floor(at / window_s) * window_s


class WindowAggregator:
    """Scores by (window start, metric); ``aggregates(start)`` summarizes one window."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s {window_s}: must be positive")
        self.window_s = window_s
        self._values: dict[float, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self._binary: dict[str, bool] = {}

    def add(self, metric: str, value: float | bool, at: float) -> float:
        """Record one scored value at Unix time ``at``; returns the window start it went into."""
        binary = isinstance(value, bool)
        if self._binary.get(metric, binary) != binary:
            # A policy edit made the metric pass/fail where it was numeric, or the reverse: the two do not
            # aggregate together, so its earlier values leave every window and it starts again.
            for metrics in self._values.values():
                metrics.pop(metric, None)
        self._binary[metric] = binary
        start = window_start(at, self.window_s)
        self._values[start][metric].append(float(value))
        return start

    def windows(self) -> list[float]:
        return sorted(self._values)

    def aggregates(self, start: float) -> dict[str, Aggregate]:
        values = self._values.get(start, {})
        return {metric: summarize(xs, binary=self._binary[metric]) for metric, xs in values.items()}

    def drop_before(self, start: float) -> None:
        """Forget windows that start before ``start`` (closed and alerted on)."""
        for key in [k for k in self._values if k < start]:
            del self._values[key]


@dataclass(frozen=True)
class AlertRule:
    index: int
    when: str
    notify: str
    min_samples: int
    secret_env: str
    _tree: Any = field(repr=False, compare=False)


def compile_alert(
    when: str,
    *,
    index: int,
    notify: str,
    min_samples: int = 1,
    secret_env: str = "",
    metrics: Sequence[str] | None = None,
) -> AlertRule:
    """A rule, type-checked; ``metrics``, when given, are the names its figures (``mean('x')``) may read."""
    if not when.strip():
        raise BadInputError("required: CEL over the window's aggregates, e.g. mean('llm-judge') < 0.7")
    tree = checked_expression(when, ALERT, what="an alert rule", metrics=metrics, scope="the cascade")
    return AlertRule(index, when, notify, min_samples, secret_env, tree)


@dataclass(frozen=True)
class AlertDecision:
    """One rule against one window: ``fire`` when it held and was not already sent for this window."""

    rule: AlertRule
    window_start: float
    fire: bool
    duplicate: bool
    reason: str
    values: Mapping[str, float | int]
    key: str  # stable across replicas and retries: policy, rule index and window


def evaluate_alert(
    rule: AlertRule, aggregates: Mapping[str, Aggregate]
) -> tuple[bool | None, str, dict[str, float | int]]:
    """(held, reason, values read); ``held`` is None when the rule could not be evaluated."""
    values: dict[str, float | int] = {}
    problems: list[str] = []

    def reader(figure: str) -> Any:
        def read(name: Any) -> Any:
            metric = str(name)
            text = f"{figure}('{metric}')"
            aggregate = aggregates.get(metric)
            n = aggregate.n if aggregate is not None else 0
            if n < rule.min_samples:
                problems.append(f"{metric}: {n} of {rule.min_samples} samples")
                return celpy.CELEvalError(f"too few samples for {metric!r}")
            assert aggregate is not None
            if figure == "n":
                values[text] = n
                return celtypes.IntType(n)
            value = getattr(aggregate, figure)
            if value is None:
                problems.append(f"{text} is undefined with n = {n}")
                return celpy.CELEvalError(f"{text} is undefined")
            values[text] = value
            return celtypes.DoubleType(value)

        return read

    functions = {figure: reader(figure) for figure in (*ALERT_FIGURES, "n")}
    result = evaluate_cel(rule._tree, {}, functions)
    if problems:
        return None, "not evaluated: " + "; ".join(dict.fromkeys(problems)), values
    if isinstance(result, celpy.CELEvalError):
        return None, f"could not be evaluated: {result}", values
    if not isinstance(result, celtypes.BoolType | bool):
        return None, f"must evaluate to true or false, got {result!r}", values
    shown = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in values.items())
    return bool(result), shown, values


def alert_key(policy: str, rule: AlertRule, start: float) -> str:
    text = f"{policy}\x00{rule.index}\x00{rule.when}\x00{start:.3f}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class AlertTracker:
    """Evaluates a policy's rules against windows and remembers what fired, so each fires once per window."""

    def __init__(self, policy: str, rules: Iterable[AlertRule]) -> None:
        self.policy = policy
        self.rules = tuple(rules)
        self._fired: dict[str, float] = {}

    def evaluate(self, start: float, aggregates: Mapping[str, Aggregate]) -> list[AlertDecision]:
        decisions = []
        for rule in self.rules:
            held, reason, values = evaluate_alert(rule, aggregates)
            key = alert_key(self.policy, rule, start)
            duplicate = bool(held) and key in self._fired
            fire = bool(held) and not duplicate
            if fire:
                self._fired[key] = start
            decisions.append(AlertDecision(rule, start, fire, duplicate, reason, values, key))
        return decisions

    def with_rules(self, rules: Iterable[AlertRule]) -> AlertTracker:
        """A tracker for changed rules that still remembers what this one fired (no repeat after a reload)."""
        tracker = AlertTracker(self.policy, rules)
        tracker._fired = dict(self._fired)
        return tracker

    def forget(self, key: str) -> None:
        """Forget that the alert ``key`` fired, so the rule fires again when it next holds in that window (its
        record could not be stored: the trace is handled again later)."""
        self._fired.pop(key, None)

    def forget_before(self, start: float) -> None:
        """Forget alerts of windows that start before ``start`` (bounded memory for a long-running engine)."""
        self._fired = {key: at for key, at in self._fired.items() if at >= start}
