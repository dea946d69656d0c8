"""Every bound on what one request may ask of the server, in one place so code and docs agree.

The docs' "Limits" section (docs/server.md) lists these values; each check below refuses with a
``BadInputError`` naming the field and the limit, which every surface reports as a 400 / INVALID_ARGUMENT.
"""

from __future__ import annotations

import math

from evalsi.errors import BadInputError
from evalsi.stats.defaults import DEFAULT_BOOTSTRAP_RESAMPLES

# Bootstrap resamples of a summary (a run's spec.summary, an Evaluate's summary). Each resample re-reduces
# every record, so memory and time grow with resamples × records; 2,000 is the documented default.
MAX_BOOTSTRAP_RESAMPLES = 100_000
# One CEL expression (gate, selector, `when`, alert rule, promotion condition): parsing is superlinear in size.
MAX_EXPRESSION_CHARS = 4096
# Gates of one run, and `when`/alert expressions of one policy.
MAX_EXPRESSIONS = 64
# A user-supplied regular expression (regex-match, policy-violations, case claims).
MAX_PATTERN_CHARS = 4096
# Names of runs and policies (Kubernetes allows 253 for an object name).
MAX_NAME_CHARS = 253
# Labels of a run: how many, and how long keys and values may be.
MAX_LABELS = 64
MAX_LABEL_KEY_CHARS = 253
MAX_LABEL_VALUE_CHARS = 1024
# One dataset file uploaded to the API (evalsi run --server, evalsi datasets push): spooled to disk, then stored
# a shard at a time, so this bounds disk and time, not memory.
MAX_DATASET_UPLOAD_BYTES = 1 << 30
# One line of a JSON-lines file (a dataset's record, an imported log's sample): read at most this much before the
# line is refused, so one line without a newline cannot take the process's memory. A record with a long transcript or
# few-shot prompt is large, but never this large.
MAX_JSONL_LINE_BYTES = 64 << 20
# A dataset in one JSON document (a list of records) is parsed whole, in memory; larger datasets go as JSON lines,
# CSV or Parquet, which are read a record or a batch at a time.
MAX_JSON_DATASET_BYTES = 256 << 20
# Trials per sample and concurrent target calls of one run.
MAX_TRIALS = 1000
MAX_CONCURRENCY = 1024
# Seconds one evaluator call may take on a worker before it is abandoned and reported as an error
# (evalsi-worker --call-timeout). A judge call retries its provider within it (5 attempts of up to 60 s plus
# backoff by default), so it is generous: it is there to end calls that would never end.
DEFAULT_CALL_TIMEOUT_S = 600.0


def check_length(value: str, field: str, limit: int) -> str:
    if len(value) > limit:
        raise BadInputError(f"{field}: {len(value)} characters exceed the limit of {limit}")
    return value


def check_count(count: int, field: str, limit: int, what: str) -> None:
    if count > limit:
        raise BadInputError(f"{field}: {count} {what} exceed the limit of {limit}")


def check_range(value: int, field: str, low: int, high: int) -> int:
    if not low <= value <= high:
        raise BadInputError(f"{field}: {value} is outside {low}..{high}")
    return value


def check_finite(value: float, field: str, *, minimum: float | None = None) -> float:
    """A number meant as a quantity: NaN and ±Infinity are refused (JSON carries them as strings)."""
    if math.isnan(value) or math.isinf(value):
        raise BadInputError(f"{field}: {value} is not a finite number")
    if minimum is not None and value < minimum:
        raise BadInputError(f"{field}: must be >= {minimum:g}, got {value:g}")
    return value


def check_resamples(value: int, field: str) -> int:
    """0 means DEFAULT_BOOTSTRAP_RESAMPLES; above MAX_BOOTSTRAP_RESAMPLES is refused, never silently lowered."""
    if value < 0 or value > MAX_BOOTSTRAP_RESAMPLES:
        raise BadInputError(
            f"{field}: {value} is outside 0..{MAX_BOOTSTRAP_RESAMPLES} "
            f"(0 means the default, {DEFAULT_BOOTSTRAP_RESAMPLES})"
        )
    return value
