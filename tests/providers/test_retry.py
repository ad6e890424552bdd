"""The retry policy on its own: bounded attempts, backoff with jitter, what is retried."""

from __future__ import annotations

import pytest

from interlock.domain.errors import ModelError
from interlock.providers.retry import (
    Fault,
    RetryPolicy,
    call_with_retries,
    retry_after,
    status_fault,
)

pytestmark = pytest.mark.anyio
INSTANT = RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)


class Flaky(Exception):
    """A stand-in for an SDK error."""


def test_backoff_grows_exponentially_within_the_cap() -> None:
    policy = RetryPolicy(attempts=5, base_delay=0.5, max_delay=3.0)
    for attempt, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0)]:
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jittered


def test_a_servers_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=3, base_delay=0.01, max_delay=2.0)
    assert policy.delay(1, retry_after=1.5) == 1.5
    assert policy.delay(1, retry_after=60) == 2.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None


def test_a_policy_needs_one_attempt() -> None:
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)


@pytest.mark.parametrize(("status", "retryable"), [
    (408, True), (429, True), (500, True), (503, True), (529, True),
    (400, False), (401, False), (404, False), (422, False)])
def test_only_timeouts_429_and_5xx_are_retried(status: int, retryable: bool) -> None:
    fault = status_fault(status, {"error": {"message": "nope"}}, {}, "fallback")
    assert (fault.retryable, fault.status) == (retryable, status)
    assert fault.reason == f"HTTP {status}: nope"


async def _run(faults: list[Fault], may_retry: bool = True) -> tuple[int, ModelError | str]:
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        if calls <= len(faults):
            raise Flaky(str(calls - 1))
        return "ok"

    outcome: ModelError | str
    try:
        outcome = await call_with_retries(
            call, policy=INSTANT, errors=(Flaky,), describe=lambda e: faults[int(str(e))],
            provider="p:m", may_retry=lambda: may_retry)
    except ModelError as exc:
        outcome = exc
    return calls, outcome


async def test_transient_faults_are_retried_until_success() -> None:
    assert await _run([Fault(True, "busy")] * 2) == (3, "ok")


async def test_retries_are_bounded_and_the_last_reason_is_reported() -> None:
    calls, error = await _run([Fault(True, "busy", status=503)] * 3)
    assert calls == 3 and isinstance(error, ModelError)
    assert error.message == "p:m: busy (after 3 attempts)"
    assert error.details == {"provider": "p:m", "status": 503, "attempts": 3, "retryable": True}


async def test_a_permanent_fault_or_a_forbidden_retry_stops_at_once() -> None:
    calls, error = await _run([Fault(False, "bad request", status=400)])
    assert calls == 1 and isinstance(error, ModelError) and error.message == "p:m: bad request"
    calls, error = await _run([Fault(True, "cut mid-stream")], may_retry=False)
    assert calls == 1 and isinstance(error, ModelError)
