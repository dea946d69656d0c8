import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolCallStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_CALL_STATUS_UNSPECIFIED: _ClassVar[ToolCallStatus]
    TOOL_CALL_STATUS_OK: _ClassVar[ToolCallStatus]
    TOOL_CALL_STATUS_ERROR: _ClassVar[ToolCallStatus]
    TOOL_CALL_STATUS_BLOCKED: _ClassVar[ToolCallStatus]

class StepType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_TYPE_UNSPECIFIED: _ClassVar[StepType]
    STEP_TYPE_LLM: _ClassVar[StepType]
    STEP_TYPE_TOOL: _ClassVar[StepType]
    STEP_TYPE_RETRIEVAL: _ClassVar[StepType]
    STEP_TYPE_AGENT: _ClassVar[StepType]
    STEP_TYPE_CHAIN: _ClassVar[StepType]
    STEP_TYPE_EMBEDDING: _ClassVar[StepType]
    STEP_TYPE_RERANK: _ClassVar[StepType]
    STEP_TYPE_GUARDRAIL: _ClassVar[StepType]
    STEP_TYPE_HANDOFF: _ClassVar[StepType]
    STEP_TYPE_USER: _ClassVar[StepType]
    STEP_TYPE_GENERIC: _ClassVar[StepType]

class StepStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_STATUS_UNSPECIFIED: _ClassVar[StepStatus]
    STEP_STATUS_OK: _ClassVar[StepStatus]
    STEP_STATUS_ERROR: _ClassVar[StepStatus]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ISOLATION_LEVEL_UNSPECIFIED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_NONE: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_CONFINED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_NAMESPACED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_KERNEL: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_VM: _ClassVar[IsolationLevel]
TOOL_CALL_STATUS_UNSPECIFIED: ToolCallStatus
TOOL_CALL_STATUS_OK: ToolCallStatus
TOOL_CALL_STATUS_ERROR: ToolCallStatus
TOOL_CALL_STATUS_BLOCKED: ToolCallStatus
STEP_TYPE_UNSPECIFIED: StepType
STEP_TYPE_LLM: StepType
STEP_TYPE_TOOL: StepType
STEP_TYPE_RETRIEVAL: StepType
STEP_TYPE_AGENT: StepType
STEP_TYPE_CHAIN: StepType
STEP_TYPE_EMBEDDING: StepType
STEP_TYPE_RERANK: StepType
STEP_TYPE_GUARDRAIL: StepType
STEP_TYPE_HANDOFF: StepType
STEP_TYPE_USER: StepType
STEP_TYPE_GENERIC: StepType
STEP_STATUS_UNSPECIFIED: StepStatus
STEP_STATUS_OK: StepStatus
STEP_STATUS_ERROR: StepStatus
ISOLATION_LEVEL_UNSPECIFIED: IsolationLevel
ISOLATION_LEVEL_NONE: IsolationLevel
ISOLATION_LEVEL_CONFINED: IsolationLevel
ISOLATION_LEVEL_NAMESPACED: IsolationLevel
ISOLATION_LEVEL_KERNEL: IsolationLevel
ISOLATION_LEVEL_VM: IsolationLevel

