"""The errors that decide what happens to a bus message: a handler raises one, the consume loop maps it.

- ``Retryable`` (or ``evalsi.errors.InfraError``): try again later; the message is nak'ed with a backoff delay
  and dead-lettered once its deliveries run out.
- ``Permanent``: retrying cannot help (an undecodable payload, a wrong message type, a malformed task); the
  message is terminated and dead-lettered at once.
- ``Unavailable``: something the handler needs (a store) is down. That is not a failed delivery: the message is
  held (in-progress acks), pulling pauses, and the handler runs again once the consumer's probe answers.
"""

from __future__ import annotations

from evalsi.errors import EvalsiError, InfraError

__all__ = ["PayloadTooLargeError", "Permanent", "RemoteError", "Retryable", "Unavailable"]


class Retryable(EvalsiError):
    """A transient failure: redeliver later, after ``delay_s`` when given, else the consumer's backoff."""

    def __init__(self, message: str = "", *, delay_s: float | None = None) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class Permanent(EvalsiError):
    """A failure no redelivery can fix: terminate the message and dead-letter it."""


class Unavailable(EvalsiError):
    """A dependency of the handler is down: hold the message and retry once it answers, burning no delivery."""


class PayloadTooLargeError(EvalsiError):
    """A payload over the bus's size limit, with no object store to offload it to."""


class RemoteError(InfraError):
    """A responder failed with an internal error (a crash in our code): an infrastructure error for the caller."""
