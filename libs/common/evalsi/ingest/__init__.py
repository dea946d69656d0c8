"""Watch: OTLP ingest. Receivers (HTTP and gRPC) → one export handler → mappers → a span sink (store, assembler).

Pure parts: ``map_span``/``map_resource_spans`` (semantic-convention mappers, producing the ``MappedSpan`` rows
of ``evalsi.traces``) and ``TraceAssembler`` (the completed-trace rule, with an injected clock). I/O at the edges:
the receivers and the trace stores (``evalsi.stores.traces``). See docs/watch.md.
"""

from evalsi.traces.otlp import any_value_to_python, attributes_to_dict

from .completion import CompletedTrace, CompletionConfig, TraceAssembler
from .grpc_receiver import otlp_handlers, start_grpc_receiver
from .handler import ExportHandler, ExportStats
from .http_receiver import (
    DEFAULT_MAX_BODY,
    LOGS_PATH,
    TRACES_PATH,
    OtlpHttpReceiver,
    decode_logs_request,
    decode_request,
    start_http_receiver,
)
from .logs import map_log_record, map_resource_logs
from .mappers import (
    DEFAULT_MAPPERS,
    GENAI,
    GENERIC,
    LOGFIRE,
    MLFLOW,
    OPENINFERENCE,
    OPENLLMETRY,
    Mapper,
    MapResult,
    map_resource_spans,
    map_span,
)
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
    "MapResult",
    "Mapper",
    "OtlpHttpReceiver",
    "Partitioning",
    "RedactionRule",
    "Redactor",
    "TraceAssembler",
    "any_value_to_python",
    "attributes_to_dict",
    "decode_logs_request",
    "decode_request",
    "map_log_record",
    "map_resource_logs",
    "map_resource_spans",
    "map_span",
    "otlp_handlers",
    "partition_of",
    "run_completion_loop",
    "start_grpc_receiver",
    "start_http_receiver",
]
