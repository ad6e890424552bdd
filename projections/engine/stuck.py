"""Views stuck on an event they cannot apply: logged once, shown by /readyz, retried slowly.

What is shown and logged names the view, the event's position and topic and the error's
class, never the error's text: a database error quotes the row it refused, and that
personal data would outlive the chat's erasure in logs and behind an unauthenticated probe.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from interlock.projections.engine.runner import ViewStuckError

log = logging.getLogger("interlock.views")
FIRST_RETRY = 1.0  # seconds; doubles per failed retry
LAST_RETRY = 60.0


class StuckView(BaseModel):
    """Which view stopped on which event, and why (what /readyz shows)."""

    model_config = ConfigDict(frozen=True)

    view: str
    notification_id: int
    topic: str
    error: str  # the error's class (e.g. UniqueViolation), not its text
    attempts: int


@dataclass
class _Entry:
    error: ViewStuckError
    attempts: int
    retry_at: float


class StuckViews:
    """Per view, the event it is stuck on and when to try it again (exponential backoff)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()  # the runner writes, request threads read

    def due(self, view: str) -> bool:
        """True unless `view` is stuck and its next retry is still ahead."""
        entry = self._entries.get(view)
        return entry is None or time.monotonic() >= entry.retry_at

    def failed(self, error: ViewStuckError) -> None:
        """Record (and log) that a view could not apply an event; back off."""
        with self._lock:
            attempts, delay = self._record(error)
        if attempts == 1:
            log.error("%s; the view stays behind and retries with backoff", error)
        else:
            log.warning("%s (attempt %d); next retry in %.0fs", error, attempts, delay)

    def _record(self, error: ViewStuckError) -> tuple[int, float]:
        entry = self._entries.get(error.view)
        same = entry is not None and entry.error.notification_id == error.notification_id
        attempts = entry.attempts + 1 if entry is not None and same else 1
        delay = min(LAST_RETRY, FIRST_RETRY * 2 ** (attempts - 1))
        self._entries[error.view] = _Entry(error, attempts, time.monotonic() + delay)
        return attempts, delay

    def passed(self, view: str) -> None:
        """The view applied events again: no longer stuck."""
        if view not in self._entries:  # the common case; only the runner writes entries
            return
        with self._lock:
            entry = self._entries.pop(view, None)
        if entry is not None:
            log.info("view %s applies events again", view)

    def blocking(self, view: str, position: int) -> ViewStuckError | None:
        """The error keeping `view` from reaching `position`, if it is stuck before it."""
        entry = self._entries.get(view)
        if entry is not None and entry.error.notification_id <= position:
            return entry.error
        return None

    def report(self) -> list[StuckView]:
        """Every stuck view, for /readyz."""
        with self._lock:
            entries = sorted(self._entries.items())
        return [StuckView(view=name, notification_id=e.error.notification_id,
                          topic=e.error.topic, error=type(e.error.cause).__name__,
                          attempts=e.attempts)
                for name, e in entries]
