"""Watch: OTLP ingest. Receivers (HTTP and gRPC) → one export handler → mappers → a span sink (store, assembler).

Pure parts: ``map_span``/``map_resource_spans`` (semantic-convention mappers), ``assemble_record`` and
``TraceAssembler`` (the completed-trace rule, with an injected clock). I/O at the edges: the receivers and the
trace stores (SQLite, ClickHouse). See docs/watch.md.
"""

from .assembly import (
    CompletedTrace,
    CompletionConfig,
    TraceAssembler,
    assemble_record,
    counts_toward_usage,
    root_of,
    sum_usage,
)
from .attributes import any_value_to_python, attributes_to_dict
from .grpc_receiver import otlp_handlers, start_grpc_receiver
from .handler import ExportHandler, ExportStats, SpanSink
from .http_receiver import (
    DEFAULT_MAX_BODY,
    LOGS_PATH,
    TRACES_PATH,
    OtlpHttpReceiver,
    decode_logs_request,
    decode_request,
    start_http_receiver,
)
from .logs import LOG_MAPPER, is_log_row, map_log_record, map_resource_logs
from .mappers import (
    DEFAULT_MAPPERS,
    GENAI,
    GENERIC,
    LOGFIRE,
    MLFLOW,
    OPENINFERENCE,
    OPENLLMETRY,
    MappedSpan,
    Mapper,
    MapResult,
    map_resource_spans,
    map_span,
)
from .online import Feedback, OnlineScore
from .pipeline import (
    AssemblingSink,
    Completer,
    Partitioning,
    partition_of,
    run_completion_loop,
)
from .redaction import BUILTINS as REDACTION_BUILTINS
from .redaction import RedactionRule, Redactor

__all__ = [
    "DEFAULT_MAPPERS",
    "DEFAULT_MAX_BODY",
    "GENAI",
    "GENERIC",
    "LOGFIRE",
    "LOGS_PATH",
    "LOG_MAPPER",
    "MLFLOW",
    "OPENINFERENCE",
    "OPENLLMETRY",
    "REDACTION_BUILTINS",
    "TRACES_PATH",
    "AssemblingSink",
    "CompletedTrace",
    "Completer",
    "CompletionConfig",
    "ExportHandler",
    "ExportStats",
    "Feedback",
    "MapResult",
    "MappedSpan",
    "Mapper",
    "OnlineScore",
    "OtlpHttpReceiver",
    "Partitioning",
    "RedactionRule",
    "Redactor",
    "SpanSink",
    "TraceAssembler",
    "any_value_to_python",
    "assemble_record",
    "attributes_to_dict",
    "counts_toward_usage",
    "decode_logs_request",
    "decode_request",
    "is_log_row",
    "map_log_record",
    "map_resource_logs",
    "map_resource_spans",
    "map_span",
    "otlp_handlers",
    "partition_of",
    "root_of",
    "run_completion_loop",
    "start_grpc_receiver",
    "start_http_receiver",
    "sum_usage",
]
