"""The trace model and its read side: spans, summaries, online scores and feedback, and a trace's ``Record``.

Ingest writes ``MappedSpan`` rows; the trace stores (``evalsi.stores.traces``) keep them; the API and online
policies read them back and assemble records with ``assemble_record``. Nothing here does I/O.
"""

from .assembly import assemble_record, merge_log_rows, root_of, sum_usage
from .model import (
    ERROR,
    LOG_MAPPER,
    OUTCOMES,
    PLACEHOLDER,
    SCORED,
    SKIPPED,
    USAGE_STEP_TYPES,
    Feedback,
    MappedSpan,
    OnlineScore,
    TracePage,
    TraceSummary,
    counts_toward_usage,
    is_log_row,
)

__all__ = [
    "ERROR",
    "LOG_MAPPER",
    "OUTCOMES",
    "PLACEHOLDER",
    "SCORED",
    "SKIPPED",
    "USAGE_STEP_TYPES",
    "Feedback",
    "MappedSpan",
    "OnlineScore",
    "TracePage",
    "TraceSummary",
    "assemble_record",
    "counts_toward_usage",
    "is_log_row",
    "merge_log_rows",
    "root_of",
    "sum_usage",
]
