import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ISOLATION_LEVEL_UNSPECIFIED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_CONFINED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_NAMESPACED: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_KERNEL: _ClassVar[IsolationLevel]
    ISOLATION_LEVEL_VM: _ClassVar[IsolationLevel]

class OutputStream(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_STREAM_UNSPECIFIED: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDOUT: _ClassVar[OutputStream]
    OUTPUT_STREAM_STDERR: _ClassVar[OutputStream]
ISOLATION_LEVEL_UNSPECIFIED: IsolationLevel
ISOLATION_LEVEL_CONFINED: IsolationLevel
ISOLATION_LEVEL_NAMESPACED: IsolationLevel
ISOLATION_LEVEL_KERNEL: IsolationLevel
ISOLATION_LEVEL_VM: IsolationLevel
OUTPUT_STREAM_UNSPECIFIED: OutputStream
OUTPUT_STREAM_STDOUT: OutputStream
OUTPUT_STREAM_STDERR: OutputStream

class Endpoint(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class NetworkPolicy(_message.Message):
    __slots__ = ("allow",)
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    allow: _containers.RepeatedCompositeFieldContainer[Endpoint]
    def __init__(self, allow: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("timeout_s", "memory_bytes", "pids", "cpu_seconds", "output_bytes", "disk_bytes")
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    DISK_BYTES_FIELD_NUMBER: _ClassVar[int]
    timeout_s: float
    memory_bytes: int
    pids: int
    cpu_seconds: int
    output_bytes: int
    disk_bytes: int
    def __init__(self, timeout_s: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., pids: _Optional[int] = ..., cpu_seconds: _Optional[int] = ..., output_bytes: _Optional[int] = ..., disk_bytes: _Optional[int] = ...) -> None: ...

class RootFilesystem(_message.Message):
    __slots__ = ("kind", "path")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    kind: str
    path: str
    def __init__(self, kind: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class SandboxSpec(_message.Message):
    __slots__ = ("min_isolation", "ladder", "network", "resources", "root", "env", "file_access", "workdir")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MIN_ISOLATION_FIELD_NUMBER: _ClassVar[int]
    LADDER_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    FILE_ACCESS_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    min_isolation: IsolationLevel
    ladder: _containers.RepeatedScalarFieldContainer[str]
    network: NetworkPolicy
    resources: Resources
    root: RootFilesystem
    env: _containers.ScalarMap[str, str]
    file_access: str
    workdir: str
    def __init__(self, min_isolation: _Optional[_Union[IsolationLevel, str]] = ..., ladder: _Optional[_Iterable[str]] = ..., network: _Optional[_Union[NetworkPolicy, _Mapping]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., root: _Optional[_Union[RootFilesystem, _Mapping]] = ..., env: _Optional[_Mapping[str, str]] = ..., file_access: _Optional[str] = ..., workdir: _Optional[str] = ...) -> None: ...

class IsolationReport(_message.Message):
    __slots__ = ("driver", "level", "enforcement", "bounds", "not_enforced", "requested")
    class BoundsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    ENFORCEMENT_FIELD_NUMBER: _ClassVar[int]
    BOUNDS_FIELD_NUMBER: _ClassVar[int]
    NOT_ENFORCED_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    driver: str
    level: IsolationLevel
    enforcement: str
    bounds: _containers.ScalarMap[str, str]
    not_enforced: _containers.RepeatedScalarFieldContainer[str]
    requested: IsolationLevel
    def __init__(self, driver: _Optional[str] = ..., level: _Optional[_Union[IsolationLevel, str]] = ..., enforcement: _Optional[str] = ..., bounds: _Optional[_Mapping[str, str]] = ..., not_enforced: _Optional[_Iterable[str]] = ..., requested: _Optional[_Union[IsolationLevel, str]] = ...) -> None: ...

class ProbeVerdict(_message.Message):
    __slots__ = ("driver", "level", "available", "enforcement", "reason", "not_enforced")
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    ENFORCEMENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NOT_ENFORCED_FIELD_NUMBER: _ClassVar[int]
    driver: str
    level: IsolationLevel
    available: bool
    enforcement: str
    reason: str
    not_enforced: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, driver: _Optional[str] = ..., level: _Optional[_Union[IsolationLevel, str]] = ..., available: _Optional[bool] = ..., enforcement: _Optional[str] = ..., reason: _Optional[str] = ..., not_enforced: _Optional[_Iterable[str]] = ...) -> None: ...

class ProbeRequest(_message.Message):
    __slots__ = ("ladder",)
    LADDER_FIELD_NUMBER: _ClassVar[int]
    ladder: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ladder: _Optional[_Iterable[str]] = ...) -> None: ...

class ProbeResponse(_message.Message):
    __slots__ = ("verdicts",)
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[ProbeVerdict]
    def __init__(self, verdicts: _Optional[_Iterable[_Union[ProbeVerdict, _Mapping]]] = ...) -> None: ...

class CreateRequest(_message.Message):
    __slots__ = ("spec", "lease_s", "project")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    spec: SandboxSpec
    lease_s: float
    project: str
    def __init__(self, spec: _Optional[_Union[SandboxSpec, _Mapping]] = ..., lease_s: _Optional[float] = ..., project: _Optional[str] = ...) -> None: ...

class CreateResponse(_message.Message):
    __slots__ = ("sandbox_id", "isolation", "lease_expires")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    isolation: IsolationReport
    lease_expires: _timestamp_pb2.Timestamp
    def __init__(self, sandbox_id: _Optional[str] = ..., isolation: _Optional[_Union[IsolationReport, _Mapping]] = ..., lease_expires: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExecRequest(_message.Message):
    __slots__ = ("sandbox_id", "argv", "stdin", "env", "timeout_s", "project")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    stdin: bytes
    env: _containers.ScalarMap[str, str]
    timeout_s: float
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., stdin: _Optional[bytes] = ..., env: _Optional[_Mapping[str, str]] = ..., timeout_s: _Optional[float] = ..., project: _Optional[str] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ("stream", "data")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    stream: OutputStream
    data: bytes
    def __init__(self, stream: _Optional[_Union[OutputStream, str]] = ..., data: _Optional[bytes] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("kind", "code", "effect", "signature")
    KIND_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    code: int
    effect: str
    signature: str
    def __init__(self, kind: _Optional[str] = ..., code: _Optional[int] = ..., effect: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ("outcome", "isolation", "stdout_truncated", "stderr_truncated", "duration_s", "cpu_s", "max_rss_bytes")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    CPU_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    outcome: Outcome
    isolation: IsolationReport
    stdout_truncated: bool
    stderr_truncated: bool
    duration_s: float
    cpu_s: float
    max_rss_bytes: int
    def __init__(self, outcome: _Optional[_Union[Outcome, _Mapping]] = ..., isolation: _Optional[_Union[IsolationReport, _Mapping]] = ..., stdout_truncated: _Optional[bool] = ..., stderr_truncated: _Optional[bool] = ..., duration_s: _Optional[float] = ..., cpu_s: _Optional[float] = ..., max_rss_bytes: _Optional[int] = ...) -> None: ...

class ExecEvent(_message.Message):
    __slots__ = ("output", "result")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    output: Output
    result: ExecResult
    def __init__(self, output: _Optional[_Union[Output, _Mapping]] = ..., result: _Optional[_Union[ExecResult, _Mapping]] = ...) -> None: ...

class File(_message.Message):
    __slots__ = ("path", "content")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ...) -> None: ...

class WriteFilesRequest(_message.Message):
    __slots__ = ("sandbox_id", "files", "project")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    files: _containers.RepeatedCompositeFieldContainer[File]
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ..., project: _Optional[str] = ...) -> None: ...

class WriteFilesResponse(_message.Message):
    __slots__ = ("bytes_written",)
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    bytes_written: int
    def __init__(self, bytes_written: _Optional[int] = ...) -> None: ...

class ReadFilesRequest(_message.Message):
    __slots__ = ("sandbox_id", "paths", "max_bytes", "project")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PATHS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    paths: _containers.RepeatedScalarFieldContainer[str]
    max_bytes: int
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., paths: _Optional[_Iterable[str]] = ..., max_bytes: _Optional[int] = ..., project: _Optional[str] = ...) -> None: ...

class ReadFilesResponse(_message.Message):
    __slots__ = ("files",)
    FILES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[File]
    def __init__(self, files: _Optional[_Iterable[_Union[File, _Mapping]]] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("sandbox_id", "project")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("snapshot_id", "size_bytes")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    size_bytes: int
    def __init__(self, snapshot_id: _Optional[str] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class RestoreRequest(_message.Message):
    __slots__ = ("snapshot_id", "network", "lease_s", "project")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    LEASE_S_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    network: NetworkPolicy
    lease_s: float
    project: str
    def __init__(self, snapshot_id: _Optional[str] = ..., network: _Optional[_Union[NetworkPolicy, _Mapping]] = ..., lease_s: _Optional[float] = ..., project: _Optional[str] = ...) -> None: ...

class EgressEvent(_message.Message):
    __slots__ = ("time", "host", "port", "allowed", "bytes_sent", "bytes_received", "address", "duration_s", "reason")
    TIME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    BYTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    host: str
    port: int
    allowed: bool
    bytes_sent: int
    bytes_received: int
    address: str
    duration_s: float
    reason: str
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., allowed: _Optional[bool] = ..., bytes_sent: _Optional[int] = ..., bytes_received: _Optional[int] = ..., address: _Optional[str] = ..., duration_s: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("sandbox_id", "project")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("execs", "cpu_s", "wall_s", "max_rss_bytes", "egress", "created", "lease_expires", "isolation")
    EXECS_FIELD_NUMBER: _ClassVar[int]
    CPU_S_FIELD_NUMBER: _ClassVar[int]
    WALL_S_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    execs: int
    cpu_s: float
    wall_s: float
    max_rss_bytes: int
    egress: _containers.RepeatedCompositeFieldContainer[EgressEvent]
    created: _timestamp_pb2.Timestamp
    lease_expires: _timestamp_pb2.Timestamp
    isolation: IsolationReport
    def __init__(self, execs: _Optional[int] = ..., cpu_s: _Optional[float] = ..., wall_s: _Optional[float] = ..., max_rss_bytes: _Optional[int] = ..., egress: _Optional[_Iterable[_Union[EgressEvent, _Mapping]]] = ..., created: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lease_expires: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., isolation: _Optional[_Union[IsolationReport, _Mapping]] = ...) -> None: ...

class DestroyRequest(_message.Message):
    __slots__ = ("sandbox_id", "project")
    SANDBOX_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    sandbox_id: str
    project: str
    def __init__(self, sandbox_id: _Optional[str] = ..., project: _Optional[str] = ...) -> None: ...

class DestroyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
