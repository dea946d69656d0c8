import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
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

class RunEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_EVENT_TYPE_UNSPECIFIED: _ClassVar[RunEventType]
    RUN_EVENT_TYPE_STATE: _ClassVar[RunEventType]
    RUN_EVENT_TYPE_PROGRESS: _ClassVar[RunEventType]
    RUN_EVENT_TYPE_SUMMARY: _ClassVar[RunEventType]
RUN_EVENT_TYPE_UNSPECIFIED: RunEventType
RUN_EVENT_TYPE_STATE: RunEventType
RUN_EVENT_TYPE_PROGRESS: RunEventType
RUN_EVENT_TYPE_SUMMARY: RunEventType

class UploadDatasetRequest(_message.Message):
    __slots__ = ("name", "filename", "format", "data", "project", "mapping", "limit")
    class MappingEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    MAPPING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    filename: str
    format: str
    data: bytes
    project: str
    mapping: _containers.ScalarMap[str, str]
    limit: int
    def __init__(self, name: _Optional[str] = ..., filename: _Optional[str] = ..., format: _Optional[str] = ..., data: _Optional[bytes] = ..., project: _Optional[str] = ..., mapping: _Optional[_Mapping[str, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class DatasetVersion(_message.Message):
    __slots__ = ("name", "version", "ref", "records", "create_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    ref: str
    records: int
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., ref: _Optional[str] = ..., records: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListDatasetVersionsRequest(_message.Message):
    __slots__ = ("name", "project")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    name: str
    project: str
    def __init__(self, name: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ListDatasetVersionsResponse(_message.Message):
    __slots__ = ("versions",)
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[DatasetVersion]
    def __init__(self, versions: _Optional[_Iterable[_Union[DatasetVersion, _Mapping]]] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ("run", "dry_run", "project")
    RUN_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.EvalRun
    dry_run: bool
    project: str
    def __init__(self, run: _Optional[_Union[_run_pb2.EvalRun, _Mapping]] = ..., dry_run: _Optional[bool] = ..., project: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("id", "project")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("project", "state", "name_contains", "labels", "page_size", "page_token", "all_projects", "created_after", "created_before")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    NAME_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ALL_PROJECTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    project: str
    state: _run_pb2.RunState
    name_contains: str
    labels: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    all_projects: bool
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    def __init__(self, project: _Optional[str] = ..., state: _Optional[_Union[_run_pb2.RunState, str]] = ..., name_contains: _Optional[str] = ..., labels: _Optional[_Iterable[str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., all_projects: _Optional[bool] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[_run_pb2.Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchRunRequest(_message.Message):
    __slots__ = ("id", "project")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("run_id", "type", "state", "progress", "summaries", "gates", "message", "time")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    GATES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    type: RunEventType
    state: _run_pb2.RunState
    progress: _run_pb2.RunProgress
    summaries: _containers.RepeatedCompositeFieldContainer[_score_pb2.MetricSummary]
    gates: _containers.RepeatedCompositeFieldContainer[_run_pb2.GateResult]
    message: str
    time: _timestamp_pb2.Timestamp
    def __init__(self, run_id: _Optional[str] = ..., type: _Optional[_Union[RunEventType, str]] = ..., state: _Optional[_Union[_run_pb2.RunState, str]] = ..., progress: _Optional[_Union[_run_pb2.RunProgress, _Mapping]] = ..., summaries: _Optional[_Iterable[_Union[_score_pb2.MetricSummary, _Mapping]]] = ..., gates: _Optional[_Iterable[_Union[_run_pb2.GateResult, _Mapping]]] = ..., message: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("id", "project")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ResumeRunRequest(_message.Message):
    __slots__ = ("id", "project")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class ListRunResultsRequest(_message.Message):
    __slots__ = ("id", "project", "evaluator", "page_size", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    evaluator: str
    page_size: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ..., evaluator: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunResultsResponse(_message.Message):
    __slots__ = ("results", "next_page_token")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    next_page_token: str
    def __init__(self, results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRunRecordsRequest(_message.Message):
    __slots__ = ("id", "project", "record_ids", "trial", "page_size", "page_token")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RECORD_IDS_FIELD_NUMBER: _ClassVar[int]
    TRIAL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    record_ids: _containers.RepeatedScalarFieldContainer[str]
    trial: int
    page_size: int
    page_token: str
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ..., record_ids: _Optional[_Iterable[str]] = ..., trial: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRunRecordsResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CompareRunsRequest(_message.Message):
    __slots__ = ("run_a", "run_b", "project", "confidence", "adjust")
    RUN_A_FIELD_NUMBER: _ClassVar[int]
    RUN_B_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ADJUST_FIELD_NUMBER: _ClassVar[int]
    run_a: str
    run_b: str
    project: str
    confidence: float
    adjust: str
    def __init__(self, run_a: _Optional[str] = ..., run_b: _Optional[str] = ..., project: _Optional[str] = ..., confidence: _Optional[float] = ..., adjust: _Optional[str] = ...) -> None: ...
