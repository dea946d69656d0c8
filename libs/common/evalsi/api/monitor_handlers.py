"""MonitorService: online policies applied, listed, read and deleted, the statistics of their scores and the alerts
they fired."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from evalsi.api.config import HandlerLimits
from evalsi.api.context import CallContext
from evalsi.api.errors import ApiError, NotFoundError
from evalsi.api.file_params import refuse_file_params
from evalsi.api.handlers_common import (
    page_size,
    required,
)
from evalsi.api.live_packs import LivePacks
from evalsi.api.pack_checks import refuse_not_enabled, refuse_unallowed
from evalsi.api.trace_handlers import NO_TRACE_STORE, timestamp_ns
from evalsi.authz.attributes import stored_policy
from evalsi.connection_rules import policy_problems
from evalsi.connections import Connections
from evalsi.documents import SpecProblems, merge_problems, problems_of
from evalsi.edge_checks import text_problem
from evalsi.errors import BadInputError
from evalsi.evaluators import Registry
from evalsi.policy import (
    ERROR,
    NO_CONTENT,
    SCORED,
    SKIPPED,
    AlertRule,
    compile_alert,
    compile_policy,
    evaluate_alert,
    unset_alert_secrets,
    window_start,
)
from evalsi.policy import KIND as POLICY_KIND
from evalsi.policy.spec import DEFAULT_WINDOW_S
from evalsi.projects import DEFAULT_PROJECT, PROJECT_LABEL, check_project
from evalsi.runs.spec import API_VERSION
from evalsi.stats import Aggregate, summarize
from evalsi.stores import FiredAlert, PolicyAlertStore, PolicyStore, StoredPolicy, policy_hash
from evalsi.stores.policy_alerts import DELIVERED, FAILED, NOT_SENT
from evalsi.stores.traces.protocol import ScoreStore
from evalsi.v1alpha1.monitor_service_pb2 import (
    ALERT_DELIVERY_DELIVERED,
    ALERT_DELIVERY_FAILED,
    ALERT_DELIVERY_NOT_SENT,
    ApplyPolicyRequest,
    DeletePolicyRequest,
    GetPolicyRequest,
    GetPolicyStatsRequest,
    ListPoliciesRequest,
    ListPoliciesResponse,
    ListPolicyAlertsRequest,
    ListPolicyAlertsResponse,
    MetricStats,
    Policy,
    PolicyStats,
    WindowAlert,
    WindowStats,
)
from evalsi.v1alpha1.monitor_service_pb2 import FiredAlert as FiredAlertMessage
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy, PolicyAlert

NO_POLICY_STORE = "no policy store is configured: evalsi-api keeps policies in its metadata store (--metadata-url)"
NO_ALERT_STORE = "no alert store is configured: evalsi-policy records alerts in the metadata store (--metadata-url)"
DEFAULT_ALERTS_PAGE = 50
MAX_ALERTS_PAGE = 1_000
_DELIVERIES = {DELIVERED: ALERT_DELIVERY_DELIVERED, FAILED: ALERT_DELIVERY_FAILED, NOT_SENT: ALERT_DELIVERY_NOT_SENT}


class MonitorHandlers:
    """Watch: online policies applied, listed, read, deleted, and the statistics of the scores they stored.

    Policies live in the metadata store; their scores live with the traces, so GetPolicyStats needs the trace
    store (``--traces-url``) and answers FAILED_PRECONDITION without one.
    """

    def __init__(
        self,
        policies: PolicyStore | None,
        scores: ScoreStore | None,
        *,
        registry: Registry,
        limits: HandlerLimits | None = None,
        clock: Callable[[], float] = time.time,
        connections: Connections | None = None,
        alerts: PolicyAlertStore | None = None,
        packs: LivePacks | None = None,
    ) -> None:
        """``connections``: the judges the server offers to judge stages (evalsi.yaml judges:); ``alerts``: where
        evalsi-policy records the alerts it fired (the metadata store); ``packs``: the packs each project enabled
        and may use (none: ``connections``' evaluators: section alone)."""
        self._connections = connections or Connections()
        self._packs = packs or LivePacks(self._connections.packs)
        self._alerts = alerts
        self._policies = policies
        self._scores = scores
        self._registry = registry
        self._limits = limits or HandlerLimits()
        self._clock = clock

    def _store(self) -> PolicyStore:
        if self._policies is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_POLICY_STORE)
        return self._policies

    async def apply_policy(self, request: ApplyPolicyRequest, ctx: CallContext) -> Policy:
        store = self._store()
        if not request.HasField("policy"):
            raise BadInputError("policy: the OnlineEvalPolicy document (apiVersion, kind, metadata, spec) is required")
        document = OnlineEvalPolicy()
        document.CopyFrom(request.policy)
        for field, expected in (("api_version", API_VERSION), ("kind", POLICY_KIND)):
            value = getattr(document, field)
            if value and value != expected:
                raise BadInputError(f"policy.{field}: must be {expected}, got {value!r}")
            setattr(document, field, expected)
        document.metadata.project = _policy_project(document, request.project, ctx)
        # Every problem in one answer (400 / INVALID_ARGUMENT).
        problems: list[str] = []
        try:
            refuse_file_params((f"spec.cascade[{i}]", stage.params) for i, stage in enumerate(document.spec.cascade))
        except BadInputError as exc:
            problems.append(str(exc))
        compiled = None
        try:  # CEL compilation and type checks are CPU work: off the event loop
            compiled = await asyncio.to_thread(compile_policy, document, registry=self._registry)
        except BadInputError as exc:
            problems = merge_problems(problems, problems_of(exc))
        # Alerts are never sent unsigned: the signing secret must be set here (evalsi-policy gets the same
        # environment from evalsi serve), so the caller learns now, not when an alert would go out.
        problems = merge_problems(problems, unset_alert_secrets(document, os.environ))
        if compiled is not None:
            problems += policy_problems(self._connections, compiled, document.metadata.project)
        if problems:
            raise SpecProblems(problems, what="the policy")
        # An online policy runs only packs its project enabled, of those it is allowed (docs/packs.md).
        stages = [(f"spec.cascade[{i}].ref", stage.ref) for i, stage in enumerate(document.spec.cascade)]
        packs = self._packs.current()
        refuse_unallowed(packs, self._registry, document.metadata.project, stages)
        refuse_not_enabled(packs, self._registry, document.metadata.project, stages)
        current = await store.get_policy(document.metadata.project, document.metadata.name)
        await self._check_apply(ctx, current)
        if request.dry_run:
            digest = policy_hash(document)
            changed = current is None or current.spec_hash != digest
            generation = (current.generation if current is not None else 0) + (1 if changed else 0)
            return Policy(
                project=document.metadata.project, name=document.metadata.name, policy=document,
                generation=generation, spec_hash=digest, changed=changed,
            )
        stored, changed = await store.put_policy(document.metadata.project, document)
        return policy_message(stored, changed=changed)

    async def list_policies(self, request: ListPoliciesRequest, ctx: CallContext) -> ListPoliciesResponse:
        # Per policy, as GetPolicy decides: a role conditioned on labels lists only the policies it may read.
        stored = [p for p in await self._store().list_policies(ctx.project)
                  if await ctx.may_see(stored_policy({}, p.policy))]
        limits = self._limits
        size = page_size(request.page_size, limits.default_runs_page_size, limits.max_page_size)
        after = _policy_cursor(request.page_token)
        # A project holds few policies: page by name over the full list rather than in SQL.
        remaining = [p for p in stored if after is None or p.name > after]
        page = remaining[:size]
        token = _policy_token(page[-1].name) if len(remaining) > size else ""
        return ListPoliciesResponse(policies=[policy_message(p) for p in page], next_page_token=token)

    async def get_policy(self, request: GetPolicyRequest, ctx: CallContext) -> Policy:
        return policy_message(await self._get(ctx, request.name))

    async def delete_policy(self, request: DeletePolicyRequest, ctx: CallContext) -> Policy:
        stored = await self._get(ctx, request.name)
        if not await self._store().delete_policy(ctx.project, stored.name):
            raise NotFoundError(f"name: policy {stored.name!r} not found in project {ctx.project!r}")
        return policy_message(stored)

    async def get_policy_stats(self, request: GetPolicyStatsRequest, ctx: CallContext) -> PolicyStats:
        stored = await self._get(ctx, request.name)
        if self._scores is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_TRACE_STORE)
        spec = stored.policy.spec
        window_s = spec.window.ToNanoseconds() / 1e9 if spec.HasField("window") else DEFAULT_WINDOW_S
        since, until = self._range(request, window_s)
        scores = await self._scores.list_scores(ctx.project, policy=stored.name, since=since, until=until)
        stats = PolicyStats(project=ctx.project, name=stored.name, generation=stored.generation)
        stats.window.FromNanoseconds(round(window_s * 1e9))
        if since is not None:
            stats.start_time.FromNanoseconds(round(since * 1e9))
        if until is not None:
            stats.end_time.FromNanoseconds(round(until * 1e9))
        # Intervals over possibly many scores, and CEL: work off the event loop.
        alerts = spec.alerts if request.per_window else ()
        metrics, windows = await asyncio.to_thread(_score_stats, scores, window_s, request.per_window, alerts)
        stats.traces_evaluated = len({s.trace_id for s in scores})
        stats.metrics.extend(metrics)
        stats.windows.extend(windows)
        return stats

    async def list_policy_alerts(self, request: ListPolicyAlertsRequest, ctx: CallContext) -> ListPolicyAlertsResponse:
        stored = await self._get(ctx, request.name)
        if self._alerts is None:
            raise ApiError(grpc.StatusCode.FAILED_PRECONDITION, NO_ALERT_STORE)
        size = page_size(request.page_size, DEFAULT_ALERTS_PAGE, min(self._limits.max_page_size, MAX_ALERTS_PAGE))
        alerts, token = await self._alerts.list_policy_alerts(ctx.project, stored.name, page_size=size,
                                                              page_token=request.page_token)
        return ListPolicyAlertsResponse(alerts=[fired_alert_message(a) for a in alerts], next_page_token=token)

    def _range(self, request: GetPolicyStatsRequest, window_s: float) -> tuple[float | None, float | None]:
        """(since, until) in unix seconds; ``since`` on a window boundary so the first window is whole."""
        if request.last_windows < 0:
            raise BadInputError(f"last_windows: {request.last_windows} must be zero (no limit) or positive")
        if request.last_windows and request.HasField("start_time"):
            raise BadInputError("last_windows: give last_windows or start_time, not both")
        until = timestamp_ns(request.end_time) / 1e9 if request.HasField("end_time") else None
        since = None
        if request.HasField("start_time"):
            since = window_start(timestamp_ns(request.start_time) / 1e9, window_s)
        elif request.last_windows:
            since = window_start(until if until is not None else self._clock(), window_s)
            since -= (request.last_windows - 1) * window_s
        if since is not None and until is not None and until <= since:
            raise BadInputError("end_time: must be after start_time (and after the first window's start)")
        return since, until

    async def _get(self, ctx: CallContext, name: str) -> StoredPolicy:
        """The policy in the call's project, decided again on its stored labels when authentication is on."""
        required(name, "name", "a policy name")
        project = ctx.project
        stored = await self._store().get_policy(project, name)
        if stored is None:
            raise NotFoundError(f"name: policy {name!r} not found in project {project!r}")
        await ctx.check_access(stored_policy({}, stored.policy))
        return stored

    @staticmethod
    async def _check_apply(ctx: CallContext, current: StoredPolicy | None) -> None:
        """ApplyPolicy's final decision (the gate's was partial): on the policy it would replace, so a caller
        cannot take over one whose labels it may not write, then on the document applied (the gate's attributes).
        One audit entry per call: the replaced policy's decision is audited only when it refuses."""
        if current is not None and not await ctx.may_see(stored_policy({}, current.policy)):
            await ctx.check_access(stored_policy({}, current.policy))  # raises, audited as the refusal
        await ctx.check_access({})


