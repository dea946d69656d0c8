"""The permission matrix: every built-in role and a set of custom roles against every row of the action table.

The expectations are §17's role table written out here, not read from the code under test, so a change in what a
role grants fails a cell. Requests are real request messages of each RPC, through the table's own extractors.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from google.protobuf import message_factory
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

import evalsi.v1alpha1
from evalsi.auth.principal import ANONYMOUS, Principal
from evalsi.authz.actions import Endpoint, rows
from evalsi.authz.attributes import AttributeSources
from evalsi.authz.authorizer import Authorizer
from evalsi.authz.decision import AccessRequest
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef
from evalsi.v1alpha1.run_pb2 import EvalRun, ModelTarget, ObjectMeta, RunSpec, Target
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest

VIEWER = {"catalog.read", "runs.read", "policies.read", "traces.read", "datasets.read", "cases.read"}
RUNNER = VIEWER | {"evaluations.run", "runs.create", "runs.cancel", "runs.resume", "datasets.write", "cases.write"}
EDITOR = RUNNER | {"policies.write"}
ADMIN = EDITOR | {"access.manage", "audit.read"}
INGEST = {"traces.write"}
SANDBOX = {"sandboxes.use"}
INSTALL_WIDE = {"projects.manage", "metrics.read", "install.manage"}
BUILTIN_EXPECTED = {"viewer": VIEWER, "runner": RUNNER, "editor": EDITOR, "admin": ADMIN, "ingest": INGEST,
                    "sandbox": SANDBOX}

CONFIG = {
    "owners": ["user:corp/root"],
    "roles": [
        {"name": "prompt-engineer", "inherits": ["viewer"],
         "permissions": ["evaluations.run", "runs.create", "runs.cancel"],
         "condition": 'has(resource.target) && resource.target.model in ["qwen3", "claude-opus-5-5"]'},
        {"name": "checkout-runner", "inherits": ["runner"], "condition": 'resource.labels.app == "checkout"'},
        {"name": "ci-gate", "permissions": ["runs.create", "runs.read"], "condition": "!resource.runs_code"},
        {"name": "runs-all", "permissions": ["runs.*"]},
        {"name": "everything", "permissions": ["*"]},
    ],
    "projects": {"p": {name: [f"user:corp/{name}"] for name in
                       [*BUILTIN_EXPECTED, "prompt-engineer", "checkout-runner", "ci-gate", "runs-all",
                        "everything"]}},
}
SOURCES = AttributeSources(runs_code=lambda ref: ref.startswith("sandbox/"))


def _input_types() -> dict[str, type[Message]]:
    services = [health_pb2.DESCRIPTOR.services_by_name["Health"],
                reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
                trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"],
                logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"]]
    for module in pkgutil.iter_modules(evalsi.v1alpha1.__path__):
        if module.name.endswith("_pb2"):
            services.extend(importlib.import_module(f"evalsi.v1alpha1.{module.name}").DESCRIPTOR
                            .services_by_name.values())
    return {f"{s.full_name}/{m.name}": message_factory.GetMessageClass(m.input_type)
            for s in services for m in s.methods}


INPUTS = _input_types()
AUTHORIZER = Authorizer.from_config(CONFIG, None)


def _user(name: str) -> Principal:
    return Principal(kind="user", provider="corp", subject=name)


def _decide(principal: Principal, row: Endpoint, project: str = "p", message: Message | None = None) -> bool:
    assert row.permission is not None
    if message is None and row.key in INPUTS:
        message = INPUTS[row.key]()
    resource = row.attributes(message, SOURCES)
    return AUTHORIZER.decide(AccessRequest(principal, row.permission, project, resource)).allowed


GUARDED = [row for row in rows() if row.permission is not None]


@pytest.mark.parametrize("role", sorted(BUILTIN_EXPECTED))
def test_builtin_role_against_every_action(role: str) -> None:
    expected = BUILTIN_EXPECTED[role] | {"self.read"}
    for row in GUARDED:
        assert _decide(_user(role), row) == (row.permission in expected), (role, row.key)


@pytest.mark.parametrize("role", sorted(BUILTIN_EXPECTED))
def test_builtin_roles_hold_only_in_their_project(role: str) -> None:
    for row in GUARDED:
        if row.permission != "self.read":
            assert not _decide(_user(role), row, project="other"), (role, row.key)


def test_owner_holds_every_action_in_every_project() -> None:
    for row in GUARDED:
        for project in ("p", "other", ""):
            assert _decide(_user("root"), row, project), row.key


def test_nobody_else_holds_install_wide_permissions() -> None:
    for role in [*BUILTIN_EXPECTED, "everything", "runs-all"]:
        for row in GUARDED:
            if row.permission in INSTALL_WIDE:
                assert not _decide(_user(role), row), (role, row.key)


def test_anonymous_and_unbound_principals_hold_nothing() -> None:
    stranger = _user("stranger")
    for row in GUARDED:
        assert not _decide(ANONYMOUS, row), row.key
        assert _decide(stranger, row) == (row.permission == "self.read"), row.key


def _create_run(model: str = "qwen3", labels: dict[str, str] | None = None, evaluator: str = "exact-match",
                connector: str = "openai") -> CreateRunRequest:
    return CreateRunRequest(project="p", run=EvalRun(
        metadata=ObjectMeta(name="r", labels=labels or {}),
        spec=RunSpec(target=Target(model=ModelTarget(connector=connector, model=model)),
                     evaluators=[EvaluatorRef(ref=evaluator)])))


def _row(name: str) -> Endpoint:
    return next(row for row in rows() if row.key.endswith("/" + name))


def test_custom_role_with_a_model_condition_runs_only_its_models() -> None:
    engineer = _user("prompt-engineer")
    assert _decide(engineer, _row("CreateRun"), message=_create_run("qwen3"))
    assert _decide(engineer, _row("CreateRun"), message=_create_run("claude-opus-5-5"))
    assert not _decide(engineer, _row("CreateRun"), message=_create_run("gpt-5"))
    # The condition covers what the role inherits too: without a target, viewer's reads are not granted.
    assert not _decide(engineer, _row("GetRun"))
    assert not _decide(engineer, _row("ApplyPolicy"))


def test_custom_role_with_a_label_condition() -> None:
    checkout = _user("checkout-runner")
    assert _decide(checkout, _row("CreateRun"), message=_create_run(labels={"app": "checkout"}))
    assert not _decide(checkout, _row("CreateRun"), message=_create_run(labels={"app": "payments"}))
    assert not _decide(checkout, _row("CreateRun"), message=_create_run())  # no label: the condition errors


def test_custom_role_without_code_execution() -> None:
    gate = _user("ci-gate")
    assert _decide(gate, _row("CreateRun"), message=_create_run())
    assert not _decide(gate, _row("CreateRun"), message=_create_run(evaluator="sandbox/run-tests"))
    assert _decide(gate, _row("ListRuns"))  # runs_code is false on reads
    assert not _decide(gate, _row("CancelRun"))
    assert not _decide(gate, _row("Evaluate"), message=EvaluateRequest(project="p"))


@pytest.mark.parametrize("role, expected", [
    ("runs-all", {"runs.create", "runs.read", "runs.cancel", "runs.resume", "self.read"}),
    ("everything", ADMIN | INGEST | SANDBOX | {"self.read"}),
])
def test_wildcard_roles(role: str, expected: set[str]) -> None:
    for row in GUARDED:
        assert _decide(_user(role), row) == (row.permission in expected), (role, row.key)


def test_roles_carried_by_the_credential() -> None:
    """An API key's roles (or a token's role_claims) grant like bindings, per project or in every project."""
    key = Principal(kind="apikey", provider="apikey", subject="collector", key_name="collector",
                    roles={"p": ("ingest",), "*": ("viewer",)})
    results: dict[str, Any] = {row.key: _decide(key, row) for row in GUARDED}
    assert results["opentelemetry.proto.collector.trace.v1.TraceService/Export"]
    assert results["evalsi.v1alpha1.RunService/GetRun"]
    assert not results["evalsi.v1alpha1.RunService/CreateRun"]
    assert _decide(key, _row("GetRun"), project="elsewhere")
    assert not _decide(key, _row("AddFeedback"), project="elsewhere")  # ingest only in p
    forged = Principal(kind="user", provider="corp", subject="x", roles={"p": ("owner",), "*": ("no-such-role",)})
    assert not _decide(forged, _row("CreateProject"))
    assert not _decide(forged, _row("GetRun"))
