"""The resource attributes role conditions and rules read as ``resource``: pure functions of a request message.

Every action's resource has ``project`` (what the request names; the gate may replace it with the project it
resolved), ``labels`` (a map, empty when the request carries none) and ``runs_code`` (false unless something
in the request may execute code). The other attributes exist only for the actions that have them (a rule reading
``resource.target`` on ``runs.read`` fails to evaluate, which counts as not matched): test ``request.action``
first or use ``has(resource.target)``.

Attributes that only the stored resource knows (a run's ``created_by`` and labels, a policy's or a trace's
labels) are added by the handler after loading it, through ``stored_run``, ``stored_policy`` and
``stored_trace``; the action table marks those RPCs ``needs_stored_resource``, lists included (their handlers
leave out each item the caller's conditions refuse).

What the request alone cannot tell comes from ``AttributeSources``: whether an evaluator runs code (its
manifest) and what a named connection is (the server's configuration). Without them the answer is the
strict one: an evaluator that cannot be resolved counts as running code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from google.protobuf.message import Message

from evalsi.cases.model import DEFAULT_TENANT
from evalsi.labels import LABEL_ATTRIBUTE_PREFIX, common_labels, resource_labels
from evalsi.projects import PROJECT_LABEL
from evalsi.v1alpha1 import evaluator_pb2, run_pb2
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.monitor_service_pb2 import ApplyPolicyRequest
from evalsi.v1alpha1.policy_pb2 import OnlineEvalPolicy
from evalsi.v1alpha1.run_service_pb2 import CompareRunsRequest, CreateRunRequest

Attributes = dict[str, Any]
# Pools whose evaluators execute submitted code.
CODE_POOLS = frozenset({"sandbox", "harness"})


@dataclass(frozen=True)
class Connection:
    """A model or agent connection the server's configuration defines, as conditions see it."""

    connector: str
    model: str = ""


def _runs_code_unknown(ref: str) -> bool:
    return True


def _no_connection(name: str) -> Connection | None:
    return None


@dataclass(frozen=True)
class AttributeSources:
    """What the server knows beyond the request: ``runs_code(ref)`` for an evaluator reference, ``connection(name)``
    for a configured connection (None when it names none)."""

    runs_code: Callable[[str], bool] = _runs_code_unknown
    connection: Callable[[str], Connection | None] = _no_connection


class _Resolves(Protocol):
    def resolve(self, ref: str) -> Any: ...


def runs_code_by_pool(registry: _Resolves) -> Callable[[str], bool]:
    """``runs_code`` from an evaluator registry: an evaluator scheduled on a code pool runs code, and so does
    one that does not resolve (the handler refuses it anyway; the decision must not be the lenient one)."""

    def runs_code(ref: str) -> bool:
        try:
            return str(registry.resolve(ref).pool) in CODE_POOLS
        except Exception:
            return True

    return runs_code


DEFAULT_SOURCES = AttributeSources()


def base(project: str = "", labels: Mapping[str, str] | None = None, *, runs_code: bool = False) -> Attributes:
    """What every action's resource has."""
    return {"project": project, "labels": dict(labels or {}), "runs_code": runs_code}


def none(request: Message | None, sources: AttributeSources) -> Attributes:
    """Actions with no resource beyond the project (lists, who-am-i, /metrics)."""
    return base(_project_field(request))


def _project_field(request: Message | None) -> str:
    if request is None:
        return ""
    return str(getattr(request, "project", "") or "")


# --- evaluations and runs --------------------------------------------------------------------------------------


def _judges(judges: Mapping[str, evaluator_pb2.JudgeSpec]) -> Attributes:
    """``judges``: the connection each named judge uses (its key when it names none); ``judge`` only when there is
    exactly one, so a condition on ``resource.judge`` cannot be passed by naming a second judge beside it."""
    used = sorted({spec.connection or name for name, spec in judges.items()})
    out: Attributes = {"judges": used}
    if len(used) == 1:
        out["judge"] = used[0]
    return out


