from google.api import annotations_pb2 as _annotations_pb2
from evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PackNames(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class SetProjectPacksRequest(_message.Message):
    __slots__ = ("project", "packs")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    PACKS_FIELD_NUMBER: _ClassVar[int]
    project: str
    packs: PackNames
    def __init__(self, project: _Optional[str] = ..., packs: _Optional[_Union[PackNames, _Mapping]] = ...) -> None: ...

class SetPackAllowlistRequest(_message.Message):
    __slots__ = ("project", "allowed_packs")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_PACKS_FIELD_NUMBER: _ClassVar[int]
    project: str
    allowed_packs: PackNames
    def __init__(self, project: _Optional[str] = ..., allowed_packs: _Optional[_Union[PackNames, _Mapping]] = ...) -> None: ...

class ProjectPacks(_message.Message):
    __slots__ = ("project", "enabled", "allowed", "enabled_stored", "allowed_stored")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    ENABLED_STORED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_STORED_FIELD_NUMBER: _ClassVar[int]
    project: str
    enabled: _containers.RepeatedScalarFieldContainer[str]
    allowed: _containers.RepeatedScalarFieldContainer[str]
    enabled_stored: bool
    allowed_stored: bool
    def __init__(self, project: _Optional[str] = ..., enabled: _Optional[_Iterable[str]] = ..., allowed: _Optional[_Iterable[str]] = ..., enabled_stored: _Optional[bool] = ..., allowed_stored: _Optional[bool] = ...) -> None: ...

class ListEvaluatorsRequest(_message.Message):
    __slots__ = ("pack", "all_packs")
    PACK_FIELD_NUMBER: _ClassVar[int]
    ALL_PACKS_FIELD_NUMBER: _ClassVar[int]
    pack: str
    all_packs: bool
    def __init__(self, pack: _Optional[str] = ..., all_packs: _Optional[bool] = ...) -> None: ...

class PackInfo(_message.Message):
    __slots__ = ("name", "description", "default_on", "evaluators", "tier", "upstream", "enabled", "allowed")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ON_FIELD_NUMBER: _ClassVar[int]
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    default_on: bool
    evaluators: int
    tier: str
    upstream: str
    enabled: bool
    allowed: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., default_on: _Optional[bool] = ..., evaluators: _Optional[int] = ..., tier: _Optional[str] = ..., upstream: _Optional[str] = ..., enabled: _Optional[bool] = ..., allowed: _Optional[bool] = ...) -> None: ...

class ListEvaluatorsResponse(_message.Message):
    __slots__ = ("evaluators", "packs")
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    PACKS_FIELD_NUMBER: _ClassVar[int]
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorManifest]
    packs: _containers.RepeatedCompositeFieldContainer[PackInfo]
    def __init__(self, evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorManifest, _Mapping]]] = ..., packs: _Optional[_Iterable[_Union[PackInfo, _Mapping]]] = ...) -> None: ...
