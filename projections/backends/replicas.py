"""Hot standbys that answer the read side's queries (INTERLOCK_READ_REPLICAS, docs/ha.md).

The views are written on the primary only; a standby holds them as replicated, each view's
tracking row (its applied position) committed with its rows. A query for a request that must
see every write up to `position` goes to a replica only once that replica's own copy of the
view's tracking row shows `position` (polled for up to `wait` seconds); else, and whenever a
replica fails or refuses, it reads on the primary: never an answer from a replica behind the
client's write.

The replicas' connections are this module's, apart from the store's pool: read-only
(`default_transaction_read_only`), made when a read needs one (`connect_timeout`: libpq's
two seconds at least for a host that does not answer; a refused port fails at once) and kept
idle for the next, up to `pool_size` a replica; a replica that failed is passed over for
RETRY_DOWN seconds, so a dead one costs reads one failed attempt a period, not one each.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row

from interlock.domain.errors import ConfigurationError
from interlock.stores.urls import _check_ports, postgres_env, redacted, split_own

log = logging.getLogger("interlock.replicas")
RETRY_DOWN = 1.0  # seconds a replica that failed is passed over before it is tried again
POLL = 0.01  # seconds between reads of a replica's position while it is behind
CONNECT_WITHIN = 2  # libpq's connect_timeout for a replica (its least: 2 s)
APPLICATION_NAME = "interlock-replica-read"  # in the standby's pg_stat_activity


class ReplicaUnavailableError(Exception):
    """A replica failed or refused a read: the read goes to the primary instead."""


class Replica:
    """One hot standby: idle read-only connections kept for reuse, and whether it answers."""

    def __init__(self, url: str, conninfo: str, pool_size: int) -> None:
        self.name = redacted(url)
        self.conninfo, self.pool_size = conninfo, pool_size
        self.reads = 0  # queries it answered (not counting its positions' reads)
        self.failures = 0  # reads it failed or refused (each then read on the primary)
        self.reason = ""  # why it last failed ("" while it answers)
        self._down_until = 0.0
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[DictRow]] = []
        self._closed = False
        self._kwargs: dict[str, Any] = {
            "autocommit": True, "row_factory": dict_row, "connect_timeout": CONNECT_WITHIN,
            "options": "-c default_transaction_read_only=on",
            # A host lost (not a process: its kernel answers for it) fails a read within
            # seconds, as the store's own connections do (stores/postgres.py).
            "keepalives_idle": 1, "keepalives_interval": 1, "keepalives_count": 3,
            "tcp_user_timeout": CONNECT_WITHIN * 1000}
        if "application_name" not in conninfo_to_dict(conninfo):
            self._kwargs["application_name"] = APPLICATION_NAME

    def open(self) -> None:
        """Nothing to do: connections are made when a read needs one."""

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for conn in idle:
            conn.close()

    def _connection(self) -> psycopg.Connection[DictRow]:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        conn: psycopg.Connection[DictRow] = psycopg.connect(self.conninfo, **self._kwargs)
        return conn

    def _release(self, conn: psycopg.Connection[DictRow]) -> None:
        idle = (not conn.closed and not conn.broken
                and conn.info.transaction_status == pq.TransactionStatus.IDLE)
        with self._lock:
            if idle and not self._closed and len(self._idle) < self.pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def usable(self) -> bool:
        """False for RETRY_DOWN seconds after a failure."""
        return time.monotonic() >= self._down_until

    def fetch(self, query: bytes, params: Mapping[str, Any], *,
              counted: bool = True) -> list[DictRow]:
        """The rows of `query`; ReplicaUnavailableError if the replica cannot answer.
        `counted`: a query's read (`reads`), not a position's."""
        try:
            conn = self._connection()
        except psycopg.OperationalError as exc:  # down, refusing, or not answering in time
            self._failed(exc)
            raise ReplicaUnavailableError(self.reason) from exc
        try:
            rows = list(conn.execute(query, params).fetchall())
        except psycopg.OperationalError as exc:  # gone, shut down, restarted
            self._failed(exc)
            raise ReplicaUnavailableError(self.reason) from exc
        except psycopg.Error as exc:  # e.g. a query cancelled for a conflict with recovery,
            # or a table a rebuild is replacing: the primary answers this one
            raise ReplicaUnavailableError(" ".join(str(exc).split())) from exc
        finally:
            self._release(conn)
        with self._lock:
            self.reads += counted
            if self.reason:
                log.warning("read replica %s answers again", self.name)
            self.reason = ""
        return rows

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            stale, self._idle = self._idle, []  # a replica restarted ended them all
            self.failures += 1
            self._down_until = time.monotonic() + RETRY_DOWN
            said = " ".join(str(exc).split()) or type(exc).__name__
            if not self.reason:
                log.warning("read replica %s failed (%s): reads go to the primary", self.name,
                            said)
            self.reason = said
        for conn in stale:
            conn.close()

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "up": not self.reason, "reason": self.reason or None,
                "reads": self.reads, "failures": self.failures}

    def probe(self) -> str | None:
        """None if the replica answers a query now, else why not (`/readyz`)."""
        try:
            self.fetch(b"SELECT 1 AS one", {}, counted=False)
        except ReplicaUnavailableError as exc:
            return str(exc)
        return None


class Replicas:
    """The replicas of a store, and how long a read waits for one to catch up."""

    def __init__(self, replicas: Sequence[Replica], wait: float) -> None:
        self.replicas, self.wait = list(replicas), wait
        self.behind = 0  # reads that went to the primary: no replica had the position in time
        self.unavailable = 0  # and those that went there: no replica answered
        self._next = 0

    def open(self) -> None:
        for replica in self.replicas:
            replica.open()

    def close(self) -> None:
        for replica in self.replicas:
            replica.close()

    def current(self, position: int, at: Callable[[Replica], int]) -> Replica | None:
        """A usable replica whose position (`at`, a read on it) has reached `position`,
        polling up to `wait` seconds while one answers; None: read on the primary.
        Replicas take turns."""
        deadline = time.monotonic() + self.wait
        while True:
            count = len(self.replicas)
            start, self._next = self._next, (self._next + 1) % max(1, count)
            answering = False
            for i in range(count):
                replica = self.replicas[(start + i) % count]
                if not replica.usable():
                    continue
                try:
                    if at(replica) >= position:
                        return replica
                    answering = True
                except ReplicaUnavailableError:
                    continue
            if not answering:  # every replica down or refusing: no use waiting for one
                self.unavailable += 1
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                self.behind += 1
                return None
            time.sleep(min(POLL, left))

    def states(self) -> list[dict[str, Any]]:
        return [r.state() for r in self.replicas]


def open_replicas(urls: str, store: str, wait: float) -> Replicas:
    """The replicas named by `urls` (whitespace-separated libpq URLs) of the PostgreSQL
    store `store`; ConfigurationError naming a URL that cannot be one."""
    if not store.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            "INTERLOCK_READ_REPLICAS: read replicas are standbys of a PostgreSQL store; the "
            f"store is {redacted(store)!r}")
    schema = postgres_env(store)["POSTGRES_SCHEMA"]
    replicas = []
    for url in urls.split():
        conninfo, own = split_own(url)
        where = f"INTERLOCK_READ_REPLICAS: {redacted(url)!r}"
        if not url.startswith(("postgresql://", "postgres://")):
            raise ConfigurationError(f"{where} is not a postgresql:// URL")
        if own["schema"] not in ("public", schema):  # public: the default, not given
            raise ConfigurationError(f"{where}: schema={own['schema']} is not the store's "
                                     f"({schema}): a replica holds the store's own tables")
        try:
            params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(f"{where} is not one libpq reads: "
                                     f"{' '.join(str(exc).split())}") from None
        _check_ports(where, params)
        if not own["pool_size"].isdigit() or int(own["pool_size"]) < 1:
            raise ConfigurationError(f"{where}: pool_size={own['pool_size']!r} is not a whole"
                                     " number above 0")
        replicas.append(Replica(url, make_conninfo(**params), int(own["pool_size"])))
    if not replicas:
        raise ConfigurationError("INTERLOCK_READ_REPLICAS names no URL")
    return Replicas(replicas, wait)
