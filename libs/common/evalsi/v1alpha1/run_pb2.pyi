import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_PENDING: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]
    RUN_STATE_BUDGET_EXCEEDED: _ClassVar[RunState]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_PENDING: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_CANCELLED: RunState
RUN_STATE_BUDGET_EXCEEDED: RunState

class EvalRun(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: RunSpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[RunSpec, _Mapping]] = ...) -> None: ...

class ObjectMeta(_message.Message):
    __slots__ = ("name", "labels", "project", "annotations")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    project: str
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., project: _Optional[str] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RunSpec(_message.Message):
    __slots__ = ("target", "dataset", "evaluators", "judges", "trials", "summary", "gates", "budget", "harness", "sandbox", "sinks", "concurrency", "seed")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _evaluator_pb2.JudgeSpec
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_evaluator_pb2.JudgeSpec, _Mapping]] = ...) -> None: ...
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    HARNESS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    SINKS_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    target: Target
    dataset: DatasetSource
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorRef]
    judges: _containers.MessageMap[str, _evaluator_pb2.JudgeSpec]
    trials: int
    summary: _score_pb2.SummaryOptions
    gates: _containers.RepeatedScalarFieldContainer[str]
    budget: Budget
    harness: HarnessSpec
    sandbox: SandboxSpec
    sinks: _containers.RepeatedCompositeFieldContainer[SinkSpec]
    concurrency: int
    seed: int
    def __init__(self, target: _Optional[_Union[Target, _Mapping]] = ..., dataset: _Optional[_Union[DatasetSource, _Mapping]] = ..., evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorRef, _Mapping]]] = ..., judges: _Optional[_Mapping[str, _evaluator_pb2.JudgeSpec]] = ..., trials: _Optional[int] = ..., summary: _Optional[_Union[_score_pb2.SummaryOptions, _Mapping]] = ..., gates: _Optional[_Iterable[str]] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., harness: _Optional[_Union[HarnessSpec, _Mapping]] = ..., sandbox: _Optional[_Union[SandboxSpec, _Mapping]] = ..., sinks: _Optional[_Iterable[_Union[SinkSpec, _Mapping]]] = ..., concurrency: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("outputs", "model", "agent")
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    outputs: OutputsGiven
    model: ModelTarget
    agent: AgentTarget
    def __init__(self, outputs: _Optional[_Union[OutputsGiven, _Mapping]] = ..., model: _Optional[_Union[ModelTarget, _Mapping]] = ..., agent: _Optional[_Union[AgentTarget, _Mapping]] = ...) -> None: ...

