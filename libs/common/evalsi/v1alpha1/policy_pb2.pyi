import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from evalsi.v1alpha1 import run_pb2 as _run_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OnlineEvalPolicy(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _run_pb2.ObjectMeta
    spec: PolicySpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_run_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PolicySpec, _Mapping]] = ...) -> None: ...

class PolicySpec(_message.Message):
    __slots__ = ("selector", "sampling", "cascade", "window", "alerts", "promote")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    CASCADE_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_FIELD_NUMBER: _ClassVar[int]
    selector: str
    sampling: PolicySampling
    cascade: _containers.RepeatedCompositeFieldContainer[CascadeStage]
    window: _duration_pb2.Duration
    alerts: _containers.RepeatedCompositeFieldContainer[PolicyAlert]
    promote: PolicyPromotion
    def __init__(self, selector: _Optional[str] = ..., sampling: _Optional[_Union[PolicySampling, _Mapping]] = ..., cascade: _Optional[_Iterable[_Union[CascadeStage, _Mapping]]] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., alerts: _Optional[_Iterable[_Union[PolicyAlert, _Mapping]]] = ..., promote: _Optional[_Union[PolicyPromotion, _Mapping]] = ...) -> None: ...

class PolicySampling(_message.Message):
    __slots__ = ("rate", "always")
    RATE_FIELD_NUMBER: _ClassVar[int]
    ALWAYS_FIELD_NUMBER: _ClassVar[int]
    rate: float
    always: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rate: _Optional[float] = ..., always: _Optional[_Iterable[str]] = ...) -> None: ...

class CascadeStage(_message.Message):
    __slots__ = ("ref", "alias", "params", "when", "judge")
    REF_FIELD_NUMBER: _ClassVar[int]
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    ref: str
    alias: str
    params: _struct_pb2.Struct
    when: str
    judge: str
    def __init__(self, ref: _Optional[str] = ..., alias: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., when: _Optional[str] = ..., judge: _Optional[str] = ...) -> None: ...

class PolicyAlert(_message.Message):
    __slots__ = ("when", "notify", "min_samples", "secret_env")
    WHEN_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    MIN_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    SECRET_ENV_FIELD_NUMBER: _ClassVar[int]
    when: str
    notify: str
    min_samples: int
    secret_env: str
    def __init__(self, when: _Optional[str] = ..., notify: _Optional[str] = ..., min_samples: _Optional[int] = ..., secret_env: _Optional[str] = ...) -> None: ...

class PolicyPromotion(_message.Message):
    __slots__ = ("when", "dataset")
    WHEN_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    when: str
    dataset: str
    def __init__(self, when: _Optional[str] = ..., dataset: _Optional[str] = ...) -> None: ...
