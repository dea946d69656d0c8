import asyncio

import pytest

from evalsi.errors import BadInputError, InfraError
from evalsi.judges import CircuitBreaker, CircuitBreakers, CircuitOpenError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fail(b: CircuitBreaker, times: int) -> None:
    for _ in range(times):
        b.before_call()
        b.record_failure()


def test_opens_after_n_consecutive_failures_and_fails_fast() -> None:
    clock = Clock()
    b = CircuitBreaker("openai/m", failure_threshold=3, clock=clock)
    fail(b, 2)
    assert b.state == "closed"
    fail(b, 1)
    assert b.state == "open"
    with pytest.raises(CircuitOpenError, match=r"^circuit open for openai/m after 3 consecutive") as e:
        b.before_call()
    assert isinstance(e.value, InfraError)


def test_failing_fast_names_the_last_failure_first() -> None:
    b = CircuitBreaker("openai/m", failure_threshold=2, clock=Clock())
    b.record_failure("openai m: HTTP 401: Incorrect API key provided.")
    b.record_failure("openai m: HTTP 401: Incorrect API key provided.")
    with pytest.raises(CircuitOpenError) as e:
        b.before_call()
    assert str(e.value) == (
        "openai m: HTTP 401: Incorrect API key provided. (circuit open for openai/m after 2 consecutive "
        "infrastructure failures; failing fast, next probe in 30 s)"
    )


def test_success_resets_the_consecutive_count() -> None:
    b = CircuitBreaker("k", failure_threshold=3, clock=Clock())
    fail(b, 2)
    b.record_success()
    fail(b, 2)
    assert b.state == "closed" and b.consecutive_failures == 2


def test_half_opens_after_cooldown_with_a_single_probe_then_closes() -> None:
    clock = Clock()
    b = CircuitBreaker("k", failure_threshold=1, cooldown_s=30, clock=clock)
    fail(b, 1)
    clock.now = 29.9
    assert b.state == "open"
    clock.now = 30.0
    assert b.state == "half_open"
    b.before_call()  # the probe goes out
    with pytest.raises(CircuitOpenError, match="probe call is in flight"):
        b.before_call()
    b.record_success()
    assert b.state == "closed"
    b.before_call()  # and calls flow again


def test_failed_probe_reopens_for_another_cooldown() -> None:
    clock = Clock()
    b = CircuitBreaker("k", failure_threshold=5, cooldown_s=30, clock=clock)
    fail(b, 5)
    clock.now = 31
    b.before_call()
    b.record_failure()
    assert b.state == "open"
    clock.now = 60
    assert b.state == "open"
    clock.now = 61
    assert b.state == "half_open"


async def test_guard_counts_only_infra_errors_and_frees_a_cancelled_probe() -> None:
    clock = Clock()
    b = CircuitBreaker("k", failure_threshold=1, cooldown_s=10, clock=clock)
    with pytest.raises(BadInputError), b.guard():
        raise BadInputError("our fault, not the provider's")
    assert b.state == "closed"
    with pytest.raises(InfraError), b.guard():
        raise InfraError("HTTP 500")
    assert b.state == "open"
    clock.now = 10

    async def probe() -> None:
        with b.guard():
            await asyncio.sleep(10)

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    b.before_call()  # a new probe may go: the cancelled one told us nothing


def test_registry_gives_one_breaker_per_provider_model() -> None:
    reg = CircuitBreakers(failure_threshold=1, clock=Clock())
    assert reg.for_model("openai", "m") is reg.for_model("openai", "m")
    fail(reg.for_model("openai", "m"), 1)
    assert reg.for_model("openai", "m").state == "open"
    assert reg.for_model("openai", "other").state == "closed"
    assert reg.for_model("anthropic", "m").state == "closed"


def test_guard_predicate_treats_request_specific_errors_as_a_healthy_answer() -> None:
    b = CircuitBreaker("k", failure_threshold=2, clock=Clock())
    with pytest.raises(InfraError), b.guard():
        raise InfraError("HTTP 500")
    with pytest.raises(InfraError), b.guard(is_failure=lambda e: "400" not in str(e)):
        raise InfraError("HTTP 400: prompt too long")
    assert b.consecutive_failures == 0 and b.state == "closed"
