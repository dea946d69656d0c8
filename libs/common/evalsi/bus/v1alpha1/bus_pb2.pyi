from evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi.v1alpha1 import run_pb2 as _run_pb2
from evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Stage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_UNSPECIFIED: _ClassVar[Stage]
    STAGE_GENERATE: _ClassVar[Stage]
    STAGE_EVALUATE: _ClassVar[Stage]
    STAGE_REDUCE: _ClassVar[Stage]

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATUS_UNSPECIFIED: _ClassVar[TaskStatus]
    TASK_STATUS_DONE: _ClassVar[TaskStatus]
    TASK_STATUS_FAILED: _ClassVar[TaskStatus]
    TASK_STATUS_CANCELLED: _ClassVar[TaskStatus]

class ControlAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTROL_ACTION_UNSPECIFIED: _ClassVar[ControlAction]
    CONTROL_ACTION_CREATED: _ClassVar[ControlAction]
    CONTROL_ACTION_CANCEL: _ClassVar[ControlAction]
    CONTROL_ACTION_RESUME: _ClassVar[ControlAction]
STAGE_UNSPECIFIED: Stage
STAGE_GENERATE: Stage
STAGE_EVALUATE: Stage
STAGE_REDUCE: Stage
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_DONE: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_CANCELLED: TaskStatus
CONTROL_ACTION_UNSPECIFIED: ControlAction
CONTROL_ACTION_CREATED: ControlAction
CONTROL_ACTION_CANCEL: ControlAction
CONTROL_ACTION_RESUME: ControlAction

class Task(_message.Message):
    __slots__ = ("key", "run_id", "project", "shard", "stage", "trial", "records", "evaluators", "judges", "target", "records_ref", "summary", "seed", "harness", "sandbox")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _evaluator_pb2.JudgeSpec
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_evaluator_pb2.JudgeSpec, _Mapping]] = ...) -> None: ...
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_REF_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    HARNESS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FIELD_NUMBER: _ClassVar[int]
    key: str
    run_id: str
    project: str
    shard: int
    stage: Stage
    trial: int
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorRef]
    judges: _containers.MessageMap[str, _evaluator_pb2.JudgeSpec]
    target: _run_pb2.Target
    records_ref: str
    summary: _score_pb2.SummaryOptions
    seed: int
    harness: _run_pb2.HarnessSpec
    sandbox: _run_pb2.SandboxSpec
    def __init__(self, key: _Optional[str] = ..., run_id: _Optional[str] = ..., project: _Optional[str] = ..., shard: _Optional[int] = ..., stage: _Optional[_Union[Stage, str]] = ..., trial: _Optional[int] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorRef, _Mapping]]] = ..., judges: _Optional[_Mapping[str, _evaluator_pb2.JudgeSpec]] = ..., target: _Optional[_Union[_run_pb2.Target, _Mapping]] = ..., records_ref: _Optional[str] = ..., summary: _Optional[_Union[_score_pb2.SummaryOptions, _Mapping]] = ..., seed: _Optional[int] = ..., harness: _Optional[_Union[_run_pb2.HarnessSpec, _Mapping]] = ..., sandbox: _Optional[_Union[_run_pb2.SandboxSpec, _Mapping]] = ...) -> None: ...

class TaskRecords(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    def __init__(self, records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ...) -> None: ...

class TaskResult(_message.Message):
    __slots__ = ("key", "run_id", "project", "shard", "stage", "trial", "status", "results", "records", "records_ref", "usage", "error", "error_kind", "worker", "delivery", "columns")
    KEY_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_REF_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    key: str
    run_id: str
    project: str
    shard: int
    stage: Stage
    trial: int
    status: TaskStatus
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    records_ref: str
    usage: _record_pb2.Usage
    error: str
    error_kind: _score_pb2.ErrorKind
    worker: str
    delivery: int
    columns: ResultColumns
    def __init__(self, key: _Optional[str] = ..., run_id: _Optional[str] = ..., project: _Optional[str] = ..., shard: _Optional[int] = ..., stage: _Optional[_Union[Stage, str]] = ..., trial: _Optional[int] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., records_ref: _Optional[str] = ..., usage: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ..., error: _Optional[str] = ..., error_kind: _Optional[_Union[_score_pb2.ErrorKind, str]] = ..., worker: _Optional[str] = ..., delivery: _Optional[int] = ..., columns: _Optional[_Union[ResultColumns, _Mapping]] = ...) -> None: ...

class ResultColumns(_message.Message):
    __slots__ = ("data", "evaluators", "record_ids", "trials", "outcomes", "values", "score_names")
    DATA_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    RECORD_IDS_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SCORE_NAMES_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedScalarFieldContainer[bytes]
    evaluators: _containers.RepeatedScalarFieldContainer[str]
    record_ids: _containers.RepeatedScalarFieldContainer[str]
    trials: _containers.RepeatedScalarFieldContainer[int]
    outcomes: _containers.RepeatedScalarFieldContainer[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    score_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, data: _Optional[_Iterable[bytes]] = ..., evaluators: _Optional[_Iterable[str]] = ..., record_ids: _Optional[_Iterable[str]] = ..., trials: _Optional[_Iterable[int]] = ..., outcomes: _Optional[_Iterable[int]] = ..., values: _Optional[_Iterable[float]] = ..., score_names: _Optional[_Iterable[str]] = ...) -> None: ...

class RunControl(_message.Message):
    __slots__ = ("run_id", "project", "action")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    project: str
    action: ControlAction
    def __init__(self, run_id: _Optional[str] = ..., project: _Optional[str] = ..., action: _Optional[_Union[ControlAction, str]] = ...) -> None: ...

class TraceCompleted(_message.Message):
    __slots__ = ("project", "trace_id", "revision", "root_seen", "completed_at", "reason")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    ROOT_SEEN_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    project: str
    trace_id: str
    revision: int
    root_seen: bool
    completed_at: float
    reason: str
    def __init__(self, project: _Optional[str] = ..., trace_id: _Optional[str] = ..., revision: _Optional[int] = ..., root_seen: _Optional[bool] = ..., completed_at: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class ObservedTrace(_message.Message):
    __slots__ = ("project", "trace_id", "has_root")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_ROOT_FIELD_NUMBER: _ClassVar[int]
    project: str
    trace_id: str
    has_root: bool
    def __init__(self, project: _Optional[str] = ..., trace_id: _Optional[str] = ..., has_root: _Optional[bool] = ...) -> None: ...

class TracesObserved(_message.Message):
    __slots__ = ("traces",)
    TRACES_FIELD_NUMBER: _ClassVar[int]
    traces: _containers.RepeatedCompositeFieldContainer[ObservedTrace]
    def __init__(self, traces: _Optional[_Iterable[_Union[ObservedTrace, _Mapping]]] = ...) -> None: ...