def _evaluators(refs: Iterable[str], sources: AttributeSources) -> tuple[list[str], bool]:
    names = [ref for ref in refs if ref]
    return names, any(sources.runs_code(ref) for ref in names)


def evaluate(request: Message | None, sources: AttributeSources) -> Attributes:
    """EvaluationService.Evaluate / EvaluateStream: project, evaluators, judge(s), runs_code."""
    if not isinstance(request, EvaluateRequest):
        return base(_project_field(request))
    refs, runs_code = _evaluators((e.ref for e in request.evaluators), sources)
    return {**base(request.project, runs_code=runs_code), "evaluators": refs, **_judges(request.judges)}


def _target(target: run_pb2.Target, sources: AttributeSources) -> tuple[Attributes, bool]:
    """The run's target as conditions see it, and whether running it executes code in the server's workers."""
    kind = target.WhichOneof("kind")
    if kind == "model":
        model = target.model
        out: Attributes = {"kind": "model", "connector": model.connector, "model": model.model,
                           "connection": model.connection}
        known = sources.connection(model.connection) if model.connection else None
        if known is not None:
            out["connector"] = known.connector
            out["model"] = model.model or known.model
        return out, False
    if kind == "agent":
        agent = target.agent
        agent_kind = agent.WhichOneof("kind") or ""
        connection = agent.connection if agent_kind == "connection" else ""
        known = sources.connection(connection) if connection else None
        connector = known.connector if known is not None else agent_kind
        agent_model = agent.openai_responses.model if agent_kind == "openai_responses" else (
            known.model if known else "")
        # A python agent runs in the worker; a CLI agent is the caller's command, run in a sandbox: both run code.
        return {"kind": "agent", "connector": connector, "model": agent_model, "connection": connection}, \
            agent_kind in ("python", "cli")
    return {"kind": "outputs", "connector": "", "model": "", "connection": ""}, False


def _dataset(source: run_pb2.DatasetSource) -> str:
    kind = source.WhichOneof("kind")
    return str(getattr(source, kind)) if kind else ""


def _project_of_run(request: CreateRunRequest) -> str:
    """CreateRun's project: the request's, else the document's metadata or its evals.si/project label."""
    metadata = request.run.metadata
    return request.project or metadata.project or metadata.labels.get(PROJECT_LABEL, "")


def create_run(request: Message | None, sources: AttributeSources) -> Attributes:
    """RunService.CreateRun: project, run name, target, judge(s), evaluators, dataset, trials, budget, runs_code,
    labels."""
    if not isinstance(request, CreateRunRequest):
        return base(_project_field(request))
    document = request.run
    spec = document.spec
    target, target_runs_code = _target(spec.target, sources)
    refs, evaluators_run_code = _evaluators((e.ref for e in spec.evaluators), sources)
    tools = spec.harness.builtin.tools
    harness_runs_code = bool(tools.python) or any(server.command for server in tools.mcp)
    budget = spec.budget
    return {
        **base(_project_of_run(request), document.metadata.labels,
               runs_code=target_runs_code or evaluators_run_code or harness_runs_code),
        "run": {"id": "", "name": document.metadata.name, "created_by": "", "labels": dict(document.metadata.labels)},
        "target": target,
        "evaluators": refs,
        **_judges(spec.judges),
        "dataset": _dataset(spec.dataset),
        "trials": max(spec.trials, 1),
        "budget": {"usd": budget.usd, "tokens": budget.tokens, "wall_clock_s": budget.wall_clock.ToTimedelta()
                   .total_seconds()},
    }


def run_by_id(request: Message | None, sources: AttributeSources) -> Attributes:
    """RunService calls naming one run (get, watch, cancel, resume, results): ``run.id``; the handler adds the
    stored run's name, created_by and labels (``stored_run``)."""
    run_id = str(getattr(request, "id", "")) if request is not None else ""
    return {**base(_project_field(request)), "run": {"id": run_id}}


def compare_runs(request: Message | None, sources: AttributeSources) -> Attributes:
    if not isinstance(request, CompareRunsRequest):
        return base(_project_field(request))
    return {**base(request.project), "runs": [request.run_a, request.run_b]}


