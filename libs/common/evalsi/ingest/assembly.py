"""Trace assembly: mapped spans of one trace into a ``Record``, and the rule that says a trace is complete.

Both are pure: ``assemble_record`` is a function of the spans, ``TraceAssembler`` of the spans it is told about
and the clock it is given.

The record of a trace:
- ``trajectory``: every step, ordered by start time (then span id), with parent ids, the trace id and the
  first session id found;
- ``input``: the first user message of the first step that has one, else the root step's input;
- ``output``: the last non-empty assistant message of the last step that has one, else the root step's output;
- ``usage``: tokens summed over LLM and embedding steps only (agent and chain spans often repeat their children's
  totals, which would count them twice), latency from the first start to the last end;
- ``provenance`` and ``metadata``: trace, root span, project, session, service, span and error counts.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from evalsi.records import to_value
from evalsi.v1alpha1.record_pb2 import (
    STEP_TYPE_EMBEDDING,
    STEP_TYPE_LLM,
    Content,
    Record,
    Step,
    Usage,
)

from .logfire_mapper import PLACEHOLDER
from .logs import is_log_row, merge_log_rows
from .mappers import MappedSpan

USAGE_STEP_TYPES = frozenset({STEP_TYPE_LLM, STEP_TYPE_EMBEDDING})


def counts_toward_usage(step: Step) -> bool:
    return step.type in USAGE_STEP_TYPES


def root_of(spans: Sequence[MappedSpan]) -> MappedSpan | None:
    """The earliest span without a parent, else (a trace whose root has not arrived) None."""
    roots = [span for span in spans if not span.parent_span_id]
    return min(roots, key=lambda s: (s.start_ns, s.span_id)) if roots else None


def _first_user_text(steps: Iterable[Step]) -> str | None:
    for step in steps:
        if step.input.WhichOneof("kind") == "messages":
            for message in step.input.messages.messages:
                if message.role == "user" and message.content:
                    return message.content
    return None


def _last_assistant_text(steps: Sequence[Step]) -> str | None:
    for step in reversed(steps):
        if step.output.WhichOneof("kind") == "messages":
            for message in reversed(step.output.messages.messages):
                if message.role == "assistant" and message.content:
                    return message.content
    return None


def sum_usage(steps: Iterable[Step]) -> Usage:
    usage = Usage()
    for step in steps:
        if counts_toward_usage(step) and step.HasField("usage"):
            usage.input_tokens += step.usage.input_tokens
            usage.output_tokens += step.usage.output_tokens
            usage.total_tokens += step.usage.total_tokens
            usage.cached_input_tokens += step.usage.cached_input_tokens
            usage.reasoning_tokens += step.usage.reasoning_tokens
            usage.cost_usd += step.usage.cost_usd
    return usage


def assemble_record(spans: Sequence[MappedSpan], *, project: str = "default") -> Record:
    """The Record of one trace from all of its spans received so far (any order)."""
    if not spans:
        raise ValueError("a trace needs at least one span")
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
    if any(PLACEHOLDER in span.step.attributes for span in ordered):
        # Logfire's pending spans announce a span that started; once the real one (their parent) is here they
        # only repeat it. Kept in the store, left out of the trajectory.
        ids = {span.span_id for span in ordered}
        ordered = [span for span in ordered
                   if not (PLACEHOLDER in span.step.attributes and span.parent_span_id in ids)]
    log_rows = [span for span in ordered if is_log_row(span)]
    if log_rows:  # log records (GenAI events) fold into their span's step; those whose span is missing stay
        ordered = [span for span in ordered if not is_log_row(span)]
        by_span = {span.span_id: span.step for span in ordered}
        ordered = sorted([*ordered, *merge_log_rows(by_span, log_rows)], key=lambda s: (s.start_ns, s.span_id))
        steps = [by_span.get(span.span_id, span.step) for span in ordered]
    else:
        steps = [span.step for span in ordered]
    root = root_of(ordered)
    trace_id = ordered[0].trace_id
    session = next((span.session_id for span in ordered if span.session_id), "")
    record = Record(id=trace_id)
    record.trajectory.trace_id = trace_id
    record.trajectory.session_id = session
    record.trajectory.steps.extend(steps)

    user = _first_user_text(steps)
    if user is not None:
        record.input.CopyFrom(Content(text=user))
    elif root is not None and root.step.HasField("input"):
        record.input.CopyFrom(root.step.input)
    answer = _last_assistant_text(steps)
    if answer is not None:
        record.output.CopyFrom(Content(text=answer))
    elif root is not None and root.step.HasField("output"):
        record.output.CopyFrom(root.step.output)

    record.usage.CopyFrom(sum_usage(steps))
    start = min(span.start_ns for span in ordered)
    end = max(span.end_ns for span in ordered)
    record.usage.latency.FromNanoseconds(max(0, end - start))

    record.provenance.trace_id = trace_id
    record.provenance.project = project
    record.provenance.session_id = session
    if root is not None:
        record.provenance.span_id = root.span_id
    service = (root or ordered[0]).service_name
    metadata = {
        "service.name": service,
        "root.name": root.name if root is not None else "",
        "span_count": len(ordered),
        "error_count": sum(1 for span in ordered if span.error),
        "complete_root": root is not None,
    }
    for key, value in metadata.items():
        record.metadata[key].CopyFrom(to_value(value))
    return record


# --- the completed-trace rule --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompletionConfig:
    """When a trace counts as complete.

    ``grace_s``: seconds after its root span arrives (children may still be in flight from other services);
    ``max_wait_s``: seconds after its first span when a trace whose root never comes is completed anyway, so a
    lost root cannot hold a trace (and memory) for ever.
    """

    grace_s: float = 5.0
    max_wait_s: float = 300.0

    def validate(self) -> None:
        if self.grace_s < 0:
            raise ValueError(f"grace_s {self.grace_s}: must be zero or more seconds")
        if self.max_wait_s < self.grace_s:
            raise ValueError(f"max_wait_s {self.max_wait_s}: must be at least grace_s ({self.grace_s})")


@dataclass
class _Pending:
    first_seen: float
    root_seen: float | None


@dataclass(frozen=True)
class CompletedTrace:
    project: str
    trace_id: str
    root_seen: bool  # False when max_wait_s completed it without a root




class TraceAssembler:
    """Tracks traces until they complete; the clock is injected, so tests step time by hand.

    Arrival times are this process's clock, not the spans' own timestamps: an app's clock may be skewed, and
    the grace period is about spans still in flight to us.
    """

    def __init__(
        self,
        config: CompletionConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        remember: int = 100_000,
    ) -> None:
        self.config = config or CompletionConfig()
        self.config.validate()
        self._clock = clock
        self._pending: dict[tuple[str, str], _Pending] = {}
        # Recently completed traces that had their root: a late span of one completes it again after grace_s.
        self._rooted: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._remember = remember

    def __len__(self) -> int:
        return len(self._pending)

    def observe(self, project: str, spans: Iterable[MappedSpan]) -> None:
        for span in spans:
            self.note(project, span.trace_id, has_root=not span.parent_span_id)

    def note(self, project: str, trace_id: str, *, has_root: bool) -> None:
        """Spans of ``trace_id`` arrived (here, or at a replica that passed the news on)."""
        now = self._clock()
        key = (project, trace_id)
        pending = self._pending.get(key)
        if pending is None:  # new, or a late span of a completed trace: it will complete again
            late_rooted = key in self._rooted
            pending = self._pending[key] = _Pending(first_seen=now, root_seen=now if late_rooted else None)
        if has_root and pending.root_seen is None:
            pending.root_seen = now

    def pop_completed(self) -> list[CompletedTrace]:
        """Traces whose root arrived at least ``grace_s`` ago, or whose first span ``max_wait_s`` ago."""
        now = self._clock()
        done: list[CompletedTrace] = []
        for key, pending in list(self._pending.items()):
            rooted = pending.root_seen is not None and now - pending.root_seen >= self.config.grace_s
            if rooted or now - pending.first_seen >= self.config.max_wait_s:
                del self._pending[key]
                if pending.root_seen is not None:
                    self._rooted[key] = None
                    self._rooted.move_to_end(key)
                    while len(self._rooted) > self._remember:
                        self._rooted.popitem(last=False)
                done.append(CompletedTrace(key[0], key[1], pending.root_seen is not None))
        return done
