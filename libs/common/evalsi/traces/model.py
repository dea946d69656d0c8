"""The trace model: what ingest writes, the trace stores keep, and the API and online policies read.

- ``MappedSpan``: one span after mapping (the canonical ``Step`` plus what assembly and storage index on); OTLP
  log records are stored as rows of this shape too (``mapper`` ``otel-log@1``, see ``is_log_row``);
- ``TraceSummary``/``TracePage``: a trace's summary row, and a page of them, as the stores list them;
- ``OnlineScore``/``Feedback``: what lives with the traces besides their spans, online scores from policies and
  late signals. Both stores keep an online score by (project, trace, policy, metric), a newer trace ``revision``
  replacing an older one, so a late span that re-triggers evaluation updates the trace's scores instead of adding
  a second set; and a feedback row by (project, feedback id), the client's id (a retry replaces) or a new uuid.

Plain data and the rules that are facts about it (which steps count toward usage); no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span

from evalsi.errors import BadInputError
from evalsi.limits import check_finite
from evalsi.v1alpha1.record_pb2 import STEP_TYPE_EMBEDDING, STEP_TYPE_LLM, Step

from .otlp import merge_span

# --- spans ---------------------------------------------------------------------------------------------------

# The mapper name of rows that are OTLP log records, not spans (assembly folds them into their span's step).
LOG_MAPPER = "otel-log@1"
# The attribute that marks a Logfire "pending span": an announcement that repeats its parent once that arrives.
PLACEHOLDER = "evalsi.placeholder"
# Tokens are summed over these step types only: agent and chain spans often repeat their children's totals,
# which would count them twice.
USAGE_STEP_TYPES = frozenset({STEP_TYPE_LLM, STEP_TYPE_EMBEDDING})


class MappedSpan:
    """A span after mapping: the canonical step plus what assembly and storage index on.

    The OTLP span a step was mapped from travels beside it (``otlp``, redacted) until something reads the step:
    what it says verbatim (times, attributes, kind, events, links) is not copied into the step at ingest, value by
    value in Python, but kept as the span's bytes (one C call) beside the step's. ``step`` is the whole step, the
    span merged in on first access (``merge_span``); ``bare_step`` and ``step_bytes`` are the step without it,
    for the store and the redactor.
    """

    __slots__ = ("_encoded", "_otlp", "_step", "end_ns", "error", "mapper", "name", "parent_span_id", "resource",
                 "scope", "service_name", "session_id", "span_id", "start_ns", "trace_id")

    def __init__(self, trace_id: str, span_id: str, parent_span_id: str, name: str, start_ns: int, end_ns: int,
                 error: bool, session_id: str, mapper: str, service_name: str, step: Step,
                 resource: dict[str, Any] | None = None, scope: str = "", otlp: Span | bytes | None = None) -> None:
        self.trace_id = trace_id  # 32 lowercase hex digits
        self.span_id = span_id  # 16 lowercase hex digits
        self.parent_span_id = parent_span_id  # "" for a root span
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.error = error
        self.session_id = session_id
        self.mapper = mapper  # name@version
        self.service_name = service_name
        self.resource: dict[str, Any] = {} if resource is None else resource
        self.scope = scope
        self._step = step
        self._otlp = otlp or None  # the OTLP span (or its bytes, as stored) not yet merged into the step
        self._encoded: bytes | None = None

    @property
    def step(self) -> Step:
        """The whole step, what the OTLP span says merged in; the caller may edit it."""
        if self._otlp is not None:
            otlp = self._otlp
            merge_span(self._step, Span.FromString(otlp) if isinstance(otlp, bytes) else otlp, self.mapper)
            self._otlp = None
        self._encoded = None  # the caller may change the step: encode it again when asked
        return self._step

    @property
    def bare_step(self) -> Step:
        """The step without what the OTLP span says (read it only: an edit goes through ``step``)."""
        return self._step

    def step_bytes(self) -> bytes:
        """``bare_step`` serialized, once: the redactor screens these bytes and the store writes them."""
        if self._encoded is None:
            self._encoded = self._step.SerializeToString()
        return self._encoded

    def otlp_bytes(self) -> bytes:
        """The OTLP span not yet merged into the step, serialized (b"" when there is none): the store's column."""
        otlp = self._otlp
        return b"" if otlp is None else otlp if isinstance(otlp, bytes) else otlp.SerializeToString()

    def _key(self) -> tuple[Any, ...]:
        return (self.trace_id, self.span_id, self.parent_span_id, self.name, self.start_ns, self.end_ns, self.error,
                self.session_id, self.mapper, self.service_name, self.step, self.resource, self.scope)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MappedSpan) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass it was

    def __repr__(self) -> str:
        return (f"MappedSpan(trace_id={self.trace_id!r}, span_id={self.span_id!r}, name={self.name!r}, "
                f"mapper={self.mapper!r}, step={self._step!r}, otlp={self._otlp!r})")


