"""Drains the webhook outbox: signed POSTs, retried with exponential backoff, then `failed`."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
from eventsourcing.persistence import PersistenceError

from interlock.projections.views.webhooks import Due, WebhooksView
from interlock.webhooks.signing import sign

log = logging.getLogger("interlock.webhooks")
STORE_ERRORS = (PersistenceError, psycopg.Error, sqlite3.Error)


@dataclass(frozen=True)
class DeliveryPolicy:
    """How patiently a notification is delivered."""

    max_attempts: int = 8
    base_delay: float = 5.0  # after attempt n: base * 2**(n-1), at most max_delay
    max_delay: float = 3600.0
    timeout: float = 10.0
    lease: float = 60.0  # a claimed row is due again if its deliverer died mid-send
    poll: float = 1.0
    batch: int = 20

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


class Deliverer:
    """Sends due deliveries from a thread; any number may run on one store."""

    def __init__(self, view: WebhooksView, policy: DeliveryPolicy | None = None) -> None:
        self.view, self.policy = view, policy or DeliveryPolicy()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._http = httpx.Client(timeout=self.policy.timeout, follow_redirects=False)

    def run_once(self) -> int:
        """Send what is due now; how many were attempted."""
        due = self.view.claim(self.policy.batch, timedelta(seconds=self.policy.lease))
        for item in due:
            self._attempt(item)
        return len(due)

    def _attempt(self, item: Due) -> None:
        headers = sign(item.secret, item.id, int(time.time()), item.body)
        try:
            answer = self._http.post(item.url, content=item.body.encode(),
                                     headers={**headers, "content-type": "application/json"})
            error = None if answer.is_success else f"HTTP {answer.status_code}"
        except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
            # ValueError: a URL the socket layer cannot encode (a host label over 63
            # characters passes URL validation); the row is settled like any failure.
            error = f"{type(exc).__name__}: {exc}"
        now = datetime.now(UTC)
        if error is None:
            self.view.settle(item.id, "delivered", now, None)
        elif item.attempt >= self.policy.max_attempts:
            log.warning("webhook %s failed after %d attempts: %s", item.id, item.attempt, error)
            self.view.settle(item.id, "failed", now, error)
        else:
            retry = now + timedelta(seconds=self.policy.delay(item.attempt))
            self.view.settle(item.id, "pending", retry, error)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="webhooks", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except STORE_ERRORS:  # the store may be briefly down: keep the thread, retry
                log.exception("webhook delivery round failed")
                busy = 0
            except Exception:  # broad on purpose: a bug must not stop every later delivery
                log.exception("webhook delivery round failed unexpectedly; retrying")
                busy = 0
            if not busy:
                self._stop.wait(self.policy.poll)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.policy.timeout + 5)
        self._http.close()