def list_runs(request: Message | None, sources: AttributeSources) -> Attributes:
    """ListRuns: the project; the handler decides on each stored run (``stored_run``) and keeps those allowed."""
    return none(request, sources)


def list_policies(request: Message | None, sources: AttributeSources) -> Attributes:
    """ListPolicies: the project; the handler decides on each stored policy (``stored_policy``)."""
    return none(request, sources)


def dataset(request: Message | None, sources: AttributeSources) -> Attributes:
    """UploadDataset (its first chunk names the dataset) and ListDatasetVersions: ``dataset`` is the name."""
    name = str(getattr(request, "name", "")) if request is not None else ""
    return {**base(_project_field(request)), "dataset": name}


def stored_run(attributes: Mapping[str, Any], run: run_pb2.Run) -> Attributes:
    """The attributes of a call on a stored run, completed from the run: its name, created_by and labels."""
    labels = dict(run.labels)
    return {**attributes, "project": run.project or attributes.get("project", ""), "labels": labels,
            "run": {"id": run.id, "name": run.name, "created_by": run.created_by, "labels": labels}}


# --- policies and traces ---------------------------------------------------------------------------------------


def apply_policy(request: Message | None, sources: AttributeSources) -> Attributes:
    """MonitorService.ApplyPolicy: project, policy (name, selector, evaluators, promotion dataset), judge(s),
    runs_code, labels."""
    if not isinstance(request, ApplyPolicyRequest):
        return base(_project_field(request))
    policy = request.policy
    spec = policy.spec
    refs, runs_code = _evaluators((stage.ref for stage in spec.cascade), sources)
    judges = sorted({stage.judge for stage in spec.cascade if stage.judge})
    project = request.project or policy.metadata.project
    out: Attributes = {
        **base(project, policy.metadata.labels, runs_code=runs_code),
        "policy": {"name": policy.metadata.name, "selector": spec.selector, "evaluators": refs,
                   "promotion": spec.promote.dataset},
        "evaluators": refs,
        "judges": judges,
    }
    if len(judges) == 1:
        out["judge"] = judges[0]
    return out


def policy_by_name(request: Message | None, sources: AttributeSources) -> Attributes:
    """Get, stats and delete of one policy: ``policy.name``."""
    name = str(getattr(request, "name", "")) if request is not None else ""
    return {**base(_project_field(request)), "policy": {"name": name}}


def stored_policy(attributes: Mapping[str, Any], policy: OnlineEvalPolicy) -> Attributes:
    """The attributes of a call on a stored policy, completed from its document: labels, selector, evaluators."""
    labels = dict(policy.metadata.labels)
    refs = [stage.ref for stage in policy.spec.cascade if stage.ref]
    return {**attributes, "project": policy.metadata.project or attributes.get("project", ""), "labels": labels,
            "policy": {"name": policy.metadata.name, "selector": policy.spec.selector, "evaluators": refs,
                       "promotion": policy.spec.promote.dataset, "labels": labels}}


def list_traces(request: Message | None, sources: AttributeSources) -> Attributes:
    """TraceService.ListTraces: project and the service filter (empty: every service)."""
    service = str(getattr(request, "service_name", "")) if request is not None else ""
    return {**base(_project_field(request)), "service": service}


def trace_by_id(request: Message | None, sources: AttributeSources) -> Attributes:
    """GetTrace and AddFeedback: ``trace.id``."""
    if request is None:
        return base()
    trace_id = getattr(request, "trace_id", "")
    feedback = getattr(request, "feedback", None)
    if not trace_id and feedback is not None:
        trace_id = feedback.trace_id
    return {**base(_project_field(request)), "trace": {"id": str(trace_id)}}


def stored_trace(attributes: Mapping[str, Any], trace_id: str, service: str, labels: Mapping[str, str]) -> Attributes:
    """The attributes of a call on a stored trace: its labels (from its resources) and service."""
    return {**attributes, "labels": dict(labels), "trace": {"id": trace_id, "service": service,
                                                           "labels": dict(labels)}}