class OutputsGiven(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelTarget(_message.Message):
    __slots__ = ("connector", "model", "base_url", "api_key_env", "params", "prompt_template", "system_prompt", "secret_ref", "connection")
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    connector: str
    model: str
    base_url: str
    api_key_env: str
    params: _struct_pb2.Struct
    prompt_template: str
    system_prompt: str
    secret_ref: str
    connection: str
    def __init__(self, connector: _Optional[str] = ..., model: _Optional[str] = ..., base_url: _Optional[str] = ..., api_key_env: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., prompt_template: _Optional[str] = ..., system_prompt: _Optional[str] = ..., secret_ref: _Optional[str] = ..., connection: _Optional[str] = ...) -> None: ...

class AgentTarget(_message.Message):
    __slots__ = ("a2a", "http", "openai_responses", "python", "connection", "cli")
    A2A_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    OPENAI_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    CLI_FIELD_NUMBER: _ClassVar[int]
    a2a: A2AAgent
    http: HttpAgent
    openai_responses: ResponsesAgent
    python: PythonAgent
    connection: str
    cli: CliAgent
    def __init__(self, a2a: _Optional[_Union[A2AAgent, _Mapping]] = ..., http: _Optional[_Union[HttpAgent, _Mapping]] = ..., openai_responses: _Optional[_Union[ResponsesAgent, _Mapping]] = ..., python: _Optional[_Union[PythonAgent, _Mapping]] = ..., connection: _Optional[str] = ..., cli: _Optional[_Union[CliAgent, _Mapping]] = ...) -> None: ...

class CliAgent(_message.Message):
    __slots__ = ("command", "timeout", "env")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    timeout: _duration_pb2.Duration
    env: _containers.ScalarMap[str, str]
    def __init__(self, command: _Optional[_Iterable[str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., env: _Optional[_Mapping[str, str]] = ...) -> None: ...

class A2AAgent(_message.Message):
    __slots__ = ("url", "timeout")
    URL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    url: str
    timeout: _duration_pb2.Duration
    def __init__(self, url: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class HttpAgent(_message.Message):
    __slots__ = ("url", "agent", "timeout")
    URL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    url: str
    agent: str
    timeout: _duration_pb2.Duration
    def __init__(self, url: _Optional[str] = ..., agent: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ResponsesAgent(_message.Message):
    __slots__ = ("base_url", "model", "api_key_env")
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    base_url: str
    model: str
    api_key_env: str
    def __init__(self, base_url: _Optional[str] = ..., model: _Optional[str] = ..., api_key_env: _Optional[str] = ...) -> None: ...

class PythonAgent(_message.Message):
    __slots__ = ("callable",)
    CALLABLE_FIELD_NUMBER: _ClassVar[int]
    callable: str
    def __init__(self, callable: _Optional[str] = ...) -> None: ...

class DatasetSource(_message.Message):
    __slots__ = ("path", "ref", "hf", "mapping", "limit", "format", "split")
    class MappingEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PATH_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    HF_FIELD_NUMBER: _ClassVar[int]
    MAPPING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    path: str
    ref: str
    hf: str
    mapping: _containers.ScalarMap[str, str]
    limit: int
    format: str
    split: str
    def __init__(self, path: _Optional[str] = ..., ref: _Optional[str] = ..., hf: _Optional[str] = ..., mapping: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ..., format: _Optional[str] = ..., split: _Optional[str] = ...) -> None: ...

class Budget(_message.Message):
    __slots__ = ("usd", "tokens", "wall_clock")
    USD_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    WALL_CLOCK_FIELD_NUMBER: _ClassVar[int]
    usd: float
    tokens: int
    wall_clock: _duration_pb2.Duration
    def __init__(self, usd: _Optional[float] = ..., tokens: _Optional[int] = ..., wall_clock: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class HarnessSpec(_message.Message):
    __slots__ = ("builtin", "environment")
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    builtin: BuiltinHarness
    environment: _struct_pb2.Struct
    def __init__(self, builtin: _Optional[_Union[BuiltinHarness, _Mapping]] = ..., environment: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class BuiltinHarness(_message.Message):
    __slots__ = ("max_steps", "budget", "tools", "user_simulator")
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    USER_SIMULATOR_FIELD_NUMBER: _ClassVar[int]
    max_steps: int
    budget: Budget
    tools: ToolsSpec
    user_simulator: UserSimulatorSpec
    def __init__(self, max_steps: _Optional[int] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., tools: _Optional[_Union[ToolsSpec, _Mapping]] = ..., user_simulator: _Optional[_Union[UserSimulatorSpec, _Mapping]] = ...) -> None: ...

class ToolsSpec(_message.Message):
    __slots__ = ("mcp", "python")
    MCP_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    mcp: _containers.RepeatedCompositeFieldContainer[McpServer]
    python: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, mcp: _Optional[_Iterable[_Union[McpServer, _Mapping]]] = ..., python: _Optional[_Iterable[str]] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ("url", "command")
    URL_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    url: str
    command: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, url: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ...) -> None: ...

class UserSimulatorSpec(_message.Message):
    __slots__ = ("judge", "persona")
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    PERSONA_FIELD_NUMBER: _ClassVar[int]
    judge: str
    persona: str
    def __init__(self, judge: _Optional[str] = ..., persona: _Optional[str] = ...) -> None: ...

class SandboxSpec(_message.Message):
    __slots__ = ("min_isolation", "network", "allow", "resources")
    CLASS_FIELD_NUMBER: _ClassVar[int]
    MIN_ISOLATION_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    min_isolation: str
    network: str
    allow: _containers.RepeatedScalarFieldContainer[str]
    resources: SandboxResources
    def __init__(self, min_isolation: _Optional[str] = ..., network: _Optional[str] = ..., allow: _Optional[_Iterable[str]] = ..., resources: _Optional[_Union[SandboxResources, _Mapping]] = ..., **kwargs) -> None: ...

class SandboxResources(_message.Message):
    __slots__ = ("timeout", "memory", "pids", "output_bytes", "cpu_seconds")
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    timeout: _duration_pb2.Duration
    memory: int
    pids: int
    output_bytes: int
    cpu_seconds: int
    def __init__(self, timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., memory: _Optional[int] = ..., pids: _Optional[int] = ..., output_bytes: _Optional[int] = ..., cpu_seconds: _Optional[int] = ...) -> None: ...

class SinkSpec(_message.Message):
    __slots__ = ("mlflow", "otel", "webhook")
    MLFLOW_FIELD_NUMBER: _ClassVar[int]
    OTEL_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_FIELD_NUMBER: _ClassVar[int]
    mlflow: MlflowSink
    otel: OtelSink
    webhook: WebhookSink
    def __init__(self, mlflow: _Optional[_Union[MlflowSink, _Mapping]] = ..., otel: _Optional[_Union[OtelSink, _Mapping]] = ..., webhook: _Optional[_Union[WebhookSink, _Mapping]] = ...) -> None: ...

class MlflowSink(_message.Message):
    __slots__ = ("experiment", "tracking_uri")
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    TRACKING_URI_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    tracking_uri: str
    def __init__(self, experiment: _Optional[str] = ..., tracking_uri: _Optional[str] = ...) -> None: ...

class OtelSink(_message.Message):
    __slots__ = ("endpoint",)
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    def __init__(self, endpoint: _Optional[str] = ...) -> None: ...

class WebhookSink(_message.Message):
    __slots__ = ("url", "secret_env")
    URL_FIELD_NUMBER: _ClassVar[int]
    SECRET_ENV_FIELD_NUMBER: _ClassVar[int]
    url: str
    secret_env: str
    def __init__(self, url: _Optional[str] = ..., secret_env: _Optional[str] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ("total_tasks", "completed", "scored", "skipped", "errors", "cancelled", "usage")
    TOTAL_TASKS_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SCORED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    total_tasks: int
    completed: int
    scored: int
    skipped: int
    errors: int
    cancelled: int
    usage: _record_pb2.Usage
    def __init__(self, total_tasks: _Optional[int] = ..., completed: _Optional[int] = ..., scored: _Optional[int] = ..., skipped: _Optional[int] = ..., errors: _Optional[int] = ..., cancelled: _Optional[int] = ..., usage: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ...) -> None: ...

class GateResult(_message.Message):
    __slots__ = ("expression", "passed", "message")
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    expression: str
    passed: bool
    message: str
    def __init__(self, expression: _Optional[str] = ..., passed: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class EvaluatorVersion(_message.Message):
    __slots__ = ("alias", "ref", "params", "judge", "template_hash")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_HASH_FIELD_NUMBER: _ClassVar[int]
    alias: str
    ref: str
    params: _struct_pb2.Struct
    judge: str
    template_hash: str
    def __init__(self, alias: _Optional[str] = ..., ref: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., judge: _Optional[str] = ..., template_hash: _Optional[str] = ...) -> None: ...

class RunManifest(_message.Message):
    __slots__ = ("spec_hash", "dataset", "dataset_version", "evaluators", "target", "judges", "seed", "package_versions", "evalsi_version", "unpinned", "created", "created_by", "isolation")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PackageVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPEC_HASH_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    EVALSI_VERSION_FIELD_NUMBER: _ClassVar[int]
    UNPINNED_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    spec_hash: str
    dataset: str
    dataset_version: str
    evaluators: _containers.RepeatedCompositeFieldContainer[EvaluatorVersion]
    target: str
    judges: _containers.ScalarMap[str, str]
    seed: int
    package_versions: _containers.ScalarMap[str, str]
    evalsi_version: str
    unpinned: _containers.RepeatedScalarFieldContainer[str]
    created: _timestamp_pb2.Timestamp
    created_by: str
    isolation: _containers.RepeatedCompositeFieldContainer[_record_pb2.IsolationReport]
    def __init__(self, spec_hash: _Optional[str] = ..., dataset: _Optional[str] = ..., dataset_version: _Optional[str] = ..., evaluators: _Optional[_Iterable[_Union[EvaluatorVersion, _Mapping]]] = ..., target: _Optional[str] = ..., judges: _Optional[_Mapping[str, str]] = ..., seed: _Optional[int] = ..., package_versions: _Optional[_Mapping[str, str]] = ..., evalsi_version: _Optional[str] = ..., unpinned: _Optional[_Iterable[str]] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., isolation: _Optional[_Iterable[_Union[_record_pb2.IsolationReport, _Mapping]]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("id", "project", "name", "spec", "state", "create_time", "start_time", "end_time", "progress", "summaries", "gates", "manifest", "message", "labels", "results", "tenant_id", "dry_run_plan", "created_by")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_PLAN_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    name: str
    spec: RunSpec
    state: RunState
    create_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    progress: RunProgress
    summaries: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    gates: _containers.RepeatedCompositeFieldContainer[GateResult]
    manifest: RunManifest
    message: str
    labels: _containers.ScalarMap[str, str]
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    tenant_id: str
    dry_run_plan: _struct_pb2.Struct
    created_by: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ..., name: _Optional[str] = ..., spec: _Optional[_Union[RunSpec, _Mapping]] = ..., state: _Optional[_Union[RunState, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., progress: _Optional[_Union[RunProgress, _Mapping]] = ..., summaries: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., gates: _Optional[_Iterable[_Union[GateResult, _Mapping]]] = ..., manifest: _Optional[_Union[RunManifest, _Mapping]] = ..., message: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., tenant_id: _Optional[str] = ..., dry_run_plan: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_by: _Optional[str] = ...) -> None: ...

class MetricComparison(_message.Message):
    __slots__ = ("metric", "n_pairs", "mean_a", "mean_b", "diff", "ci", "p_value", "test", "verdict", "mde", "unpaired", "p_value_adjusted")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    N_PAIRS_FIELD_NUMBER: _ClassVar[int]
    MEAN_A_FIELD_NUMBER: _ClassVar[int]
    MEAN_B_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    MDE_FIELD_NUMBER: _ClassVar[int]
    UNPAIRED_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_ADJUSTED_FIELD_NUMBER: _ClassVar[int]
    metric: str
    n_pairs: int
    mean_a: float
    mean_b: float
    diff: float
    ci: _score_pb2.ConfidenceInterval
    p_value: float
    test: str
    verdict: str
    mde: float
    unpaired: int
    p_value_adjusted: float
    def __init__(self, metric: _Optional[str] = ..., n_pairs: _Optional[int] = ..., mean_a: _Optional[float] = ..., mean_b: _Optional[float] = ..., diff: _Optional[float] = ..., ci: _Optional[_Union[_score_pb2.ConfidenceInterval, _Mapping]] = ..., p_value: _Optional[float] = ..., test: _Optional[str] = ..., verdict: _Optional[str] = ..., mde: _Optional[float] = ..., unpaired: _Optional[int] = ..., p_value_adjusted: _Optional[float] = ...) -> None: ...

class Comparison(_message.Message):
    __slots__ = ("run_a", "run_b", "metrics", "adjust")
    RUN_A_FIELD_NUMBER: _ClassVar[int]
    RUN_B_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    ADJUST_FIELD_NUMBER: _ClassVar[int]
    run_a: str
    run_b: str
    metrics: _containers.RepeatedCompositeFieldContainer[MetricComparison]
    adjust: str
    def __init__(self, run_a: _Optional[str] = ..., run_b: _Optional[str] = ..., metrics: _Optional[_Iterable[_Union[MetricComparison, _Mapping]]] = ..., adjust: _Optional[str] = ...) -> None: ...
