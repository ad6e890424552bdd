"""Drains the webhook outbox: signed POSTs, retried with exponential backoff, then `failed`.

A dispatcher thread claims due rows and hands them to a pool of senders, at most
`per_tenant` in flight per tenant: a tenant whose receiver hangs holds its own slots for at
most one deadline each, never another tenant's. While the store is unreachable the
dispatcher backs off and resumes by itself, saying so once when it goes and once when it
comes back. Delivered and failed rows are pruned after `retention`.
"""

from __future__ import annotations

import logging
import sqlite3
import ssl
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

import psycopg
from eventsourcing.persistence import PersistenceError

from interlock.domain.errors import UnavailableError
from interlock.domain.storage.outages import StorePause
from interlock.projections.views.webhooks import DeliveryStatus, Due
from interlock.webhooks.addresses import AddressPolicy, RefusedAddressError
from interlock.webhooks.sender import READ_LIMIT, DeliveryError, post
from interlock.webhooks.signing import sign

log = logging.getLogger("interlock.webhooks")
# UnavailableError: the store guard's refusal while PostgreSQL is down (a 503 to requests)
STORE_ERRORS = (PersistenceError, UnavailableError, psycopg.Error, sqlite3.Error)
# What an attempt can meet on the way out: the address policy, DNS, sockets, TLS, a bad answer,
# a host name the IDNA codec refuses (a label over 63 characters passes URL validation).
SEND_ERRORS = (RefusedAddressError, DeliveryError, OSError, ssl.SSLError, UnicodeError,
               ValueError)


@dataclass(frozen=True)
class DeliveryPolicy:
    """How patiently, and how widely, notifications are delivered."""

    max_attempts: int = 8
    base_delay: float = 5.0  # after attempt n: base * 2**(n-1), at most max_delay
    max_delay: float = 3600.0
    timeout: float = 10.0  # the whole attempt: resolve, connect, send, the status line
    lease: float = 60.0  # a claimed row is due again if its deliverer died mid-send
    poll: float = 1.0
    batch: int = 20
    workers: int = 8  # attempts in flight from this process
    per_tenant: int = 2  # of which at most this many for one tenant
    read_limit: int = READ_LIMIT  # bytes of an answer read, at most
    allow: tuple[str, ...] = ()  # addresses, CIDRs, host names allowed though not public
    retention: float = 30 * 86400.0  # seconds delivered and failed rows are kept
    prune_every: float = 3600.0
    outage_backoff: float = 30.0  # the longest wait between tries while the store is down

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


class Outbox(Protocol):
    """What the deliverer needs of the webhooks view."""

    def claim(self, limit: int, lease: timedelta, per_tenant: int = ...,
              busy: dict[str, int] | None = ...) -> list[Due]: ...

    def settle(self, delivery_id: str, status: DeliveryStatus, next_at: datetime,
               error: str | None) -> None: ...

    def prune(self, before: datetime) -> int: ...


class Deliverer:
    """Sends due deliveries from a pool of threads; any number may run on one store."""

    def __init__(self, view: Outbox, policy: DeliveryPolicy | None = None,
                 addresses: AddressPolicy | None = None) -> None:
        self.view, self.policy = view, policy or DeliveryPolicy()
        self.addresses = addresses or AddressPolicy(self.policy.allow)
        self._pool = ThreadPoolExecutor(self.policy.workers, thread_name_prefix="webhooks")
        self._inflight: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None
        self._pause = StorePause("webhook delivery", log)
        self._pruned_at = 0.0

    def run_once(self) -> int:
        """Claim what is due now (within the free slots) and start sending it; how many."""
        with self._lock:
            free = self.policy.workers - sum(self._inflight.values())
            busy = {tenant: n for tenant, n in self._inflight.items() if n}
        if free <= 0:
            return 0
        due = self.view.claim(min(free, self.policy.batch),
                              timedelta(seconds=self.policy.lease), self.policy.per_tenant, busy)
        for item in due:
            with self._lock:
                self._inflight[item.tenant] += 1
            self._pool.submit(self._send, item)
        return len(due)

    def idle(self, timeout: float) -> bool:
        """Wait until no attempt is in flight; whether that happened within `timeout`."""
        until = time.monotonic() + timeout
        while time.monotonic() < until:
            with self._lock:
                if not any(self._inflight.values()):
                    return True
            time.sleep(0.01)
        return False

    def _send(self, item: Due) -> None:
        try:
            self._settle(item, self._attempt(item))
        except STORE_ERRORS as exc:  # the row's lease runs out; it is claimed again later
            self._store_down(exc)
        finally:
            with self._lock:
                self._inflight[item.tenant] -= 1
            self._wake.set()

    def _attempt(self, item: Due) -> str | None:
        """None when the receiver took it (2xx), else what went wrong."""
        headers = sign(item.secret, item.id, int(time.time()), item.body)
        try:
            status = post(item.url, item.body.encode(), headers, self.addresses,
                          self.policy.timeout, self.policy.read_limit)
        except SEND_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        return None if 200 <= status < 300 else f"HTTP {status}"

    def _settle(self, item: Due, error: str | None) -> None:
        now = datetime.now(UTC)
        if error is None:
            self.view.settle(item.id, "delivered", now, None)
        elif item.attempt >= self.policy.max_attempts:
            log.warning("webhook %s failed after %d attempts: %s", item.id, item.attempt, error)
            self.view.settle(item.id, "failed", now, error)
        else:
            retry = now + timedelta(seconds=self.policy.delay(item.attempt))
            self.view.settle(item.id, "pending", retry, error)

    def prune(self) -> int:
        """Remove delivered and failed rows older than the retention; how many went."""
        self._pruned_at = time.monotonic()
        cutoff = datetime.now(UTC) - timedelta(seconds=self.policy.retention)
        return self.view.prune(cutoff)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="webhooks", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        wait = self.policy.poll
        while not self._stop.is_set():
            try:
                busy = self._round()
            except STORE_ERRORS as exc:
                self._store_down(exc)
                wait = min(self.policy.outage_backoff, wait * 2)
                self._stop.wait(wait)
                continue
            except Exception:  # broad on purpose: a bug must not stop every later delivery
                log.exception("webhook delivery round failed unexpectedly; retrying")
                busy = 0
            wait = self.policy.poll
            if not busy:
                self._wake.wait(self.policy.poll)
                self._wake.clear()

    def _round(self) -> int:
        busy = self.run_once()
        self._store_up()
        if time.monotonic() - self._pruned_at >= self.policy.prune_every:
            self.prune()
        return busy

    def _store_down(self, exc: BaseException) -> None:
        self._pause.down(exc)

    def _store_up(self) -> None:
        self._pause.up()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.policy.timeout + 5)
        self._pool.shutdown(wait=True, cancel_futures=True)
