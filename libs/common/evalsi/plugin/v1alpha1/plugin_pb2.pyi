from evalsi.v1alpha1 import evaluator_pb2 as _evaluator_pb2
from evalsi.v1alpha1 import record_pb2 as _record_pb2
from evalsi.v1alpha1 import score_pb2 as _score_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("evaluators", "protocol", "sdk")
    EVALUATORS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    evaluators: _containers.RepeatedCompositeFieldContainer[_evaluator_pb2.EvaluatorManifest]
    protocol: int
    sdk: str
    def __init__(self, evaluators: _Optional[_Iterable[_Union[_evaluator_pb2.EvaluatorManifest, _Mapping]]] = ..., protocol: _Optional[int] = ..., sdk: _Optional[str] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("batch_id", "evaluator", "params", "records")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    evaluator: str
    params: _struct_pb2.Struct
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    def __init__(self, batch_id: _Optional[int] = ..., evaluator: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ...) -> None: ...

class JudgeAnswer(_message.Message):
    __slots__ = ("request_id", "text", "input_tokens", "output_tokens", "model", "cached", "error")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    text: str
    input_tokens: int
    output_tokens: int
    model: str
    cached: bool
    error: str
    def __init__(self, request_id: _Optional[int] = ..., text: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., model: _Optional[str] = ..., cached: _Optional[bool] = ..., error: _Optional[str] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("batch", "judge_answer")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    JUDGE_ANSWER_FIELD_NUMBER: _ClassVar[int]
    batch: Batch
    judge_answer: JudgeAnswer
    def __init__(self, batch: _Optional[_Union[Batch, _Mapping]] = ..., judge_answer: _Optional[_Union[JudgeAnswer, _Mapping]] = ...) -> None: ...

class JudgeMessage(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class JudgeRequest(_message.Message):
    __slots__ = ("request_id", "batch_id", "record_id", "messages", "template_hash")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_HASH_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    batch_id: int
    record_id: str
    messages: _containers.RepeatedCompositeFieldContainer[JudgeMessage]
    template_hash: str
    def __init__(self, request_id: _Optional[int] = ..., batch_id: _Optional[int] = ..., record_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[JudgeMessage, _Mapping]]] = ..., template_hash: _Optional[str] = ...) -> None: ...

class BatchResults(_message.Message):
    __slots__ = ("batch_id", "results")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    results: _containers.RepeatedCompositeFieldContainer[_score_pb2.EvaluationResult]
    def __init__(self, batch_id: _Optional[int] = ..., results: _Optional[_Iterable[_Union[_score_pb2.EvaluationResult, _Mapping]]] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("results", "judge_request")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    JUDGE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    results: BatchResults
    judge_request: JudgeRequest
    def __init__(self, results: _Optional[_Union[BatchResults, _Mapping]] = ..., judge_request: _Optional[_Union[JudgeRequest, _Mapping]] = ...) -> None: ...

class ReduceRequest(_message.Message):
    __slots__ = ("evaluator", "params", "records", "dataset", "indices")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    INDICES_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    params: _struct_pb2.Struct
    records: _containers.RepeatedCompositeFieldContainer[_record_pb2.Record]
    dataset: str
    indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, evaluator: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., records: _Optional[_Iterable[_Union[_record_pb2.Record, _Mapping]]] = ..., dataset: _Optional[str] = ..., indices: _Optional[_Iterable[int]] = ...) -> None: ...

class ReduceResponse(_message.Message):
    __slots__ = ("scores", "error", "skipped", "unknown_dataset")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_DATASET_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedCompositeFieldContainer[_score_pb2.Score]
    error: str
    skipped: str
    unknown_dataset: bool
    def __init__(self, scores: _Optional[_Iterable[_Union[_score_pb2.Score, _Mapping]]] = ..., error: _Optional[str] = ..., skipped: _Optional[str] = ..., unknown_dataset: _Optional[bool] = ...) -> None: ...

class CheckParamsRequest(_message.Message):
    __slots__ = ("evaluator", "params")
    EVALUATOR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    evaluator: str
    params: _struct_pb2.Struct
    def __init__(self, evaluator: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CheckParamsResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: str
    def __init__(self, error: _Optional[str] = ...) -> None: ...
