"""Circuit breakers per (provider, model), so a provider that is down fails a run's judge calls fast.

Without one, every record would sit through the full retry schedule (minutes) before its InfraError.
States: closed (calls pass) -> open after ``failure_threshold`` consecutive infrastructure failures
(calls fail at once with ``CircuitOpenError``) -> half-open after ``cooldown_s`` (one probe call passes,
others still fail fast) -> closed when the probe succeeds, or open again for another cooldown if not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from evalsi.errors import InfraError

from .ratelimit import Clock

BreakerState = Literal["closed", "open", "half_open"]


class CircuitOpenError(InfraError):
    """Raised without calling the provider while the breaker is open."""


class CircuitBreaker:
    """One circuit. Not thread-safe; meant for the tasks of one event loop (no awaits inside)."""

    def __init__(
        self,
        name: str,
        *,
        failure_threshold: int = 5,
        cooldown_s: float = 30.0,
        clock: Clock = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.name = name
        self.failure_threshold = failure_threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0  # consecutive
        self._last_cause = ""  # the latest failure's message: what a fast failure reports as its cause
        self._opened_at: float | None = None
        self._probe_in_flight = False

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at >= self.cooldown_s:
            return "half_open"
        return "open"

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def before_call(self) -> None:
        """Raise ``CircuitOpenError`` unless a call may go out now (closed, or the half-open probe)."""
        state = self.state
        if state == "closed":
            return
        if state == "half_open" and not self._probe_in_flight:
            self._probe_in_flight = True
            return
        assert self._opened_at is not None
        retry_in = max(0.0, self.cooldown_s - (self._clock() - self._opened_at))
        why = "a probe call is in flight" if state == "half_open" else f"next probe in {retry_in:.0f} s"
        # The cause first: a run's errors show their first reason, which must say what is wrong, not only that
        # the breaker is open.
        cause = f"{self._last_cause} (circuit open" if self._last_cause else "circuit open"
        raise CircuitOpenError(
            f"{cause} for {self.name} after {self._failures} consecutive infrastructure failures; "
            f"failing fast, {why}" + (")" if self._last_cause else "")
        )

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probe_in_flight = False

    def record_failure(self, cause: str = "") -> None:
        self._failures += 1
        self._last_cause = cause or self._last_cause
        was_probe = self._probe_in_flight
        self._probe_in_flight = False
        if was_probe or self._failures >= self.failure_threshold:
            self._opened_at = self._clock()  # (re)start the cooldown

    def release(self) -> None:
        """The call ended without telling us anything (e.g. cancelled): let another probe through."""
        self._probe_in_flight = False

    @contextmanager
    def guard(self, is_failure: Callable[[InfraError], bool] = lambda e: True) -> Iterator[None]:
        """``with breaker.guard(): await call()``: an InfraError counts as a failure (unless ``is_failure``
        says it is about the request, not the provider: then the provider answered, a success) and is
        re-raised; other exceptions (bad input, cancellation) say nothing about the provider's health."""
        self.before_call()
        try:
            yield
        except InfraError as e:
            if is_failure(e):
                self.record_failure(str(e))
            else:
                self.record_success()
            raise
        except BaseException:
            self.release()
            raise
        self.record_success()


class CircuitBreakers:
    """The breakers of a process, one per (provider, model); share one instance between judge clients."""

    def __init__(
        self, *, failure_threshold: int = 5, cooldown_s: float = 30.0, clock: Clock = time.monotonic
    ) -> None:
        self._failure_threshold = failure_threshold
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}

    def for_model(self, provider: str, model: str) -> CircuitBreaker:
        key = f"{provider}/{model}"
        if key not in self._breakers:
            self._breakers[key] = CircuitBreaker(
                key, failure_threshold=self._failure_threshold, cooldown_s=self._cooldown_s, clock=self._clock
            )
        return self._breakers[key]
