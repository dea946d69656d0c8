"""The completed-trace rule: when a trace counts as complete. Pure: a function of the spans it is told about and
the clock it is given.

Assembling a trace's ``Record`` from its spans is not here but in ``evalsi.traces.assembly``: the stores, the API
and online policies read it, while this rule only drives ingest's ``traces.completed`` notices.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from evalsi.traces.model import MappedSpan


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
    foreign: bool = False  # another process or replica stored spans of it (and told us)


@dataclass(frozen=True)
class CompletedTrace:
    project: str
    trace_id: str
    root_seen: bool  # False when max_wait_s completed it without a root
    local: bool = False  # every span of it that we were told of was stored by this process




def traces_of(spans: Iterable[MappedSpan]) -> dict[str, bool]:
    """The traces these spans belong to, each once (in order of first appearance), and whether its root span is
    among them: a trace's spans mostly arrive together, so the assembler is told once per trace, not per span."""
    spans = list(spans)
    roots = {span.trace_id for span in spans if not span.parent_span_id}
    return {trace_id: trace_id in roots for trace_id in dict.fromkeys(span.trace_id for span in spans)}


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
        for trace_id, has_root in traces_of(spans).items():
            self.note(project, trace_id, has_root=has_root)

    def note(self, project: str, trace_id: str, *, has_root: bool, foreign: bool = False) -> None:
        """Spans of ``trace_id`` arrived here, or (``foreign``) at another process or replica that passed the
        news on."""
        now = self._clock()
        key = (project, trace_id)
        pending = self._pending.get(key)
        if pending is None:  # new, or a late span of a completed trace: it will complete again
            late_rooted = key in self._rooted
            pending = self._pending[key] = _Pending(first_seen=now, root_seen=now if late_rooted else None)
        if has_root and pending.root_seen is None:
            pending.root_seen = now
        if foreign:
            pending.foreign = True

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
                done.append(CompletedTrace(key[0], key[1], pending.root_seen is not None, not pending.foreign))
        return done
