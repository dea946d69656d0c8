"""The action table: every RPC and endpoint a server answers, the one action (permission) it performs, and how
to read its resource attributes for CEL. A public, versioned contract (docs/auth.md prints it; a test compares).

Keys are gRPC full method names (``evalsi.v1alpha1.RunService/CreateRun``); HTTP/JSON routes are the same RPCs
(transcoded), so they use the same key. Endpoints that are not RPCs have keys of their own: ``http:/metrics``,
``http:/healthz``, ``otlp-http:/v1/traces``. An endpoint whose ``permission`` is None is open (liveness only).
A test walks every service descriptor the servers serve and fails on any RPC without an entry, so a new RPC
cannot ship unguarded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from evalsi.authz import attributes as attrs
from evalsi.authz.attributes import Extractor
from evalsi.authz.permissions import PERMISSIONS

_V1 = "evalsi.v1alpha1"
METRICS = "http:/metrics"
HEALTHZ = "http:/healthz"
READYZ = "http:/readyz"
AUTH_DISCOVERY = "http:/.well-known/evalsi-auth"
OTLP_HTTP_TRACES = "otlp-http:/v1/traces"
OTLP_HTTP_LOGS = "otlp-http:/v1/logs"
OTLP_GRPC_TRACES = "opentelemetry.proto.collector.trace.v1.TraceService/Export"
OTLP_GRPC_LOGS = "opentelemetry.proto.collector.logs.v1.LogsService/Export"
REFLECTION = "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
HEALTH_CHECK = "grpc.health.v1.Health/Check"
HEALTH_WATCH = "grpc.health.v1.Health/Watch"
HEALTH_LIST = "grpc.health.v1.Health/List"


@dataclass(frozen=True)
class Endpoint:
    """One row of the action table.

    ``needs_stored_resource``: some attributes (a run's ``created_by`` and labels, a policy's or trace's labels)
    exist only on the stored resource; the gate's decision is partial and the handler, having loaded it, decides
    again with ``attributes.stored_run`` / ``stored_policy`` / ``stored_trace`` (a list: per item, leaving out
    those refused). Only rows whose handlers do that are marked: elsewhere the gate's decision is final.
    ``mutating``: the call changes state, so an allowed call is audited too (denied calls always are).
    """

    key: str
    permission: str | None
    attributes: Extractor = attrs.none
    needs_stored_resource: bool = False
    mutating: bool = False

    @property
    def lowest_role(self) -> str:
        if self.permission is None:
            return "none (unauthenticated)"
        return PERMISSIONS[self.permission].lowest_role

    @property
    def open(self) -> bool:
        """Answered without authentication (health: liveness only, discovery of the login issuer)."""
        return self.permission is None


_SANDBOX = "evalsi.sandbox.v1alpha1.SandboxService"


def _sandbox_rpc(method: str, *, mutating: bool = False) -> Endpoint:
    """evalsi-sandboxd's SandboxService: every call ``sandboxes.use`` in the project the call names (a sandbox
    belongs to the project it was created in; sandboxd refuses it to another)."""
    return Endpoint(f"{_SANDBOX}/{method}", "sandboxes.use", attrs.none, False, mutating)


def _rpc(service: str, method: str, permission: str | None, extractor: Extractor = attrs.none, *,
         stored: bool = False, mutating: bool = False) -> Endpoint:
    return Endpoint(f"{_V1}.{service}/{method}", permission, extractor, stored, mutating)


_ROWS: tuple[Endpoint, ...] = (
    _rpc("EvaluationService", "Evaluate", "evaluations.run", attrs.evaluate),
    _rpc("EvaluationService", "EvaluateStream", "evaluations.run", attrs.evaluate),
    _rpc("CatalogService", "ListEvaluators", "catalog.read"),
    # Enabling a pack the project is allowed grants nothing a runner lacks (naming an evaluator is the opt-in): it
    # lets the project's online policies run it, so it is theirs who write policies. The allowlist is the owner's.
    _rpc("CatalogService", "SetProjectPacks", "policies.write", mutating=True),
    _rpc("CatalogService", "SetPackAllowlist", "install.manage", mutating=True),
    _rpc("RunService", "CreateRun", "runs.create", attrs.create_run, mutating=True),
    _rpc("RunService", "GetRun", "runs.read", attrs.run_by_id, stored=True),
    _rpc("RunService", "ListRuns", "runs.read", attrs.list_runs, stored=True),
    _rpc("RunService", "WatchRun", "runs.read", attrs.run_by_id, stored=True),
    _rpc("RunService", "ListRunResults", "runs.read", attrs.run_by_id, stored=True),
    _rpc("RunService", "ListRunRecords", "runs.read", attrs.run_by_id, stored=True),
    _rpc("RunService", "CompareRuns", "runs.read", attrs.compare_runs, stored=True),
    _rpc("RunService", "CancelRun", "runs.cancel", attrs.run_by_id, stored=True, mutating=True),
    _rpc("RunService", "ResumeRun", "runs.resume", attrs.run_by_id, stored=True, mutating=True),
    _rpc("RunService", "UploadDataset", "datasets.write", attrs.dataset, mutating=True),
    _rpc("RunService", "ListDatasetVersions", "datasets.read", attrs.dataset),
    _rpc("MonitorService", "ApplyPolicy", "policies.write", attrs.apply_policy, stored=True, mutating=True),
    _rpc("MonitorService", "DeletePolicy", "policies.write", attrs.policy_by_name, stored=True, mutating=True),
    _rpc("MonitorService", "ListPolicies", "policies.read", attrs.list_policies, stored=True),
    _rpc("MonitorService", "GetPolicy", "policies.read", attrs.policy_by_name, stored=True),
    _rpc("MonitorService", "GetPolicyStats", "policies.read", attrs.policy_by_name, stored=True),
    _rpc("MonitorService", "ListPolicyAlerts", "policies.read", attrs.policy_by_name, stored=True),
    _rpc("TraceService", "ListTraces", "traces.read", attrs.list_traces, stored=True),
    _rpc("TraceService", "GetTrace", "traces.read", attrs.trace_by_id, stored=True),
    # Feedback is data about a trace sent by the app or its collector, like spans: the ingest permission.
    _rpc("TraceService", "AddFeedback", "traces.write", attrs.trace_by_id, stored=True, mutating=True),
    _rpc("CaseService", "ListCases", "cases.read", attrs.case_tenant),
    _rpc("CaseService", "GetCase", "cases.read", attrs.case_tenant),
    _rpc("CaseService", "UploadCaseReport", "cases.write", mutating=True),
    _rpc("CaseService", "ListCaseReports", "cases.read", attrs.case_tenant),
    _rpc("CaseService", "GetCaseReport", "cases.read", attrs.case_tenant),
    _rpc("AuthService", "WhoAmI", "self.read"),
    _rpc("AuthService", "ListProjects", "self.read"),
    _rpc("AuthService", "ListPermissions", "self.read"),
    _rpc("AuthService", "ListRoles", "self.read"),
    _rpc("AuthService", "CreateProject", "projects.manage", attrs.project_create, mutating=True),
    _rpc("AuthService", "CreateRole", "access.manage", attrs.role_change, mutating=True),
    _rpc("AuthService", "UpdateRole", "access.manage", attrs.role_change, mutating=True),
    _rpc("AuthService", "DeleteRole", "access.manage", attrs.role_change, mutating=True),
    _rpc("AuthService", "ListBindings", "access.manage", attrs.binding_change),
    _rpc("AuthService", "CreateBinding", "access.manage", attrs.binding_change, mutating=True),
    _rpc("AuthService", "DeleteBinding", "access.manage", attrs.binding_change, mutating=True),
    _rpc("AuthService", "CreateApiKey", "access.manage", attrs.key_change, mutating=True),
    _rpc("AuthService", "ListApiKeys", "access.manage", attrs.key_change),
    _rpc("AuthService", "RevokeApiKey", "access.manage", attrs.key_change, mutating=True),
    _rpc("AuthService", "ListAuditEvents", "audit.read"),
    # OTLP export is the data path (thousands of calls a second): audited when denied, not on every batch.
    # Exec and the file calls are sandboxd's data path (a code evaluator's every run): audited when denied.
    _sandbox_rpc("Probe"),
    _sandbox_rpc("Create", mutating=True),
    _sandbox_rpc("Exec"),
    _sandbox_rpc("WriteFiles"),
    _sandbox_rpc("ReadFiles"),
    _sandbox_rpc("Snapshot", mutating=True),
    _sandbox_rpc("Restore", mutating=True),
    _sandbox_rpc("Stats"),
    _sandbox_rpc("Destroy", mutating=True),
    Endpoint(OTLP_GRPC_TRACES, "traces.write", attrs.otlp_export),
    Endpoint(OTLP_GRPC_LOGS, "traces.write", attrs.otlp_export),
    Endpoint(OTLP_HTTP_TRACES, "traces.write", attrs.otlp_export),
    Endpoint(OTLP_HTTP_LOGS, "traces.write", attrs.otlp_export),
    Endpoint(REFLECTION, "catalog.read"),
    Endpoint(METRICS, "metrics.read"),
    Endpoint(HEALTH_CHECK, None),
    Endpoint(HEALTH_WATCH, None),
    Endpoint(HEALTH_LIST, None),
    Endpoint(HEALTHZ, None),
    Endpoint(READYZ, None),
    Endpoint(AUTH_DISCOVERY, None),
)

ACTION_TABLE: Mapping[str, Endpoint] = {row.key: row for row in _ROWS}


def endpoint(key: str) -> Endpoint:
    """The row for ``package.Service/Method`` (a leading ``/`` is accepted, as gRPC paths have it) or an
    endpoint key; KeyError for anything the table does not know, which the gate must deny."""
    return ACTION_TABLE[key[1:] if key.startswith("/") else key]


def rows() -> tuple[Endpoint, ...]:
    """Every row, in the table's order (the docs print them so)."""
    return _ROWS


