"""Resource attributes: what each extractor reads from a real request message, and the stored-resource additions."""

from __future__ import annotations

from typing import Any

from google.protobuf.duration_pb2 import Duration
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans

from evalsi.authz import attributes as attrs
from evalsi.authz.attributes import AttributeSources, Connection, runs_code_by_pool
from evalsi.evaluators import Registry
from evalsi.v1alpha1 import auth_service_pb2 as auth
from evalsi.v1alpha1.evaluation_service_pb2 import EvaluateRequest
from evalsi.v1alpha1.evaluator_pb2 import EvaluatorRef, JudgeSpec
from evalsi.v1alpha1.monitor_service_pb2 import ApplyPolicyRequest
from evalsi.v1alpha1.policy_pb2 import CascadeStage, OnlineEvalPolicy, PolicyPromotion, PolicySpec
from evalsi.v1alpha1.run_pb2 import (
    AgentTarget,
    Budget,
    DatasetSource,
    EvalRun,
    ModelTarget,
    ObjectMeta,
    PythonAgent,
    Run,
    RunSpec,
    Target,
)
from evalsi.v1alpha1.run_service_pb2 import CreateRunRequest, GetRunRequest

SOURCES = AttributeSources(
    runs_code=lambda ref: ref == "sandbox/exec",
    connection=lambda name: Connection("anthropic", "claude-opus-5-5") if name == "claude" else None,
)


def _run(**spec: Any) -> CreateRunRequest:
    metadata = ObjectMeta(name="nightly", project="support", labels={"app": "checkout"})
    return CreateRunRequest(run=EvalRun(metadata=metadata, spec=RunSpec(**spec)))


def test_create_run_reads_the_document() -> None:
    request = _run(
        target=Target(model=ModelTarget(connector="openai", model="gpt-5")),
        evaluators=[EvaluatorRef(ref="builtin/exact-match"), EvaluatorRef(ref="builtin/llm-judge")],
        judges={"default": JudgeSpec(connection="cheap-judge")},
        dataset=DatasetSource(ref="datasets/qa@abc"),
        trials=3,
        budget=Budget(usd=2.5, tokens=10_000, wall_clock=Duration(seconds=600)),
    )
    resource = attrs.create_run(request, SOURCES)
    assert resource == {
        "project": "support", "labels": {"app": "checkout"}, "runs_code": False,
        "run": {"id": "", "name": "nightly", "created_by": "", "labels": {"app": "checkout"}},
        "target": {"kind": "model", "connector": "openai", "model": "gpt-5", "connection": ""},
        "evaluators": ["builtin/exact-match", "builtin/llm-judge"],
        "judges": ["cheap-judge"], "judge": "cheap-judge",
        "dataset": "datasets/qa@abc", "trials": 3,
        "budget": {"usd": 2.5, "tokens": 10_000, "wall_clock_s": 600.0},
    }
    # The request's project wins over the document's.
    request.project = "other"
    assert attrs.create_run(request, SOURCES)["project"] == "other"


def test_a_named_connection_gives_its_connector_and_model() -> None:
    resource = attrs.create_run(_run(target=Target(model=ModelTarget(connection="claude"))), SOURCES)
    assert resource["target"] == {"kind": "model", "connector": "anthropic", "model": "claude-opus-5-5",
                                  "connection": "claude"}
    assert attrs.create_run(_run(), SOURCES)["target"]["kind"] == "outputs"


def test_code_execution_is_detected_from_evaluators_and_targets() -> None:
    code = attrs.create_run(_run(evaluators=[EvaluatorRef(ref="sandbox/exec")]), SOURCES)
    assert code["runs_code"] is True
    python_agent = attrs.create_run(_run(target=Target(agent=AgentTarget(python=PythonAgent(callable="m:f")))),
                                    SOURCES)
    assert python_agent["runs_code"] is True and python_agent["target"]["kind"] == "agent"
    # Without sources every evaluator counts as running code: the strict answer.
    assert attrs.create_run(_run(evaluators=[EvaluatorRef(ref="exact-match")]), attrs.DEFAULT_SOURCES)["runs_code"]


