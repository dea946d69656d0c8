import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentCase(_message.Message):
    __slots__ = ("project", "tenant", "id", "agent", "path", "position", "line", "yaml", "yaml_hash", "create_time", "update_time", "problem")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    YAML_FIELD_NUMBER: _ClassVar[int]
    YAML_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    project: str
    tenant: str
    id: str
    agent: str
    path: str
    position: int
    line: int
    yaml: str
    yaml_hash: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    problem: str
    def __init__(self, project: _Optional[str] = ..., tenant: _Optional[str] = ..., id: _Optional[str] = ..., agent: _Optional[str] = ..., path: _Optional[str] = ..., position: _Optional[int] = ..., line: _Optional[int] = ..., yaml: _Optional[str] = ..., yaml_hash: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., problem: _Optional[str] = ...) -> None: ...

class ListCasesRequest(_message.Message):
    __slots__ = ("project", "tenant", "agent", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    tenant: str
    agent: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., tenant: _Optional[str] = ..., agent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCasesResponse(_message.Message):
    __slots__ = ("cases", "next_page_token")
    CASES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cases: _containers.RepeatedCompositeFieldContainer[AgentCase]
    next_page_token: str
    def __init__(self, cases: _Optional[_Iterable[_Union[AgentCase, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetCaseRequest(_message.Message):
    __slots__ = ("case_id", "project", "tenant")
    CASE_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    case_id: str
    project: str
    tenant: str
    def __init__(self, case_id: _Optional[str] = ..., project: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class CaseCounts(_message.Message):
    __slots__ = ("fail", "judge_pending", "skipped", "broken", "error")
    PASS_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    JUDGE_PENDING_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    BROKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    fail: int
    judge_pending: int
    skipped: int
    broken: int
    error: int
    def __init__(self, fail: _Optional[int] = ..., judge_pending: _Optional[int] = ..., skipped: _Optional[int] = ..., broken: _Optional[int] = ..., error: _Optional[int] = ..., **kwargs) -> None: ...

class CaseReport(_message.Message):
    __slots__ = ("id", "project", "tenant", "name", "agents", "counts", "pass_rate", "ci_low", "ci_high", "regressions", "simulated", "upload_time", "uploaded_by", "size_bytes", "report", "created")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    PASS_RATE_FIELD_NUMBER: _ClassVar[int]
    CI_LOW_FIELD_NUMBER: _ClassVar[int]
    CI_HIGH_FIELD_NUMBER: _ClassVar[int]
    REGRESSIONS_FIELD_NUMBER: _ClassVar[int]
    SIMULATED_FIELD_NUMBER: _ClassVar[int]
    UPLOAD_TIME_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_BY_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    tenant: str
    name: str
    agents: _containers.RepeatedScalarFieldContainer[str]
    counts: CaseCounts
    pass_rate: float
    ci_low: float
    ci_high: float
    regressions: int
    simulated: bool
    upload_time: _timestamp_pb2.Timestamp
    uploaded_by: str
    size_bytes: int
    report: _struct_pb2.Struct
    created: bool
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ..., tenant: _Optional[str] = ..., name: _Optional[str] = ..., agents: _Optional[_Iterable[str]] = ..., counts: _Optional[_Union[CaseCounts, _Mapping]] = ..., pass_rate: _Optional[float] = ..., ci_low: _Optional[float] = ..., ci_high: _Optional[float] = ..., regressions: _Optional[int] = ..., simulated: _Optional[bool] = ..., upload_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., uploaded_by: _Optional[str] = ..., size_bytes: _Optional[int] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class UploadCaseReportRequest(_message.Message):
    __slots__ = ("project", "name", "report")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    report: _struct_pb2.Struct
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., report: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ListCaseReportsRequest(_message.Message):
    __slots__ = ("project", "tenant", "agent", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    tenant: str
    agent: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., tenant: _Optional[str] = ..., agent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListCaseReportsResponse(_message.Message):
    __slots__ = ("reports", "next_page_token")
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedCompositeFieldContainer[CaseReport]
    next_page_token: str
    def __init__(self, reports: _Optional[_Iterable[_Union[CaseReport, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetCaseReportRequest(_message.Message):
    __slots__ = ("report_id", "project", "tenant")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    report_id: str
    project: str
    tenant: str
    def __init__(self, report_id: _Optional[str] = ..., project: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...
