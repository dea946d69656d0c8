"""The error kinds every part of Evals.si raises, so callers can map them to outcomes and exit codes.

- ``BadInputError``: the user's input (a file, a flag, a spec field) is wrong. CLI exit code 2.
  Its message names the file, line, field or flag at fault and what would be accepted.
- ``InfraError``: a provider, sandbox, store or our own machinery failed after retries. Never a score:
  the runner records it as ``OUTCOME_ERROR`` with kind ``infra`` and excludes it from metrics.
- ``SkipRecord``: raised by an evaluator when a record lacks what it needs; becomes ``OUTCOME_SKIPPED``.
"""

from __future__ import annotations


class EvalsiError(Exception):
    """Base class for errors Evals.si raises on purpose."""


class BadInputError(EvalsiError):
    """Input that cannot be accepted; the message says where and what is accepted."""


class InfraError(EvalsiError):
    """A failure outside the evaluated system (provider 5xx after retries, timeouts, sandbox, store)."""


class DeadlineExceeded(EvalsiError, TimeoutError):
    """The call's deadline passed before the work finished, and the work was stopped (DEADLINE_EXCEEDED, 504)."""


class SkipRecord(EvalsiError):
    """Raised inside an evaluator to mark the record skipped, with the reason as the message."""