def _policy_project(document: OnlineEvalPolicy, request_project: str, ctx: CallContext) -> str:
    """The header, the request's project, else the document's metadata.project or label, else ``default``.

    The document naming another project than the header or request is refused: applying a policy meant for
    one project to another is almost always a mistake. ``default`` in metadata.project does not count, since
    ``evalsi.policy.parse_policy`` fills it in when a file names no project.
    """
    named = document.metadata.project
    label = document.metadata.labels.get(PROJECT_LABEL, "")
    for value, where in ((named, "policy.metadata.project"), (label, f"policy.metadata.labels[{PROJECT_LABEL}]")):
        if value:
            check_project(value, where)
    project = ctx.resolve_project(request_project, named, label)
    if named and named not in (project, DEFAULT_PROJECT):
        raise BadInputError(f"policy.metadata.project: {named!r} differs from the project {project!r} of the call")
    if label and label != project:
        raise BadInputError(
            f"policy.metadata.labels: {PROJECT_LABEL}={label!r} differs from the project {project!r} of the call"
        )
    return project


def _policy_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _policy_cursor(token: str) -> str | None:
    if not token:
        return None
    try:  # ValueError: not base64 (binascii.Error), not ASCII, or not UTF-8 inside
        name = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except ValueError:
        raise BadInputError(f"page_token: {token!r} is not a token ListPolicies returned") from None
    if text_problem(name):  # a forged token carrying what the store cannot take
        raise BadInputError(f"page_token: {token!r} is not a token ListPolicies returned")
    return name


