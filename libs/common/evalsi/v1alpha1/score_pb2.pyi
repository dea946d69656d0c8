import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_SCORED: _ClassVar[Outcome]
    OUTCOME_SKIPPED: _ClassVar[Outcome]
    OUTCOME_ERROR: _ClassVar[Outcome]
    OUTCOME_CANCELLED: _ClassVar[Outcome]

class ErrorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_KIND_UNSPECIFIED: _ClassVar[ErrorKind]
    ERROR_KIND_EVALUATOR: _ClassVar[ErrorKind]
    ERROR_KIND_INFRA: _ClassVar[ErrorKind]

class ValueKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VALUE_KIND_UNSPECIFIED: _ClassVar[ValueKind]
    VALUE_KIND_NUMBER: _ClassVar[ValueKind]
    VALUE_KIND_BOOLEAN: _ClassVar[ValueKind]
    VALUE_KIND_LABEL: _ClassVar[ValueKind]
    VALUE_KIND_STRUCTURED: _ClassVar[ValueKind]
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_SCORED: Outcome
OUTCOME_SKIPPED: Outcome
OUTCOME_ERROR: Outcome
OUTCOME_CANCELLED: Outcome
ERROR_KIND_UNSPECIFIED: ErrorKind
ERROR_KIND_EVALUATOR: ErrorKind
ERROR_KIND_INFRA: ErrorKind
VALUE_KIND_UNSPECIFIED: ValueKind
VALUE_KIND_NUMBER: ValueKind
VALUE_KIND_BOOLEAN: ValueKind
VALUE_KIND_LABEL: ValueKind
VALUE_KIND_STRUCTURED: ValueKind

class Score(_message.Message):
    __slots__ = ("name", "number", "passed", "label", "structured", "explanation", "confidence", "cost", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    number: float
    passed: bool
    label: str
    structured: _struct_pb2.Value
    explanation: str
    confidence: float
    cost: _record_pb2.Usage
    metadata: _containers.MessageMap[str, _struct_pb2.Value]
    def __init__(self, name: _Optional[str] = ..., number: _Optional[float] = ..., passed: _Optional[bool] = ..., label: _Optional[str] = ..., structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., explanation: _Optional[str] = ..., confidence: _Optional[float] = ..., cost: _Optional[_Union[_record_pb2.Usage, _Mapping]] = ..., metadata: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class EvaluationResult(_message.Message):
    __slots__ = ("record_id", "evaluator", "evaluator_ref", "outcome", "scores", "reason", "duration", "trial", "error_kind", "cluster")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_REF_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    record_id: str
    evaluator: str
    evaluator_ref: str
    outcome: Outcome
    scores: _containers.RepeatedCompositeFieldContainer[Score]
    reason: str
    duration: _duration_pb2.Duration
    trial: int
    error_kind: ErrorKind
    cluster: str
    def __init__(self, record_id: _Optional[str] = ..., evaluator: _Optional[str] = ..., evaluator_ref: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., scores: _Optional[_Iterable[_Union[Score, _Mapping]]] = ..., reason: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., trial: _Optional[int] = ..., error_kind: _Optional[_Union[ErrorKind, str]] = ..., cluster: _Optional[str] = ...) -> None: ...

class ConfidenceInterval(_message.Message):
    __slots__ = ("low", "high", "level", "method")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    level: float
    method: str
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ..., level: _Optional[float] = ..., method: _Optional[str] = ...) -> None: ...

class LabelCount(_message.Message):
    __slots__ = ("count", "share", "ci")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    count: int
    share: float
    ci: ConfidenceInterval
    def __init__(self, count: _Optional[int] = ..., share: _Optional[float] = ..., ci: _Optional[_Union[ConfidenceInterval, _Mapping]] = ...) -> None: ...

class MetricSummary(_message.Message):
    __slots__ = ("metric", "evaluator", "n", "mean", "std", "ci", "skipped", "errors", "kind", "labels", "infra_errors", "cancelled", "clusters", "k", "higher_is_better", "error_kinds")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: LabelCount
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[LabelCount, _Mapping]] = ...) -> None: ...
    METRIC_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_FIELD_NUMBER: _ClassVar[int]
    CI_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERRORS_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    HIGHER_IS_BETTER_FIELD_NUMBER: _ClassVar[int]
    ERROR_KINDS_FIELD_NUMBER: _ClassVar[int]
    metric: str
    evaluator: str
    n: int
    mean: float
    std: float
    ci: ConfidenceInterval
    skipped: int
    errors: int
    kind: ValueKind
    labels: _containers.MessageMap[str, LabelCount]
    infra_errors: int
    cancelled: int
    clusters: int
    k: int
    higher_is_better: bool
    error_kinds: _containers.RepeatedCompositeFieldContainer[ErrorTally]
    def __init__(self, metric: _Optional[str] = ..., evaluator: _Optional[str] = ..., n: _Optional[int] = ..., mean: _Optional[float] = ..., std: _Optional[float] = ..., ci: _Optional[_Union[ConfidenceInterval, _Mapping]] = ..., skipped: _Optional[int] = ..., errors: _Optional[int] = ..., kind: _Optional[_Union[ValueKind, str]] = ..., labels: _Optional[_Mapping[str, LabelCount]] = ..., infra_errors: _Optional[int] = ..., cancelled: _Optional[int] = ..., clusters: _Optional[int] = ..., k: _Optional[int] = ..., higher_is_better: _Optional[bool] = ..., error_kinds: _Optional[_Iterable[_Union[ErrorTally, _Mapping]]] = ...) -> None: ...

class ErrorTally(_message.Message):
    __slots__ = ("kind", "count", "first_reason")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_REASON_FIELD_NUMBER: _ClassVar[int]
    kind: ErrorKind
    count: int
    first_reason: str
    def __init__(self, kind: _Optional[_Union[ErrorKind, str]] = ..., count: _Optional[int] = ..., first_reason: _Optional[str] = ...) -> None: ...

class SummaryOptions(_message.Message):
    __slots__ = ("confidence", "cluster_by", "interval", "seed", "bootstrap_resamples", "pass_k")
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_BY_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_RESAMPLES_FIELD_NUMBER: _ClassVar[int]
    PASS_K_FIELD_NUMBER: _ClassVar[int]
    confidence: float
    cluster_by: str
    interval: str
    seed: int
    bootstrap_resamples: int
    pass_k: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, confidence: _Optional[float] = ..., cluster_by: _Optional[str] = ..., interval: _Optional[str] = ..., seed: _Optional[int] = ..., bootstrap_resamples: _Optional[int] = ..., pass_k: _Optional[_Iterable[int]] = ...) -> None: ...
