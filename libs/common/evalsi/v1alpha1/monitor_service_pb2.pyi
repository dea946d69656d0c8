import datetime

from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from evalsi.v1alpha1 import policy_pb2 as _policy_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AlertDelivery(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALERT_DELIVERY_UNSPECIFIED: _ClassVar[AlertDelivery]
    ALERT_DELIVERY_DELIVERED: _ClassVar[AlertDelivery]
    ALERT_DELIVERY_FAILED: _ClassVar[AlertDelivery]
    ALERT_DELIVERY_NOT_SENT: _ClassVar[AlertDelivery]
ALERT_DELIVERY_UNSPECIFIED: AlertDelivery
ALERT_DELIVERY_DELIVERED: AlertDelivery
ALERT_DELIVERY_FAILED: AlertDelivery
ALERT_DELIVERY_NOT_SENT: AlertDelivery

class ApplyPolicyRequest(_message.Message):
    __slots__ = ("policy", "project", "dry_run")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    policy: _policy_pb2.OnlineEvalPolicy
    project: str
    dry_run: bool
    def __init__(self, policy: _Optional[_Union[_policy_pb2.OnlineEvalPolicy, _Mapping]] = ..., project: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class Policy(_message.Message):
    __slots__ = ("project", "name", "policy", "generation", "spec_hash", "update_time", "changed")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    SPEC_HASH_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    policy: _policy_pb2.OnlineEvalPolicy
    generation: int
    spec_hash: str
    update_time: _timestamp_pb2.Timestamp
    changed: bool
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., policy: _Optional[_Union[_policy_pb2.OnlineEvalPolicy, _Mapping]] = ..., generation: _Optional[int] = ..., spec_hash: _Optional[str] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = ("project", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPoliciesResponse(_message.Message):
    __slots__ = ("policies", "next_page_token")
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[Policy]
    next_page_token: str
    def __init__(self, policies: _Optional[_Iterable[_Union[Policy, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("name", "project")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    name: str
    project: str
    def __init__(self, name: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class DeletePolicyRequest(_message.Message):
    __slots__ = ("name", "project")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    name: str
    project: str
    def __init__(self, name: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class GetPolicyStatsRequest(_message.Message):
    __slots__ = ("name", "project", "start_time", "end_time", "last_windows", "per_window")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_WINDOWS_FIELD_NUMBER: _ClassVar[int]
    PER_WINDOW_FIELD_NUMBER: _ClassVar[int]
    name: str
    project: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    last_windows: int
    per_window: bool
    def __init__(self, name: _Optional[str] = ..., project: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_windows: _Optional[int] = ..., per_window: _Optional[bool] = ...) -> None: ...

class MetricStats(_message.Message):
    __slots__ = ("metric", "stage", "evaluator", "n", "mean", "std", "ci_low", "ci_high", "level", "method", "pass_fail", "skipped", "no_content", "errors")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    MEAN_FIELD_NUMBER: _ClassVar[int]
    STD_FIELD_NUMBER: _ClassVar[int]
    CI_LOW_FIELD_NUMBER: _ClassVar[int]
    CI_HIGH_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PASS_FAIL_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    NO_CONTENT_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    metric: str
    stage: str
    evaluator: str
    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float
    level: float
    method: str
    pass_fail: bool
    skipped: int
    no_content: int
    errors: int
    def __init__(self, metric: _Optional[str] = ..., stage: _Optional[str] = ..., evaluator: _Optional[str] = ..., n: _Optional[int] = ..., mean: _Optional[float] = ..., std: _Optional[float] = ..., ci_low: _Optional[float] = ..., ci_high: _Optional[float] = ..., level: _Optional[float] = ..., method: _Optional[str] = ..., pass_fail: _Optional[bool] = ..., skipped: _Optional[int] = ..., no_content: _Optional[int] = ..., errors: _Optional[int] = ...) -> None: ...

class WindowStats(_message.Message):
    __slots__ = ("start_time", "end_time", "traces_evaluated", "metrics", "alerts")
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TRACES_EVALUATED_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    traces_evaluated: int
    metrics: _containers.RepeatedCompositeFieldContainer[MetricStats]
    alerts: _containers.RepeatedCompositeFieldContainer[WindowAlert]
    def __init__(self, start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traces_evaluated: _Optional[int] = ..., metrics: _Optional[_Iterable[_Union[MetricStats, _Mapping]]] = ..., alerts: _Optional[_Iterable[_Union[WindowAlert, _Mapping]]] = ...) -> None: ...

class WindowAlert(_message.Message):
    __slots__ = ("rule", "when", "held", "reason", "evaluated")
    RULE_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_FIELD_NUMBER: _ClassVar[int]
    rule: int
    when: str
    held: bool
    reason: str
    evaluated: bool
    def __init__(self, rule: _Optional[int] = ..., when: _Optional[str] = ..., held: _Optional[bool] = ..., reason: _Optional[str] = ..., evaluated: _Optional[bool] = ...) -> None: ...

class PolicyStats(_message.Message):
    __slots__ = ("project", "name", "generation", "window", "start_time", "end_time", "traces_evaluated", "metrics", "windows")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    TRACES_EVALUATED_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    generation: int
    window: _duration_pb2.Duration
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    traces_evaluated: int
    metrics: _containers.RepeatedCompositeFieldContainer[MetricStats]
    windows: _containers.RepeatedCompositeFieldContainer[WindowStats]
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., generation: _Optional[int] = ..., window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., traces_evaluated: _Optional[int] = ..., metrics: _Optional[_Iterable[_Union[MetricStats, _Mapping]]] = ..., windows: _Optional[_Iterable[_Union[WindowStats, _Mapping]]] = ...) -> None: ...

class ListPolicyAlertsRequest(_message.Message):
    __slots__ = ("name", "project", "page_size", "page_token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    project: str
    page_size: int
    page_token: str
    def __init__(self, name: _Optional[str] = ..., project: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class FiredAlert(_message.Message):
    __slots__ = ("rule", "when", "window_start_time", "window_end_time", "values", "fire_time", "delivery", "http_status", "error", "attempts", "notify", "key")
    class ValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RULE_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_TIME_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_TIME_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    rule: int
    when: str
    window_start_time: _timestamp_pb2.Timestamp
    window_end_time: _timestamp_pb2.Timestamp
    values: _containers.ScalarMap[str, float]
    fire_time: _timestamp_pb2.Timestamp
    delivery: AlertDelivery
    http_status: int
    error: str
    attempts: int
    notify: str
    key: str
    def __init__(self, rule: _Optional[int] = ..., when: _Optional[str] = ..., window_start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., values: _Optional[_Mapping[str, float]] = ..., fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., delivery: _Optional[_Union[AlertDelivery, str]] = ..., http_status: _Optional[int] = ..., error: _Optional[str] = ..., attempts: _Optional[int] = ..., notify: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ListPolicyAlertsResponse(_message.Message):
    __slots__ = ("alerts", "next_page_token")
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[FiredAlert]
    next_page_token: str
    def __init__(self, alerts: _Optional[_Iterable[_Union[FiredAlert, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
