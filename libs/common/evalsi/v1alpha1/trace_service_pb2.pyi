import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListTracesRequest(_message.Message):
    __slots__ = ("project", "service_name", "start_time", "end_time", "has_error", "session_id", "min_score", "max_score", "score_metric", "page_size", "page_token", "labels")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    HAS_ERROR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    MAX_SCORE_FIELD_NUMBER: _ClassVar[int]
    SCORE_METRIC_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    project: str
    service_name: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    has_error: bool
    session_id: str
    min_score: float
    max_score: float
    score_metric: str
    page_size: int
    page_token: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, project: _Optional[str] = ..., service_name: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., has_error: _Optional[bool] = ..., session_id: _Optional[str] = ..., min_score: _Optional[float] = ..., max_score: _Optional[float] = ..., score_metric: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ...) -> None: ...

class TraceSummary(_message.Message):
    __slots__ = ("trace_id", "project", "root_span_id", "root_name", "service_name", "session_id", "start_time", "duration", "span_count", "error_count", "input_tokens", "output_tokens", "revision", "update_time", "complete_time", "completions", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    ROOT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    SPAN_COUNT_FIELD_NUMBER: _ClassVar[int]
    ERROR_COUNT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    project: str
    root_span_id: str
    root_name: str
    service_name: str
    session_id: str
    start_time: _timestamp_pb2.Timestamp
    duration: _duration_pb2.Duration
    span_count: int
    error_count: int
    input_tokens: int
    output_tokens: int
    revision: int
    update_time: _timestamp_pb2.Timestamp
    complete_time: _timestamp_pb2.Timestamp
    completions: int
    labels: _containers.ScalarMap[str, str]
    def __init__(self, trace_id: _Optional[str] = ..., project: _Optional[str] = ..., root_span_id: _Optional[str] = ..., root_name: _Optional[str] = ..., service_name: _Optional[str] = ..., session_id: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., span_count: _Optional[int] = ..., error_count: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., revision: _Optional[int] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., complete_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completions: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ListTracesResponse(_message.Message):
    __slots__ = ("traces", "next_page_token")
    TRACES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    traces: _containers.RepeatedCompositeFieldContainer[TraceSummary]
    next_page_token: str
    def __init__(self, traces: _Optional[_Iterable[_Union[TraceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("trace_id", "project")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    project: str
    def __init__(self, trace_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class TraceNode(_message.Message):
    __slots__ = ("span_id", "parent_span_id", "depth", "step_index", "orphan", "child_count")
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_FIELD_NUMBER: _ClassVar[int]
    CHILD_COUNT_FIELD_NUMBER: _ClassVar[int]
    span_id: str
    parent_span_id: str
    depth: int
    step_index: int
    orphan: bool
    child_count: int
    def __init__(self, span_id: _Optional[str] = ..., parent_span_id: _Optional[str] = ..., depth: _Optional[int] = ..., step_index: _Optional[int] = ..., orphan: _Optional[bool] = ..., child_count: _Optional[int] = ...) -> None: ...

class Trace(_message.Message):
    __slots__ = ("summary", "tree", "record", "scores", "feedback")
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TREE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    summary: TraceSummary
    tree: _containers.RepeatedCompositeFieldContainer[TraceNode]
    record: _record_pb2.Record
    scores: _containers.RepeatedCompositeFieldContainer[TraceScore]
    feedback: _containers.RepeatedCompositeFieldContainer[TraceFeedback]
    def __init__(self, summary: _Optional[_Union[TraceSummary, _Mapping]] = ..., tree: _Optional[_Iterable[_Union[TraceNode, _Mapping]]] = ..., record: _Optional[_Union[_record_pb2.Record, _Mapping]] = ..., scores: _Optional[_Iterable[_Union[TraceScore, _Mapping]]] = ..., feedback: _Optional[_Iterable[_Union[TraceFeedback, _Mapping]]] = ...) -> None: ...

class TraceScore(_message.Message):
    __slots__ = ("policy", "stage", "metric", "evaluator", "outcome", "value", "passed", "label", "reason", "revision", "score_time")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SCORE_TIME_FIELD_NUMBER: _ClassVar[int]
    policy: str
    stage: str
    metric: str
    evaluator: str
    outcome: str
    value: float
    passed: bool
    label: str
    reason: str
    revision: int
    score_time: _timestamp_pb2.Timestamp
    def __init__(self, policy: _Optional[str] = ..., stage: _Optional[str] = ..., metric: _Optional[str] = ..., evaluator: _Optional[str] = ..., outcome: _Optional[str] = ..., value: _Optional[float] = ..., passed: _Optional[bool] = ..., label: _Optional[str] = ..., reason: _Optional[str] = ..., revision: _Optional[int] = ..., score_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TraceFeedback(_message.Message):
    __slots__ = ("id", "trace_id", "session_id", "name", "value", "label", "comment", "source", "negative", "create_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    trace_id: str
    session_id: str
    name: str
    value: float
    label: str
    comment: str
    source: str
    negative: bool
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., trace_id: _Optional[str] = ..., session_id: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[float] = ..., label: _Optional[str] = ..., comment: _Optional[str] = ..., source: _Optional[str] = ..., negative: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AddFeedbackRequest(_message.Message):
    __slots__ = ("project", "feedback")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    project: str
    feedback: TraceFeedback
    def __init__(self, project: _Optional[str] = ..., feedback: _Optional[_Union[TraceFeedback, _Mapping]] = ...) -> None: ...
