import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Scope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCOPE_UNSPECIFIED: _ClassVar[Scope]
    SCOPE_RECORD: _ClassVar[Scope]
    SCOPE_SESSION: _ClassVar[Scope]
    SCOPE_SPAN: _ClassVar[Scope]
    SCOPE_DATASET: _ClassVar[Scope]
    SCOPE_COMPARATIVE: _ClassVar[Scope]
SCOPE_UNSPECIFIED: Scope
SCOPE_RECORD: Scope
SCOPE_SESSION: Scope
SCOPE_SPAN: Scope
SCOPE_DATASET: Scope
SCOPE_COMPARATIVE: Scope

class EvaluatorRef(_message.Message):
    __slots__ = ("ref", "alias", "params", "judge")
    REF_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    ref: str
    alias: str
    params: _struct_pb2.Struct
    judge: str
    def __init__(self, ref: _Optional[str] = ..., alias: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., judge: _Optional[str] = ...) -> None: ...

class Requirements(_message.Message):
    __slots__ = ("input", "output", "reference", "context", "trajectory", "judge", "isolation", "usage", "metadata")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TRAJECTORY_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    input: bool
    output: bool
    reference: bool
    context: bool
    trajectory: bool
    judge: bool
    isolation: _record_pb2.IsolationLevel
    usage: bool
    metadata: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, input: _Optional[bool] = ..., output: _Optional[bool] = ..., reference: _Optional[bool] = ..., context: _Optional[bool] = ..., trajectory: _Optional[bool] = ..., judge: _Optional[bool] = ..., isolation: _Optional[_Union[_record_pb2.IsolationLevel, str]] = ..., usage: _Optional[bool] = ..., metadata: _Optional[_Iterable[str]] = ...) -> None: ...

class OutputSpec(_message.Message):
    __slots__ = ("name", "type", "min", "max", "higher_is_better", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: _score_pb2.ValueKind
    min: float
    max: float
    higher_is_better: bool
    description: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[_score_pb2.ValueKind, str]] = ..., min: _Optional[float] = ..., max: _Optional[float] = ..., higher_is_better: _Optional[bool] = ..., description: _Optional[str] = ...) -> None: ...

class ParamSpec(_message.Message):
    __slots__ = ("name", "type", "description", "default", "required", "choices")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    CHOICES_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    description: str
    default: _struct_pb2.Value
    required: bool
    choices: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., description: _Optional[str] = ..., default: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., required: _Optional[bool] = ..., choices: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ...) -> None: ...

class Scheduling(_message.Message):
    __slots__ = ("pool", "batchable", "max_batch", "timeout")
    POOL_FIELD_NUMBER: _ClassVar[int]
    BATCHABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    pool: str
    batchable: bool
    max_batch: int
    timeout: _duration_pb2.Duration
    def __init__(self, pool: _Optional[str] = ..., batchable: _Optional[bool] = ..., max_batch: _Optional[int] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class EvaluatorManifest(_message.Message):
    __slots__ = ("name", "version", "pack", "scope", "description", "requires", "outputs", "params_schema", "params", "scheduling", "modalities", "tier")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PACK_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_FIELD_NUMBER: _ClassVar[int]
    MODALITIES_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    pack: str
    scope: Scope
    description: str
    requires: Requirements
    outputs: _containers.RepeatedCompositeFieldContainer[OutputSpec]
    params_schema: _struct_pb2.Struct
    params: _containers.RepeatedCompositeFieldContainer[ParamSpec]
    scheduling: Scheduling
    modalities: _containers.RepeatedScalarFieldContainer[str]
    tier: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., pack: _Optional[str] = ..., scope: _Optional[_Union[Scope, str]] = ..., description: _Optional[str] = ..., requires: _Optional[_Union[Requirements, _Mapping]] = ..., outputs: _Optional[_Iterable[_Union[OutputSpec, _Mapping]]] = ..., params_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., params: _Optional[_Iterable[_Union[ParamSpec, _Mapping]]] = ..., scheduling: _Optional[_Union[Scheduling, _Mapping]] = ..., modalities: _Optional[_Iterable[str]] = ..., tier: _Optional[str] = ...) -> None: ...

class JudgeSpec(_message.Message):
    __slots__ = ("connector", "model", "base_url", "api_key_env", "params", "template", "timeout_s", "max_retries", "rpm", "tpm", "secret_ref", "connection")
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    API_KEY_ENV_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    RPM_FIELD_NUMBER: _ClassVar[int]
    TPM_FIELD_NUMBER: _ClassVar[int]
    SECRET_REF_FIELD_NUMBER: _ClassVar[int]
    CONNECTION_FIELD_NUMBER: _ClassVar[int]
    connector: str
    model: str
    base_url: str
    api_key_env: str
    params: _struct_pb2.Struct
    template: str
    timeout_s: float
    max_retries: int
    rpm: int
    tpm: int
    secret_ref: str
    connection: str
    def __init__(self, connector: _Optional[str] = ..., model: _Optional[str] = ..., base_url: _Optional[str] = ..., api_key_env: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., template: _Optional[str] = ..., timeout_s: _Optional[float] = ..., max_retries: _Optional[int] = ..., rpm: _Optional[int] = ..., tpm: _Optional[int] = ..., secret_ref: _Optional[str] = ..., connection: _Optional[str] = ...) -> None: ...