def is_log_row(span: MappedSpan) -> bool:
    return span.mapper == LOG_MAPPER


def counts_toward_usage(step: Step) -> bool:
    return step.type in USAGE_STEP_TYPES


# --- trace summaries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceSummary:
    trace_id: str
    root_span_id: str  # "" while the root span has not arrived
    root_name: str
    service_name: str
    session_id: str
    start_ns: int
    end_ns: int
    span_count: int
    error_count: int
    input_tokens: int
    output_tokens: int
    revision: int
    updated_at: float
    completed_at: float | None
    completions: int


@dataclass(frozen=True)
class TracePage:
    traces: list[TraceSummary]
    next_page_token: str  # "" on the last page


# --- online scores and late signals --------------------------------------------------------------------------

SCORED = "scored"
SKIPPED = "skipped"
ERROR = "error"
OUTCOMES = (SCORED, SKIPPED, ERROR)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


@dataclass(frozen=True)
class OnlineScore:
    """One metric of one cascade stage of one policy on one trace revision."""

    trace_id: str
    revision: int
    policy: str
    stage: str  # the cascade stage's alias
    metric: str  # the alias, or alias.output for an evaluator with several outputs
    evaluator: str  # the evaluator ref, builtin/x@1.0.0
    outcome: str  # scored | skipped | error
    value: float | None = None  # the number, or 1.0 / 0.0 for pass/fail; None unless scored
    passed: bool | None = None  # pass/fail scores only
    label: str = ""
    reason: str = ""  # why skipped or failed ("no content: the trace has no output", ...)
    scored_at: float = 0.0  # unix seconds

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r}: one of {', '.join(OUTCOMES)}")


@dataclass(frozen=True)
class Feedback:
    """A late signal joined to a trace (or to every trace of a session): a rating, a label, a correction.

    ``value`` is a number (a thumbs-down is -1, a thumbs-up +1, a rating its score); ``negative`` is what the
    always-rule ``feedback.negative`` reads: set by the sender, or derived from ``value < 0``.
    """

    id: str
    trace_id: str  # "" when the signal names a session only
    session_id: str
    name: str  # "thumbs", "rating", "label", "resolved", ...
    value: float | None = None
    label: str = ""
    comment: str = ""
    source: str = ""  # who sent it: "user", "support", "reviewer:ana"
    negative: bool = False
    created_at: float = 0.0

    def check(self, where: str = "feedback") -> Feedback:
        if not self.trace_id and not self.session_id:
            raise BadInputError(f"{where}: a trace_id or a session_id is required to join the signal to traces")
        if self.trace_id and not re.fullmatch(r"[0-9a-f]{32}", self.trace_id):
            raise BadInputError(f"{where}.trace_id {self.trace_id!r}: 32 lowercase hex digits (an OTel trace id)")
        if not self.name:
            raise BadInputError(f"{where}.name: required (e.g. thumbs, rating, label)")
        if self.id and not _ID.match(self.id):
            raise BadInputError(f"{where}.id {self.id!r}: 1 to 128 letters, digits, '.', '_', ':' or '-'")
        if self.value is None and not self.label:
            raise BadInputError(f"{where}: a value (a number) or a label is required")
        if self.value is not None:  # NaN or Infinity would poison every aggregate over feedback
            check_finite(self.value, f"{where}.value")
        return self