class Record(_message.Message):
    __slots__ = ("id", "input", "output", "reference", "context", "trajectory", "usage", "metadata", "provenance")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    id: str
    input: Content
    output: Content
    reference: Content
    context: _containers.RepeatedCompositeFieldContainer[Content]
    trajectory: Trajectory
    usage: Usage
    metadata: _containers.MessageMap[str, _struct_pb2.Value]
    provenance: Provenance
    def __init__(self, id: _Optional[str] = ..., input: _Optional[_Union[Content, _Mapping]] = ..., output: _Optional[_Union[Content, _Mapping]] = ..., reference: _Optional[_Union[Content, _Mapping]] = ..., context: _Optional[_Iterable[_Union[Content, _Mapping]]] = ..., trajectory: _Optional[_Union[Trajectory, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., metadata: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ("text", "messages", "json", "row", "tensor", "media")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    text: str
    messages: Messages
    json: _struct_pb2.Value
    row: TabularRow
    tensor: Tensor
    media: MediaRef
    def __init__(self, text: _Optional[str] = ..., messages: _Optional[_Union[Messages, _Mapping]] = ..., json: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., row: _Optional[_Union[TabularRow, _Mapping]] = ..., tensor: _Optional[_Union[Tensor, _Mapping]] = ..., media: _Optional[_Union[MediaRef, _Mapping]] = ...) -> None: ...

class Messages(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments", "result", "status", "error", "blocked_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments: _struct_pb2.Value
    result: _struct_pb2.Value
    status: ToolCallStatus
    error: str
    blocked_by: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., status: _Optional[_Union[ToolCallStatus, str]] = ..., error: _Optional[str] = ..., blocked_by: _Optional[str] = ...) -> None: ...

class TabularRow(_message.Message):
    __slots__ = ("features", "prediction", "probabilities")
    class FeaturesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    class ProbabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    PREDICTION_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    features: _containers.MessageMap[str, _struct_pb2.Value]
    prediction: _struct_pb2.Value
    probabilities: _containers.ScalarMap[str, float]
    def __init__(self, features: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., prediction: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., probabilities: _Optional[_Mapping[str, float]] = ...) -> None: ...

class Tensor(_message.Message):
    __slots__ = ("shape", "dtype", "values", "data")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    values: _containers.RepeatedScalarFieldContainer[float]
    data: bytes
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[str] = ..., values: _Optional[_Iterable[float]] = ..., data: _Optional[bytes] = ...) -> None: ...

class MediaRef(_message.Message):
    __slots__ = ("uri", "mime_type", "sha256")
    URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    uri: str
    mime_type: str
    sha256: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class Trajectory(_message.Message):
    __slots__ = ("steps", "session_id", "trace_id")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[Step]
    session_id: str
    trace_id: str
    def __init__(self, steps: _Optional[_Iterable[_Union[Step, _Mapping]]] = ..., session_id: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ("id", "parent_id", "type", "name", "start_time", "duration", "model", "input", "output", "tool_call", "usage", "status", "error", "attributes", "span_id")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    type: StepType
    name: str
    start_time: _timestamp_pb2.Timestamp
    duration: _duration_pb2.Duration
    model: str
    input: Content
    output: Content
    tool_call: ToolCall
    usage: Usage
    status: StepStatus
    error: str
    attributes: _containers.MessageMap[str, _struct_pb2.Value]
    span_id: str
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., type: _Optional[_Union[StepType, str]] = ..., name: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., model: _Optional[str] = ..., input: _Optional[_Union[Content, _Mapping]] = ..., output: _Optional[_Union[Content, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., status: _Optional[_Union[StepStatus, str]] = ..., error: _Optional[str] = ..., attributes: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., span_id: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "latency", "time_to_first_token", "cached_input_tokens", "reasoning_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    TIME_TO_FIRST_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cost_usd: float
    latency: _duration_pb2.Duration
    time_to_first_token: _duration_pb2.Duration
    cached_input_tokens: int
    reasoning_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., time_to_first_token: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cached_input_tokens: _Optional[int] = ..., reasoning_tokens: _Optional[int] = ...) -> None: ...

class IsolationReport(_message.Message):
    __slots__ = ("requested", "achieved", "driver", "enforced", "not_enforced", "detail", "enforcement")
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ACHIEVED_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    ENFORCED_FIELD_NUMBER: _ClassVar[int]
    NOT_ENFORCED_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ENFORCEMENT_FIELD_NUMBER: _ClassVar[int]
    requested: IsolationLevel
    achieved: IsolationLevel
    driver: str
    enforced: _containers.RepeatedScalarFieldContainer[str]
    not_enforced: _containers.RepeatedScalarFieldContainer[str]
    detail: str
    enforcement: str
    def __init__(self, requested: _Optional[_Union[IsolationLevel, str]] = ..., achieved: _Optional[_Union[IsolationLevel, str]] = ..., driver: _Optional[str] = ..., enforced: _Optional[_Iterable[str]] = ..., not_enforced: _Optional[_Iterable[str]] = ..., detail: _Optional[str] = ..., enforcement: _Optional[str] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("run_id", "trace_id", "span_id", "dataset", "dataset_version", "sample_id", "trial", "target", "isolation", "project", "session_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    DATASET_VERSION_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_ID_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    trace_id: str
    span_id: str
    dataset: str
    dataset_version: str
    sample_id: str
    trial: int
    target: str
    isolation: IsolationReport
    project: str
    session_id: str
    def __init__(self, run_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., dataset: _Optional[str] = ..., dataset_version: _Optional[str] = ..., sample_id: _Optional[str] = ..., trial: _Optional[int] = ..., target: _Optional[str] = ..., isolation: _Optional[_Union[IsolationReport, _Mapping]] = ..., project: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...