def policy_message(stored: StoredPolicy, *, changed: bool = False) -> Policy:
    message = Policy(
        project=stored.project, name=stored.name, policy=stored.policy, generation=stored.generation,
        spec_hash=stored.spec_hash, changed=changed,
    )
    message.update_time.FromNanoseconds(round(stored.updated_at * 1e9))
    return message


def fired_alert_message(alert: FiredAlert) -> FiredAlertMessage:
    message = FiredAlertMessage(
        rule=alert.rule, when=alert.when, values={k: float(v) for k, v in alert.values.items()},
        delivery=_DELIVERIES[alert.delivery], http_status=alert.http_status or 0, error=alert.error,
        attempts=alert.attempts, notify=alert.notify, key=alert.key,
    )
    message.window_start_time.FromNanoseconds(round(alert.window_start * 1e9))
    message.window_end_time.FromNanoseconds(round(alert.window_end * 1e9))
    message.fire_time.FromNanoseconds(round(alert.fired_at * 1e9))
    return message


def _score_stats(
    scores: Sequence[Any], window_s: float, per_window: bool, alerts: Sequence[PolicyAlert] = ()
) -> tuple[list[MetricStats], list[WindowStats]]:
    metrics, _ = _metric_stats(scores)
    windows: list[WindowStats] = []
    if per_window:
        rules = _alert_rules(alerts)
        by_window: dict[float, list[Any]] = {}
        for score in scores:
            by_window.setdefault(window_start(score.scored_at, window_s), []).append(score)
        for start in sorted(by_window):
            rows = by_window[start]
            window_metrics, aggregates = _metric_stats(rows)
            window = WindowStats(traces_evaluated=len({s.trace_id for s in rows}), metrics=window_metrics,
                                 alerts=[_window_alert(rule, aggregates) for rule in rules])
            window.start_time.FromNanoseconds(round(start * 1e9))
            window.end_time.FromNanoseconds(round((start + window_s) * 1e9))
            windows.append(window)
    return metrics, windows


