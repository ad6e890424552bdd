"""Log lines an operator can act on: a component that pauses for the store says so once,
naming the cause when it is known, and once when it resumes; no traceback for an outage."""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import OperationalError, PersistenceError

from interlock.bootstrap import build_service
from interlock.domain.errors import StoreUnavailableError
from interlock.domain.storage.outages import cause
from interlock.projections import open_read_models
from interlock.sweeper import Sweeper
from interlock.webhooks.deliverer import Deliverer, DeliveryPolicy


def _wrapped(inner: BaseException, outer: type[PersistenceError] = OperationalError
             ) -> PersistenceError:
    try:
        raise outer(str(inner)) from inner
    except PersistenceError as exc:
        return exc


@pytest.mark.parametrize(("exc", "named"), [
    (_wrapped(sqlite3.OperationalError("database or disk is full")), "disk full"),
    (OSError(errno.ENOSPC, "No space left on device"), "disk full"),
    (psycopg.OperationalError('could not extend file "base/5/16384": No space left on device'),
     "disk full"),
    (sqlite3.OperationalError("attempt to write a readonly database"), "permission denied"),
    (_wrapped(psycopg.errors.InsufficientPrivilege("permission denied for table x")),
     "permission denied"),
    (psycopg.OperationalError('connection failed: connection to server at "127.0.0.1", port'
                              ' 5432 failed: Connection refused'), "connection refused"),
    (StoreUnavailableError("no answer within 3s"), "no answer"),
])
def test_the_cause_is_named_when_known(exc: BaseException, named: str) -> None:
    said = cause(exc)
    assert said.startswith(f"{named} (") and "\n" not in said, said


def test_an_unknown_cause_is_the_innermost_error_on_one_line() -> None:
    assert cause(_wrapped(sqlite3.DatabaseError("file is\nnot a database"))) == (
        "DatabaseError: file is not a database")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    assert not [r for r in caplog.records if r.exc_info], "a traceback for an outage"
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


class _Outbox:
    def prune(self, cutoff: Any) -> int:
        return 0


def test_the_webhook_deliverer_says_it_paused_and_resumed_once_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The guard's 503 (StoreUnavailableError) every round of an outage was 'failed
    unexpectedly' with a whole traceback, 13 times in 20 s."""
    policy = DeliveryPolicy(poll=0.01, outage_backoff=0.02)
    deliverer = Deliverer(_Outbox(), policy)  # type: ignore[arg-type]
    rounds, done = [0], threading.Event()

    def run_once() -> int:
        rounds[0] += 1
        if rounds[0] <= 6:
            raise StoreUnavailableError("down for 1.0s: connection failed: Connection refused")
        done.set()
        return 0

    deliverer.run_once = run_once  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        deliverer.start()
        assert done.wait(10)
        time.sleep(0.05)
        deliverer.stop()
    lines = _warnings(caplog)
    assert [m.split(":")[0] for m in lines] == ["webhook delivery paused",
                                                "webhook delivery resumed"], lines
    assert "connection refused (StoreUnavailableError" in lines[0]


@pytest.fixture
def sweeper() -> Iterator[Sweeper]:
    service = build_service("memory://")
    views = open_read_models(service)
    try:
        yield Sweeper(service, views)  # type: ignore[arg-type]
    finally:
        views.close()
        service.close()


def test_the_sweeper_names_a_full_disk(sweeper: Sweeper, caplog: pytest.LogCaptureFixture,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    full = _wrapped(sqlite3.OperationalError("database or disk is full"))

    def sweep() -> None:
        raise full

    monkeypatch.setattr(sweeper, "sweep", sweep)
    with caplog.at_level(logging.WARNING):
        assert not sweeper._pass() and not sweeper._pass()
        monkeypatch.setattr(sweeper, "sweep", lambda: None)
        assert sweeper._pass()
    lines = _warnings(caplog)
    assert len(lines) == 2 and lines[0].startswith("sweeper paused") and lines[1].startswith(
        "sweeper resumed"), lines
    assert "disk full (OperationalError: database or disk is full)" in lines[0]
