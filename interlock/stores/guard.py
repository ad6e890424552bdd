"""Whether the PostgreSQL store answers: a monitor's verdict that store calls fail fast on.

A thread probes the store (`SELECT 1` on a connection of its own, with a client-side deadline)
every PROBE_UP seconds while it answers and every PROBE_DOWN while it does not; a store call
that meets a broken connection asks for a probe at once. While the store is down every store
call fails at once with StoreUnavailableError (503 with Retry-After) instead of waiting for the
pool and retrying for the whole outage; when a probe answers again, calls go through and the
listeners (the views, the sweeper) are told. Each change is one log line, not one per retry.

A store that answers but cannot be written (a standby, a node in recovery, a server or role
with `default_transaction_read_only`) is down too: `read_only` says so, and the probe
connects anew each time, so that a multi-host URL with `target_session_attrs=read-write`
finds the primary that Patroni (or whoever runs the cluster) promoted.
"""

from __future__ import annotations

import logging
import math
import selectors
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import ExecStatus

from interlock.domain.errors import ConfigurationError, StoreUnavailableError

log = logging.getLogger("interlock.store")
PROBE_UP = 1.0  # seconds between probes while the store answers
PROBE_DOWN = 0.25  # and while it does not: a store back is seen this soon
DEFAULT_DEADLINE = 3.0
PROBE = b"SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"
READ_ONLY = "the store is read-only"  # how a read-only verdict begins

Listener = Callable[[bool], None]  # called with True when the store answers again


class StoreGuard:
    """The store's state as last probed, and the deadline its callers wait at most."""

    def __init__(self, connect: Callable[[float], psycopg.Connection[Any]], *,
                 deadline: float = DEFAULT_DEADLINE) -> None:
        """`connect(timeout)` opens a probe connection (not from the pool)."""
        self.deadline = deadline
        self.up = True
        self.reason = ""  # what PostgreSQL (or the deadline) said when it went down
        self.read_only = False  # down because the store answers but cannot be written
        self.read_only_seen = False  # and so at some probe of the current (or last) outage
        self.outages = 0
        self.listeners: list[Listener] = []
        self._since = time.monotonic()
        self._connect = connect
        self._conn: psycopg.Connection[Any] | None = None
        self._kick = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def retry_after(self) -> int:
        """Seconds a refused client should wait: about one deadline."""
        return max(1, math.ceil(self.deadline))

    def down_for(self) -> float:
        """Seconds since the store stopped answering (0 while it answers)."""
        return 0.0 if self.up else time.monotonic() - self._since

    def admit(self) -> None:
        """Raise StoreUnavailableError at once while the store is known to be down."""
        if not self.up:
            raise StoreUnavailableError(f"down for {self.down_for():.1f}s: {self.reason}",
                                        retry_after=self.retry_after)

    def refuse(self, why: str) -> StoreUnavailableError:
        """The error for a call that could not reach the store; a probe is asked for."""
        self.suspect()
        return StoreUnavailableError(why, retry_after=self.retry_after)

    def suspect(self) -> None:
        """A call met a failing connection: probe now rather than at the next interval."""
        self._kick.set()

    # -- the monitor -------------------------------------------------------------------------

    @property
    def monitoring(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Probe from a thread of this process until `stop`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="interlock-store-probe",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._drop()

    def probe(self) -> None:
        """Probe once now and record the verdict (the monitor's step)."""
        self._record(self._answer())

    def first_contact(self) -> None:
        """Reach the store once, at start: one that refuses (no such database or role, a
        wrong password, nothing listening on the port) is a mistake of configuration, told
        in PostgreSQL's words; an outage is what happens to a store that answered."""
        failure = self._answer()
        self._drop()
        if failure is not None:
            raise ConfigurationError(f"cannot use the PostgreSQL store: {failure}")

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self.probe()
            self._kick.wait(PROBE_UP if self.up else PROBE_DOWN)
            self._kick.clear()

    def _answer(self) -> str | None:
        """None if the store answered `SELECT 1` within the deadline, else why not."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = self._connect(self.deadline)
            failure = _probe(self._conn, self.deadline)
            if failure is not None and failure.startswith(READ_ONLY):
                self._drop()  # the next probe connects anew: to the primary, if one is named
            return failure
        except psycopg.Error as exc:
            self._drop()
            return " ".join(str(exc).split()) or type(exc).__name__  # PostgreSQL's reason

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _record(self, failure: str | None) -> None:
        if failure is not None and not self.up:  # still down: say the latest reason
            self.reason, self.read_only = failure, failure.startswith(READ_ONLY)
            self.read_only_seen |= self.read_only
            return
        if (failure is None) == self.up:
            return
        elapsed = time.monotonic() - self._since
        self._since = time.monotonic()
        if failure is not None:
            self.up, self.reason, self.outages = False, failure, self.outages + 1
            self.read_only = self.read_only_seen = failure.startswith(READ_ONLY)
            log.warning("store unavailable (%s): store calls answer 503 until it is back",
                        failure)
        else:
            self.up, self.read_only = True, False
            log.warning("store available again after %.1fs down (%s)", elapsed, self.reason)
        for listener in list(self.listeners):
            listener(self.up)


def _probe(conn: psycopg.Connection[Any], deadline: float) -> str | None:
    """Ask whether the store is writable and wait at most `deadline` for its answer, on the
    socket itself: a server that accepts but never answers (frozen, or a lost network) is
    seen as down too; one that answers read-only as well (READ_ONLY, and why)."""
    pgconn = conn.pgconn
    pgconn.send_query(PROBE)
    pgconn.flush()
    with selectors.DefaultSelector() as sel:
        sel.register(pgconn.socket, selectors.EVENT_READ)
        until = time.monotonic() + deadline
        while True:
            pgconn.consume_input()
            if not pgconn.is_busy():
                break
            if not sel.select(max(0.0, until - time.monotonic())):
                conn.close()  # its answer may still come: the next probe opens another
                return f"no answer within {deadline:g}s"
    failed = None
    while (result := pgconn.get_result()) is not None:
        if result.status != ExecStatus.TUPLES_OK:
            failed = "the probe query failed"
        elif result.get_value(0, 0) == b"t":
            failed = f"{READ_ONLY}: it is in recovery (a standby, or not yet promoted)"
        elif result.get_value(0, 1) == b"on":
            failed = f"{READ_ONLY}: its sessions are read-only (default_transaction_read_only)"
    return failed