def case_tenant(request: Message | None, sources: AttributeSources) -> Attributes:
    """A case or case-report read: the tenant it names (``platform`` when none), a boundary like the project."""
    tenant = str(getattr(request, "tenant", "") or "") or DEFAULT_TENANT
    return {**base(_project_field(request)), "tenant": tenant}


def otlp_export(request: Message | None, sources: AttributeSources) -> Attributes:
    """OTLP export (traces or logs): ``services`` (every ``service.name`` in the batch) and ``service`` when the
    batch has exactly one; ``labels``: the ``evalsi.label.<key>`` resource attributes every resource of the batch
    carries alike (the gate has stamped the credential's own labels on each), so the traces it would store are
    labelled as decided; the project is the gate's (from the credential or ``evalsi.project``)."""
    names: set[str] = set()
    label_sets: list[dict[str, str]] = []
    if request is not None:
        for resource_group in _resource_groups(request):
            attributes = resource_group.resource.attributes
            for attribute in attributes:
                if attribute.key == "service.name":
                    names.add(attribute.value.string_value)
            label_sets.append(resource_labels({a.key: a.value.string_value for a in attributes
                                               if a.key.startswith(LABEL_ATTRIBUTE_PREFIX)
                                               and a.value.WhichOneof("value") == "string_value"}))
    out: Attributes = {**base(labels=common_labels(label_sets)), "services": sorted(names)}
    if len(names) == 1:
        out["service"] = next(iter(names))
    return out


def _resource_groups(request: Message) -> Iterable[Any]:
    for field_name in ("resource_spans", "resource_logs"):
        groups = getattr(request, field_name, None)
        if groups is not None:
            return groups
    return ()


# --- AuthService -----------------------------------------------------------------------------------------------


def project_create(request: Message | None, sources: AttributeSources) -> Attributes:
    """AuthService.CreateProject: ``project`` is the project being created."""
    name = str(getattr(request, "name", "")) if request is not None else ""
    labels = dict(getattr(request, "labels", {}) or {}) if request is not None else {}
    return base(name, labels)


def role_change(request: Message | None, sources: AttributeSources) -> Attributes:
    """Create, update and delete of a custom role: ``role`` and its ``permissions``."""
    if request is None:
        return base()
    role = getattr(request, "role", None)
    install_wide = bool(getattr(request, "install_wide", False))
    if role is None:  # DeleteRole names the role only
        described: Attributes = {"name": str(getattr(request, "name", "")), "permissions": [], "inherits": [],
                                 "condition": "", "install_wide": install_wide}
    else:
        described = {"name": role.name, "permissions": list(role.permissions), "inherits": list(role.inherits),
                     "condition": role.condition, "install_wide": install_wide}
    project = _project_field(request) or (role.project if role is not None else "")
    return {**base(project), "role": described, "permissions": described["permissions"]}


def binding_change(request: Message | None, sources: AttributeSources) -> Attributes:
    """List, create and delete of bindings: ``binding`` (id, role, subject)."""
    if request is None:
        return base()
    binding = getattr(request, "binding", None)
    if binding is not None:
        described = {"id": binding.id, "role": binding.role, "subject": binding.subject}
        project = _project_field(request) or binding.project
    else:
        described = {"id": str(getattr(request, "id", "")), "role": str(getattr(request, "role", "")),
                     "subject": ""}
        project = _project_field(request)
    return {**base(project), "binding": described}


def key_change(request: Message | None, sources: AttributeSources) -> Attributes:
    """Create, list and revoke of API keys: ``key`` (name, roles, labels) and the key's labels."""
    if request is None:
        return base()
    labels = dict(getattr(request, "labels", {}) or {})
    roles = list(getattr(request, "roles", []) or [])
    return {**base(_project_field(request), labels), "key": {"name": str(getattr(request, "name", "")),
                                                            "roles": roles, "labels": labels},
            "permissions": roles}


Extractor = Callable[[Message | None, AttributeSources], Attributes]