def _alert_rules(alerts: Sequence[PolicyAlert]) -> list[AlertRule | WindowAlert]:
    """The policy's rules compiled as evalsi-policy compiles them; one that no longer compiles (the stored
    document predates a change of the rule language) is answered as that problem, in every window."""
    rules: list[AlertRule | WindowAlert] = []
    for index, alert in enumerate(alerts):
        try:
            rules.append(compile_alert(alert.when, index=index, notify=alert.notify,
                                       min_samples=max(1, alert.min_samples), secret_env=alert.secret_env))
        except BadInputError as exc:
            rules.append(WindowAlert(rule=index, when=alert.when, reason=f"does not compile: {exc}"))
    return rules


def _window_alert(rule: AlertRule | WindowAlert, aggregates: dict[str, Aggregate]) -> WindowAlert:
    if isinstance(rule, WindowAlert):
        return rule
    held, reason, _ = evaluate_alert(rule, aggregates)
    return WindowAlert(rule=rule.index, when=rule.when, held=bool(held), evaluated=held is not None, reason=reason)


def _metric_stats(scores: Sequence[Any]) -> tuple[list[MetricStats], dict[str, Aggregate]]:
    """Per metric, by name: the scored values summarized (Wilson for pass/fail, Student-t for numbers), with
    skipped (of which no content) and errors counted apart, as every aggregate in the product is; and each
    metric's aggregate, which alert rules read."""
    by_metric: dict[str, list[Any]] = {}
    for score in scores:
        by_metric.setdefault(score.metric, []).append(score)
    out: list[MetricStats] = []
    aggregates: dict[str, Aggregate] = {}
    for metric in sorted(by_metric):
        rows = by_metric[metric]
        scored = [s for s in rows if s.outcome == SCORED and s.value is not None]
        pass_fail = bool(scored) and all(s.passed is not None for s in scored)
        skipped = [s for s in rows if s.outcome == SKIPPED]
        last = rows[-1]
        stats = MetricStats(
            metric=metric, stage=last.stage, evaluator=last.evaluator, pass_fail=pass_fail,
            skipped=len(skipped), no_content=sum(1 for s in skipped if s.reason.startswith(NO_CONTENT)),
            errors=sum(1 for s in rows if s.outcome == ERROR),
        )
        aggregate = aggregates[metric] = summarize([float(s.value) for s in scored], binary=pass_fail)
        stats.n, stats.level, stats.method = aggregate.n, aggregate.level, aggregate.method or ""
        for figure in ("mean", "std", "ci_low", "ci_high"):
            value = getattr(aggregate, figure)
            if value is not None:
                setattr(stats, figure, value)
        out.append(stats)
    return out, aggregates
