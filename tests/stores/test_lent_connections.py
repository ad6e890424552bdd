"""The store lends a pooled connection as the library did: errors turned into the library's,
a connection closed by its user given back quietly, and none left counted in use."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from eventsourcing.persistence import IntegrityError, ProgrammingError

from interlock.bootstrap import build_service
from interlock.replay.source import _read_only
from interlock.stores import postgres
from interlock.stores.postgres import GuardedDatastore

pytestmark = pytest.mark.postgres


def test_lent_connections_map_errors_and_are_always_given_back(pg_store: str) -> None:
    app = build_service(pg_store)
    store = app.recorder.datastore
    assert isinstance(store, GuardedDatastore)
    with store.get_connection() as conn:
        conn.close()  # its user closed it: given back without an error, as before
    with pytest.raises(ProgrammingError), store.get_connection() as conn:
        conn.execute("SELECT * FROM no_such_table")
    with pytest.raises(IntegrityError), store.get_connection() as conn:
        conn.execute("CREATE TEMP TABLE t (x int PRIMARY KEY)")
        conn.execute("INSERT INTO t VALUES (1), (1)")
    with store.get_connection() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    assert not store._in_use
    app.close()


def _store(pg_store: str) -> tuple[Any, GuardedDatastore]:
    app = build_service(pg_store)
    store = app.recorder.datastore
    assert isinstance(store, GuardedDatastore)
    return app, store


def test_the_connection_given_back_is_lent_next_without_the_pool(pg_store: str) -> None:
    """A lone caller's lendings skip the pool's getconn and putconn: the connection waits in
    the slot; one left in a transaction, or closed, goes back to the pool instead."""
    app, store = _store(pg_store)
    with store.get_connection() as first:
        pass
    requests = store.pool.get_stats().get("requests_num", 0)
    for _ in range(3):
        with store.get_connection() as conn:
            assert conn is first
    assert store.pool.get_stats().get("requests_num", 0) == requests  # the pool was not asked
    with store.get_connection() as conn:
        conn.autocommit = False
        conn.execute("SELECT 1")  # left in a transaction: the commit below ends it
    assert store._parked is not None and store._parked[0] is conn  # committed, so idle again
    with store.get_connection() as conn:
        conn.close()
    assert store._parked is None  # a closed one is the pool's to replace
    app.close()


def test_another_thread_takes_the_parked_connection_so_a_small_pool_never_starves(
    pg_store: str
) -> None:
    app, store = _store(pg_store)
    store.pool.resize(1, 1)
    store.pool.timeout = 1.0
    with store.get_connection() as mine:
        pass
    assert store._parked is not None
    lent: list[Any] = []

    def other() -> None:
        with store.get_connection() as conn:
            lent.append(conn)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(10)
    assert lent == [mine]  # the only connection, taken from the slot: no wait for the pool
    app.close()


def test_a_stale_parked_connection_goes_back_and_close_closes_it(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parked too long, or when the store goes down, comes back, or breaks a connection,
    the parked connection goes back to the pool; closing the store closes it."""
    app, store = _store(pg_store)
    with store.get_connection():
        pass
    monkeypatch.setattr(postgres, "PARKED_IDLE", 0.0)
    time.sleep(0.01)
    requests = store.pool.get_stats().get("requests_num", 0)
    with store.get_connection():
        pass
    assert store.pool.get_stats().get("requests_num", 0) == requests + 1  # asked the pool
    monkeypatch.setattr(postgres, "PARKED_IDLE", 5.0)
    for went in (lambda: store._store_changed(False), lambda: store._store_changed(True),
                 store._broken):
        with store.get_connection():
            pass
        assert store._parked is not None
        went()
        assert store._parked is None  # back to the pool, which checks or replaces it
    with store.get_connection() as conn:
        pass
    assert store._parked is not None and store._parked[0] is conn
    app.close()
    assert conn.closed  # given back, then closed with the pool


def test_a_connection_given_back_while_others_wait_goes_to_them(pg_store: str) -> None:
    """With every connection of a small pool lent, one given back goes to the caller queued
    in the pool, not into the slot (where only a later lending would find it)."""
    app, store = _store(f"{pg_store}&pool_size=2&max_overflow=0")
    store.pool.timeout = 5.0
    errors: list[BaseException] = []
    got = threading.Event()
    with store.get_connection():  # held for good, as the views' LISTEN connection is
        holding, release = threading.Event(), threading.Event()

        def hold() -> None:
            with store.get_connection():
                holding.set()
                release.wait(10)

        def wait() -> None:
            try:
                with store.get_connection():
                    got.set()
            except Exception as exc:  # noqa: BLE001 - reported below, whatever it is
                errors.append(exc)

        holder = threading.Thread(target=hold)
        holder.start()
        holding.wait(10)
        waiter = threading.Thread(target=wait)
        waiter.start()
        deadline = time.monotonic() + 5
        while not store.pool._waiting and time.monotonic() < deadline:
            time.sleep(0.01)  # the waiter is queued in the pool
        started = time.monotonic()
        release.set()
        holder.join(10)
        waiter.join(10)
        assert got.is_set() and not errors and time.monotonic() - started < 2.0
    app.close()


def test_a_replaced_pool_never_lends_the_old_pools_connection(pg_store: str) -> None:
    """Replay swaps in a pool of read-only connections: the connection parked from the old
    pool is never lent again, and is closed with it."""
    app, store = _store(pg_store)
    with store.get_connection() as old:
        pass
    assert store._parked is not None
    _read_only(store)
    with store.get_connection() as conn:
        assert conn is not old
        row = conn.execute("SHOW default_transaction_read_only").fetchone()
        assert row == {"default_transaction_read_only": "on"}
    assert old.closed
    app.close()
