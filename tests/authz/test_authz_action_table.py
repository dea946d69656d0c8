"""The action table covers every RPC the servers answer: a new RPC cannot ship without an entry (§17)."""

from __future__ import annotations

import importlib
import pkgutil

from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

import evalsi.v1alpha1
from evalsi.api.table import PUBLIC_SERVICES
from evalsi.authz.actions import ACTION_TABLE, endpoint, rows
from evalsi.authz.permissions import PERMISSIONS
from evalsi.sandbox.v1alpha1 import sandbox_pb2


def _public_services() -> list[ServiceDescriptor]:
    """Every service of every generated evalsi.v1alpha1 module, whether or not the api registers it yet."""
    services: list[ServiceDescriptor] = []
    for module in pkgutil.iter_modules(evalsi.v1alpha1.__path__):
        if module.name.endswith("_pb2"):
            descriptor = importlib.import_module(f"evalsi.v1alpha1.{module.name}").DESCRIPTOR
            services.extend(descriptor.services_by_name.values())
    return services


def _served() -> list[ServiceDescriptor]:
    return [
        *_public_services(),
        health_pb2.DESCRIPTOR.services_by_name["Health"],
        reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
        trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"],
        logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"],
        # evalsi-sandboxd's service (its own package: internal, not the public API)
        *sandbox_pb2.DESCRIPTOR.services_by_name.values(),
    ]


def _rpcs() -> set[str]:
    return {f"{service.full_name}/{method.name}" for service in _served() for method in service.methods}


def test_every_rpc_has_an_entry() -> None:
    missing = sorted(_rpcs() - set(ACTION_TABLE))
    assert not missing, f"RPCs without an entry in evalsi.authz.actions: {missing}"


def test_the_walk_sees_the_api_and_auth_services() -> None:
    """The walk is not vacuous: it finds the api's handler table services and AuthService."""
    names = {service.full_name for service in _public_services()}
    assert {service.full_name for service in PUBLIC_SERVICES} <= names
    assert "evalsi.v1alpha1.AuthService" in names
    assert len(_rpcs()) >= 40


def test_no_entry_names_an_rpc_that_does_not_exist() -> None:
    rpc_keys = {key for key in ACTION_TABLE if ":" not in key.split("/")[0]}
    assert not sorted(rpc_keys - _rpcs())


def test_every_permission_is_registered_and_keys_are_unique() -> None:
    assert len(rows()) == len(ACTION_TABLE)
    for row in rows():
        assert row.permission is None or row.permission in PERMISSIONS, row.key


def test_lookup_takes_grpc_paths_and_refuses_unknown_methods() -> None:
    assert endpoint("/evalsi.v1alpha1.RunService/CreateRun").permission == "runs.create"
    assert endpoint("http:/metrics").permission == "metrics.read"
    assert endpoint("grpc.health.v1.Health/Check").open
    try:
        endpoint("evalsi.v1alpha1.RunService/DropEverything")
    except KeyError:
        pass
    else:
        raise AssertionError("an unknown method must not resolve to an entry")


def test_the_walk_sees_sandboxd() -> None:
    """Every SandboxService RPC is guarded by sandboxes.use: a new sandboxd RPC cannot ship unguarded."""
    sandbox = {rpc for rpc in _rpcs() if rpc.startswith("evalsi.sandbox.v1alpha1.SandboxService/")}
    assert len(sandbox) == 9
    assert {endpoint(rpc).permission for rpc in sandbox} == {"sandboxes.use"}


def test_section_17_rows() -> None:
    """The rows §17 spells out, by action and lowest role."""
    expected = {
        "evalsi.v1alpha1.EvaluationService/Evaluate": ("evaluations.run", "runner"),
        "evalsi.v1alpha1.CatalogService/ListEvaluators": ("catalog.read", "viewer"),
        "evalsi.v1alpha1.RunService/CreateRun": ("runs.create", "runner"),
        "evalsi.v1alpha1.RunService/CompareRuns": ("runs.read", "viewer"),
        "evalsi.v1alpha1.RunService/CancelRun": ("runs.cancel", "runner"),
        "evalsi.v1alpha1.RunService/ResumeRun": ("runs.resume", "runner"),
        "evalsi.v1alpha1.MonitorService/ApplyPolicy": ("policies.write", "editor"),
        "evalsi.v1alpha1.MonitorService/GetPolicyStats": ("policies.read", "viewer"),
        "evalsi.v1alpha1.MonitorService/ListPolicyAlerts": ("policies.read", "viewer"),
        "evalsi.v1alpha1.TraceService/GetTrace": ("traces.read", "viewer"),
        "opentelemetry.proto.collector.trace.v1.TraceService/Export": ("traces.write", "ingest"),
        "otlp-http:/v1/traces": ("traces.write", "ingest"),
        "evalsi.v1alpha1.AuthService/CreateProject": ("projects.manage", "owner"),
        "evalsi.v1alpha1.AuthService/CreateApiKey": ("access.manage", "admin"),
        "evalsi.v1alpha1.AuthService/ListAuditEvents": ("audit.read", "admin"),
        "http:/metrics": ("metrics.read", "owner"),
        "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": ("catalog.read", "viewer"),
    }
    for key, (permission, role) in expected.items():
        row = endpoint(key)
        assert (row.permission, row.lowest_role) == (permission, role), key
    assert endpoint("evalsi.v1alpha1.AuthService/WhoAmI").lowest_role == "any authenticated principal"
    assert endpoint("grpc.health.v1.Health/Check").permission is None


def test_mutating_rows_are_the_writes() -> None:
    mutating = {row.key.rsplit("/", 1)[-1] for row in rows() if row.mutating}
    assert {"CreateRun", "CancelRun", "ResumeRun", "ApplyPolicy", "DeletePolicy", "CreateRole", "CreateBinding",
            "CreateApiKey", "RevokeApiKey", "CreateProject", "UploadDataset", "AddFeedback"} <= mutating
    reads = {row.key.rsplit("/", 1)[-1] for row in rows() if not row.mutating}
    assert {"GetRun", "ListRuns", "WatchRun", "ListTraces", "WhoAmI", "ListAuditEvents"} <= reads


def test_only_rows_whose_handlers_decide_again_are_partial_at_the_gate() -> None:
    """A row marked needs_stored_resource is decided partially by the gate: its handler must decide again on the
    stored resource (RunHandlers._get and MonitorHandlers._get do, through ctx.check_access; CompareRuns for each
    run; lists through ctx.may_see, per item). Marking another row means wiring its
    handler first; this list makes that a deliberate change."""
    stored = {row.key.rsplit("/", 1)[-1] for row in rows() if row.needs_stored_resource}
    assert stored == {"GetRun", "ListRuns", "WatchRun", "ListRunResults", "ListRunRecords", "CompareRuns", "CancelRun",
                      "ResumeRun",
                      "ApplyPolicy", "DeletePolicy", "ListPolicies", "GetPolicy", "GetPolicyStats",
                      "ListPolicyAlerts", "ListTraces", "GetTrace", "AddFeedback"}
