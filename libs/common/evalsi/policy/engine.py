"""The policy engine: one completed trace through every policy of its project.

For each policy: the selector, then sampling (always-rules first), then the cascade, whose stages are evaluated
by ``StageEvaluator`` (the worker pools over the bus in the service, in-process in tests and embedded use).
Every stage's outcome is stored with the trace as ``OnlineScore`` rows keyed on the trace revision, so a
redelivered completion rewrites the same rows and a later revision replaces them. Scored values feed the
policy's windows; an alert rule that holds fires once per window, and with an alert store each alert fired is
recorded with what became of its webhook (delivered, failed, not sent); a trace whose scores satisfy
``promote.when`` is added to the policy's dataset as a new version. Windows live in memory: ``restore_windows``
rebuilds a new policy state's current window from the stored scores (after a restart or a window change).

I/O is injected (the trace store as ``TraceStore`` and ``ScoreStore``, ``StageEvaluator``, ``Notifier``,
``Promoter``, ``ScoreObserver``), so the engine is tested without a bus and the service only wires it.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from evalsi.bus.v1alpha1.bus_pb2 import TraceCompleted
from evalsi.errors import InfraError
from evalsi.masking import mask_url
from evalsi.projects import DEFAULT_PROJECT
from evalsi.stores.policy_alerts import DELIVERED, FAILED, NOT_SENT, FiredAlert, PolicyAlertStore
from evalsi.stores.traces.protocol import ScoreStore, TraceStore
from evalsi.traces.model import ERROR as ERROR_OUTCOME
from evalsi.traces.model import SCORED as SCORED_OUTCOME
from evalsi.traces.model import SKIPPED as SKIPPED_OUTCOME
from evalsi.traces.model import OnlineScore
from evalsi.v1alpha1.record_pb2 import Record

from .cascade import SCORED, SKIPPED, Stage, StageResult, check_when, run_cascade
from .selection import TraceView, decide_sampling
from .spec import CompiledPolicy
from .webhook import Delivery, alert_payload
from .windows import AlertDecision, AlertRule, AlertTracker, WindowAggregator, window_start

log = logging.getLogger("evalsi.policy")

# A delivery error as recorded (an exception's text can be long; the record is for people to read).
_MAX_ERROR = 1_000


StageEvaluator = Callable[[str, Record, Sequence[Stage]], Awaitable[Sequence[StageResult]]]
"""(project, the trace's record, stages) → one result per stage; raises InfraError when the pools fail."""


class Notifier(Protocol):
    async def send(self, url: str, body: bytes, *, secret: str | bytes, key: str = "") -> Delivery: ...


class Promoter(Protocol):
    async def promote(self, project: str, dataset: str, record: Record) -> None: ...


class ScoreObserver(Protocol):
    """Exports (Prometheus, OTel events): told of every stored score of a policy."""

    def observe(self, project: str, policy: str, scores: Sequence[OnlineScore], record: Record) -> None: ...


class TraceNotReady(InfraError):
    """The completion arrived before the trace's spans are readable: try the message again later."""


@dataclass
class PolicyOutcome:
    """What one policy did with one trace."""

    policy: str
    selected: bool
    sampled: bool = False
    reasons: tuple[str, ...] = ()
    scores: list[OnlineScore] = field(default_factory=list)
    promoted: bool = False
    alerts: list[str] = field(default_factory=list)


@dataclass
class _PolicyState:
    """Per-policy memory of the engine: the windows and the alerts already sent (bounded by window age)."""

    windows: WindowAggregator
    alerts: AlertTracker
    # The (trace, metric) pairs each open window already holds, by window start: a redelivered or re-evaluated
    # trace counts once per window.
    counted: dict[float, set[tuple[str, str]]] = field(default_factory=dict)
    # Whether the current window was rebuilt from the stored scores; false until a restore succeeds, so a
    # store failure is retried by the next ``restore_windows``.
    restored: bool = False


class PolicyEngine:
    def __init__(
        self,
        *,
        traces: TraceStore,
        scores: ScoreStore,
        evaluate: StageEvaluator,
        notifier: Notifier | None = None,
        promoter: Promoter | None = None,
        observers: Sequence[ScoreObserver] = (),
        alerts: PolicyAlertStore | None = None,
        clock: Callable[[], float] = time.time,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """``alerts``: where each alert fired is recorded with what became of it (the metadata store)."""
        self._traces = traces
        self._scores = scores
        self._evaluate = evaluate
        self._notifier = notifier
        self._promoter = promoter
        self._observers = tuple(observers)
        self._alerts = alerts
        self._clock = clock
        self._env = os.environ if env is None else env
        self._unsigned_reported: set[tuple[str, str, int, str]] = set()
        self._policies: dict[str, list[CompiledPolicy]] = {}
        self._state: dict[tuple[str, str], _PolicyState] = {}

    # --- policies --------------------------------------------------------------------------------------------

    def set_policies(self, policies: Sequence[CompiledPolicy]) -> None:
        """Replace the policies in force; a policy whose window length is unchanged keeps its windows."""
        by_project: dict[str, list[CompiledPolicy]] = {}
        state: dict[tuple[str, str], _PolicyState] = {}
        for policy in policies:
            project = policy.project or DEFAULT_PROJECT
            by_project.setdefault(project, []).append(policy)
            key = (project, policy.name)
            old = self._state.get(key)
            if old is not None and old.windows.window_s == policy.window_s:
                old.alerts = old.alerts.with_rules(policy.alerts)
                state[key] = old
            else:
                state[key] = _PolicyState(WindowAggregator(policy.window_s), AlertTracker(policy.name, policy.alerts))
        self._policies = by_project
        self._state = state

    async def restore_windows(self) -> int:
        """Rebuild the current window of every policy state not yet restored from the stored scores.

        Call after ``set_policies``: a new state (the service started, or a window length changed) would
        otherwise start its window from zero, so a ``minSamples`` rule might never be met in it and its mean
        would read only the scores since. Returns the number of scores added. A store failure is logged and
        leaves that window as it is, to be retried by the next call; the engine stays usable meanwhile.
        """
        restored = 0
        for (project, name), state in list(self._state.items()):
            if state.restored:
                continue
            start = window_start(self._clock(), state.windows.window_s)
            try:
                scores = await self._scores.list_scores(project, policy=name, since=start,
                                                        until=start + state.windows.window_s)
            except InfraError as exc:
                log.warning("policy %s/%s: window not restored from the stored scores, retried at the next "
                            "reload: %s", project, name, exc)
                continue
            if self._state.get((project, name)) is not state:  # replaced while reading: the new one restores
                continue
            added = _restore(state, scores)
            state.restored = True
            restored += added
            log.info("policy %s/%s: restored %d stored scores into the window starting at %.0f", project, name,
                     added, start)
        return restored

    # --- one completed trace ---------------------------------------------------------------------------------

    async def handle(self, completed: TraceCompleted) -> list[PolicyOutcome]:
        project = completed.project or DEFAULT_PROJECT
        policies = self._policies.get(project)
        if not policies:
            return []
        spans = await self._traces.get_spans(project, completed.trace_id)
        if not spans:
            raise TraceNotReady(f"trace {completed.trace_id} of project {project} has no readable spans yet")
        session = next((span.session_id for span in spans if span.session_id), "")
        feedback = await self._traces.list_feedback(project, trace_id=completed.trace_id, session_id=session or None)
        view = TraceView.from_spans(spans, project=project, negative_feedback=any(f.negative for f in feedback))
        revision = completed.revision or len(spans)
        outcomes = []
        for policy in policies:
            outcomes.append(await self._apply(policy, project, view, revision))
        return outcomes

    async def _apply(self, policy: CompiledPolicy, project: str, view: TraceView, revision: int) -> PolicyOutcome:
        if not policy.selector.matches(view):
            return PolicyOutcome(policy.name, selected=False)
        decision = decide_sampling(view, policy.rate, policy.always)
        outcome = PolicyOutcome(policy.name, selected=True, sampled=decision.sampled, reasons=decision.reasons)
        if not decision.sampled:
            return outcome

        async def evaluate(stages: Sequence[Stage]) -> Sequence[StageResult]:
            return await self._evaluate(project, view.record, stages)

        results = await run_cascade(policy.cascade, evaluate, view.record)
        now = self._clock()
        outcome.scores = online_scores(policy, view.trace_id, revision, results, now)
        await self._scores.put_scores(project, outcome.scores)
        for observer in self._observers:
            observer.observe(project, policy.name, outcome.scores, view.record)
        outcome.alerts = await self._window(policy, project, view.trace_id, outcome.scores, now)
        if policy.promote_when is not None and self._promoter is not None:
            holds, _ = check_when(policy.promote_when, results)
            if holds:
                await self._promoter.promote(project, policy.promote_dataset, view.record)
                outcome.promoted = True
        return outcome

    async def _window(self, policy: CompiledPolicy, project: str, trace_id: str, scores: Sequence[OnlineScore],
                      now: float) -> list[str]:
        state = self._state[(project, policy.name)]
        start = window_start(now, policy.window_s)
        counted = state.counted.setdefault(start, set())
        for score in scores:
            if score.outcome != SCORED_OUTCOME or score.value is None or (trace_id, score.metric) in counted:
                continue
            counted.add((trace_id, score.metric))
            state.windows.add(score.metric, bool(score.passed) if score.passed is not None else score.value, now)
        fired = []
        for decision in state.alerts.evaluate(start, state.windows.aggregates(start)):
            if not decision.fire:
                continue
            try:
                if await self._send_alert(policy, project, decision, now):
                    fired.append(decision.key)
            except InfraError:
                # The alert store failed: the trace is handled again later, and the rule fires again then.
                state.alerts.forget(decision.key)
                raise
        # Older windows are closed: forget them (memory stays bounded for a long-running engine).
        state.windows.drop_before(start)
        state.alerts.forget_before(start)
        state.counted = {at: pairs for at, pairs in state.counted.items() if at >= start}
        return fired

    async def _send_alert(self, policy: CompiledPolicy, project: str, decision: AlertDecision, now: float) -> bool:
        """POST one alert and record what became of it (with an alert store); whether the webhook accepted it.

        An alert already recorded (by another replica, or before a restart emptied the tracker) is not sent
        again: one alert per rule and window. Without a notifier, or with its signing secret unset, the alert
        is recorded as not sent, saying why.
        """
        rule = decision.rule
        if self._alerts is not None and await self._alerts.get_policy_alert(project, policy.name, decision.key):
            return False
        delivery: Delivery | None = None
        reason = ""
        secret = self._env.get(rule.secret_env, "") if rule.secret_env else ""
        if self._notifier is None:
            reason = "no webhook sender: this engine sends no alerts"
        elif not secret:  # applying refuses this; the variable may have been unset since (or differ here)
            self._refuse_unsigned(project, policy.name, rule)
            reason = (f"not signed, so not sent: the signing secret variable {rule.secret_env or '(none named)'} is "
                      "unset or empty in evalsi-policy's environment")
        else:
            body = alert_payload(policy=policy.name, project=project, rule=rule.when,
                                 window_start=decision.window_start, window_s=policy.window_s, values=decision.values,
                                 key=decision.key)
            delivery = await self._notifier.send(rule.notify, body, secret=secret, key=decision.key)
            if not delivery.delivered:
                log.warning("alert %s of policy %s not delivered to %s: %s", decision.key, policy.name,
                            mask_url(rule.notify), delivery.error)
        if self._alerts is not None:
            await self._alerts.record_policy_alert(project, fired_alert(policy, decision, now, delivery, reason))
        return delivery is not None and delivery.delivered

    def _refuse_unsigned(self, project: str, policy: str, rule: AlertRule) -> None:
        """An alert whose signing secret is unset or empty is not sent (a receiver could not tell it from a
        forgery); said once per rule, not at every window."""
        key = (project, policy, rule.index, rule.secret_env)
        if key in self._unsigned_reported:
            return
        self._unsigned_reported.add(key)
        variable = rule.secret_env or "(none named)"
        log.error(
            "alerts of policy %s/%s (spec.alerts[%d], to %s) are NOT sent: the signing secret variable %s is unset "
            "or empty in evalsi-policy's environment; set it and restart evalsi-policy", project, policy,
            rule.index, rule.notify, variable,
        )


def _restore(state: _PolicyState, scores: Sequence[OnlineScore]) -> int:
    """Add stored scores to ``state``'s windows, each (trace, metric) once per window, as ``_window`` does.

    No await between reading ``counted`` and adding, so a trace handled concurrently is never counted twice:
    whichever of the two comes second finds the pair counted.
    """
    added = 0
    for score in scores:
        if score.outcome != SCORED_OUTCOME or score.value is None:
            continue
        counted = state.counted.setdefault(window_start(score.scored_at, state.windows.window_s), set())
        if (score.trace_id, score.metric) in counted:
            continue
        value = bool(score.passed) if score.passed is not None else score.value
        state.windows.add(score.metric, value, score.scored_at)  # oldest first: after an edit the newer kind wins
        counted.add((score.trace_id, score.metric))
        added += 1
    return added


def fired_alert(policy: CompiledPolicy, decision: AlertDecision, now: float, delivery: Delivery | None,
                reason: str) -> FiredAlert:
    """The record of one alert: ``delivery`` None when it was not sent (``reason`` says why)."""
    if delivery is None:
        outcome, attempts, status, error = NOT_SENT, 0, None, reason
    else:
        outcome = DELIVERED if delivery.delivered else FAILED
        attempts, status, error = delivery.attempts, delivery.status, delivery.error
    return FiredAlert(
        policy=policy.name, key=decision.key, rule=decision.rule.index, when=decision.rule.when,
        window_start=decision.window_start, window_end=decision.window_start + policy.window_s,
        values=dict(decision.values), fired_at=now, delivery=outcome, attempts=attempts, http_status=status,
        error=error[:_MAX_ERROR], notify=mask_url(decision.rule.notify),
    )


def online_scores(policy: CompiledPolicy, trace_id: str, revision: int, results: Sequence[StageResult],
                  now: float) -> list[OnlineScore]:
    """The rows a cascade's results become: one per metric of a scored stage, one per skipped or failed stage."""
    refs = {stage.alias: stage.bound.evaluator.ref for stage in policy.cascade.stages}
    rows: list[OnlineScore] = []
    for result in results:
        stage_score = functools.partial(OnlineScore, trace_id=trace_id, revision=revision, policy=policy.name,
                                        stage=result.alias, evaluator=refs.get(result.alias, ""), scored_at=now)
        if result.outcome != SCORED:
            outcome = SKIPPED_OUTCOME if result.outcome == SKIPPED else ERROR_OUTCOME
            rows.append(stage_score(metric=result.alias, outcome=outcome, reason=result.reason))
            continue
        for score in result.scores:
            metric = result.alias if len(result.scores) == 1 else f"{result.alias}.{score.name}"
            kind = score.WhichOneof("value")
            value: float | None = None
            passed: bool | None = None
            label = ""
            if kind == "number":
                value = score.number
            elif kind == "passed":
                passed = score.passed
                value = 1.0 if score.passed else 0.0
            elif kind == "label":
                label = score.label
            rows.append(stage_score(metric=metric, outcome=SCORED_OUTCOME, value=value, passed=passed, label=label,
                                    reason=score.explanation))
    return rows

