"""Bounded retries with exponential backoff and full jitter for provider calls."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from interlock.domain.errors import ModelError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a provider call is retried."""

    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("delays must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The pause after failed `attempt` (1-based): full jitter, at least the server's ask."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        jittered = random.uniform(0, ceiling)
        return min(self.max_delay, max(jittered, retry_after or 0.0))


@dataclass(frozen=True)
class Fault:
    """What a provider error means: can it pass if tried again, and why it happened."""

    retryable: bool
    reason: str
    status: int | None = None
    retry_after: float | None = None


Describe = Callable[[Exception], Fault]


def always() -> bool:
    """The default `may_retry`: nothing rules a retry out."""
    return True


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    errors: tuple[type[Exception], ...],
    describe: Describe,
    provider: str,
    may_retry: Callable[[], bool] = always,
) -> T:
    """Run `call`; retry transient `errors`; end in ModelError with the last reason."""
    attempt = 1
    while True:
        try:
            return await call()
        except errors as exc:
            fault = describe(exc)
            if not (fault.retryable and may_retry()) or attempt >= policy.attempts:
                raise _model_error(provider, fault, attempt) from exc
        await asyncio.sleep(policy.delay(attempt, fault.retry_after))
        attempt += 1


def _model_error(provider: str, fault: Fault, attempts: int) -> ModelError:
    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
    return ModelError(
        f"{provider}: {fault.reason}{tries}",
        provider=provider,
        status=fault.status,
        attempts=attempts,
        retryable=fault.retryable,
    )


def status_fault(status: int, body: object, headers: Mapping[str, str], fallback: str) -> Fault:
    """An HTTP error answer: timeouts (408), 429 and 5xx are worth another try."""
    return Fault(
        retryable=status in (408, 429) or status >= 500,
        reason=f"HTTP {status}: {provider_message(body, fallback)}",
        status=status,
        retry_after=retry_after(headers),
    )


def provider_message(body: object, fallback: str) -> str:
    """The `error.message` both providers put in their error bodies."""
    inner = body.get("error", body) if isinstance(body, dict) else None
    message = inner.get("message") if isinstance(inner, dict) else None
    return message if isinstance(message, str) else fallback


def retry_after(headers: Mapping[str, str]) -> float | None:
    """The server's `retry-after-ms` or `retry-after` (seconds) hint, if it gave one."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, ValueError):
            continue
    return None