# What each extractor gives CEL beyond project, labels and runs_code (every resource has those), as docs print it.
_ATTRIBUTES_SHOWN: dict[str, str] = {
    "none": "",
    "evaluate": "evaluators, judges, judge (when exactly one)",
    "create_run": "run {name, labels}, target {kind, connector, model, connection}, evaluators, judges, judge, "
                  "dataset, trials, budget {usd, tokens, wall_clock_s}",
    "run_by_id": "run {id}; stored: run {name, created_by, labels}",
    "list_runs": "stored: each run {id, name, created_by, labels} (a list keeps those allowed)",
    "compare_runs": "runs (both ids); stored: run {id, name, created_by, labels}, each run in turn",
    "dataset": "dataset (its name)",
    "apply_policy": "policy {name, selector, evaluators, promotion}, evaluators, judges, judge; stored: the "
                    "replaced policy's labels and policy {...}",
    "policy_by_name": "policy {name}; stored: labels, policy {selector, evaluators, promotion, labels}",
    "list_policies": "stored: each policy's labels, policy {...} (a list keeps those allowed)",
    "list_traces": "service (the filter); stored: each trace's labels, trace {id, service, labels} (a list keeps "
                   "those allowed)",
    "trace_by_id": "trace {id}; stored: labels, trace {service, labels} (none for a trace not stored yet)",
    "case_tenant": "tenant (the request's, default platform)",
    "otlp_export": "services, service (when exactly one), labels (evalsi.label.<key> every resource carries, the "
                   "credential's over them)",
    "project_create": "project (the one created)",
    "role_change": "role {name, permissions, inherits, condition, install_wide}, permissions",
    "binding_change": "binding {id, role, subject}",
    "key_change": "key {name, roles, labels}, permissions (its roles)",
}


def describe(row: Endpoint) -> str:
    """The attributes column of the docs' action table."""
    return _ATTRIBUTES_SHOWN[row.attributes.__name__]


def markdown_table() -> str:
    """The action table as docs/auth.md prints it (a test compares the two)."""
    lines = ["| RPC or endpoint | Action | Lowest role | Resource attributes for CEL | Audited when allowed |",
             "|---|---|---|---|---|"]
    for row in _ROWS:
        name = row.key.removeprefix(f"{_V1}.")
        action = row.permission or "none"
        attributes = describe(row) or "-"
        lines.append(f"| `{name}` | {action} | {row.lowest_role} | {attributes} | {'yes' if row.mutating else 'no'} |")
    return "\n".join(lines)
