from google.api import annotations_pb2 as _annotations_pb2
from evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EvaluateRequest(_message.Message):
    __slots__ = ("project", "records", "evaluators", "judges", "summary", "store", "request_id")
    class JudgesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _evaluator_pb2.JudgeSpec
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_evaluator_pb2.JudgeSpec, _Mapping]] = ...) -> None: ...
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project: str
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorRef]
    judges: _containers.MessageMap[str, _evaluator_pb2.JudgeSpec]
    summary: _score_pb2.SummaryOptions
    store: bool
    request_id: str
    def __init__(self, project: _Optional[str] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorRef, _Mapping]]] = ..., judges: _Optional[_Mapping[str, _evaluator_pb2.JudgeSpec]] = ..., summary: _Optional[_Union[_score_pb2.SummaryOptions, _Mapping]] = ..., store: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("results", "summaries", "request_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    summaries: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    request_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., summaries: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...