def test_runs_code_from_a_registry() -> None:
    runs_code = runs_code_by_pool(Registry.from_entry_points())
    assert runs_code("exact-match") is False
    assert runs_code("no-such-evaluator") is True


def test_several_judges_leave_no_single_judge() -> None:
    request = EvaluateRequest(project="p", evaluators=[EvaluatorRef(ref="a")],
                              judges={"default": JudgeSpec(connection="cheap"), "strict": JudgeSpec()})
    resource = attrs.evaluate(request, SOURCES)
    assert resource["judges"] == ["cheap", "strict"] and "judge" not in resource
    assert resource["evaluators"] == ["a"] and resource["project"] == "p"


def test_stored_run_completes_a_call_by_id() -> None:
    resource = attrs.run_by_id(GetRunRequest(id="r1", project="p"), SOURCES)
    assert resource == {"project": "p", "labels": {}, "runs_code": False, "run": {"id": "r1"}}
    stored = attrs.stored_run(resource, Run(id="r1", project="p", name="n", created_by="corp/alice",
                                            labels={"team": "a"}))
    assert stored["run"] == {"id": "r1", "name": "n", "created_by": "corp/alice", "labels": {"team": "a"}}
    assert stored["labels"] == {"team": "a"}


def test_apply_policy() -> None:
    policy = OnlineEvalPolicy(metadata=ObjectMeta(name="quality", labels={"env": "prod"}), spec=PolicySpec(
        selector='span.type == "llm"', cascade=[CascadeStage(ref="sandbox/exec", judge="big")],
        promote=PolicyPromotion(dataset="hard-cases")))
    resource = attrs.apply_policy(ApplyPolicyRequest(policy=policy, project="p"), SOURCES)
    assert resource["policy"] == {"name": "quality", "selector": 'span.type == "llm"',
                                  "evaluators": ["sandbox/exec"], "promotion": "hard-cases"}
    assert resource["runs_code"] is True and resource["labels"] == {"env": "prod"} and resource["judge"] == "big"


def test_otlp_export_names_its_services() -> None:
    def group(name: str) -> ResourceSpans:
        return ResourceSpans(resource=Resource(attributes=[KeyValue(key="service.name",
                                                                    value=AnyValue(string_value=name))]))

    one = attrs.otlp_export(ExportTraceServiceRequest(resource_spans=[group("checkout")]), SOURCES)
    assert one["service"] == "checkout" and one["services"] == ["checkout"]
    two = attrs.otlp_export(ExportTraceServiceRequest(resource_spans=[group("a"), group("b")]), SOURCES)
    assert "service" not in two and two["services"] == ["a", "b"]


def test_auth_service_changes() -> None:
    role = attrs.role_change(auth.CreateRoleRequest(project="p", role=auth.Role(
        name="r", permissions=["runs.read"], inherits=["viewer"], condition="true")), SOURCES)
    assert role["role"] == {"name": "r", "permissions": ["runs.read"], "inherits": ["viewer"], "condition": "true",
                            "install_wide": False}
    assert role["permissions"] == ["runs.read"] and role["project"] == "p"
    deleted = attrs.role_change(auth.DeleteRoleRequest(name="r", project="p"), SOURCES)
    assert deleted["role"]["name"] == "r"
    binding = attrs.binding_change(auth.CreateBindingRequest(binding=auth.Binding(
        project="p", role="viewer", subject="user:corp/a")), SOURCES)
    assert binding["binding"] == {"id": "", "role": "viewer", "subject": "user:corp/a"} and binding["project"] == "p"
    key = attrs.key_change(auth.CreateApiKeyRequest(name="k", project="p", roles=["ingest"],
                                                    labels={"source": "gw"}), SOURCES)
    assert key["key"] == {"name": "k", "roles": ["ingest"], "labels": {"source": "gw"}}
    assert key["labels"] == {"source": "gw"}
