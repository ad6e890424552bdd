"""Lose the primary under load and lose nothing (issue 47): Interlock on a Patroni pair through
a multi-host URL with `target_session_attrs=read-write`; Patroni decides who is primary, the
service follows by itself, without a restart.

1. The primary's postmaster SIGKILLed: Patroni promotes the synchronous standby; clients see
   503 `store_unavailable` with Retry-After meanwhile (never another error), the service
   serves again within SERVES_WITHIN seconds of the kill, every acknowledged turn is in the
   store and every side effect ran once.
2. Then a planned `patronictl switchover` back: the same, the gap counted from the first
   refusal (the switchover's own start is patronictl's business).
3. The standby lost: the primary keeps committing (`synchronous_mode_strict: false`,
   docs/ha.md says why), then the standby comes back as the synchronous one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from fastapi import FastAPI
from psycopg.sql import SQL, Identifier

from interlock.bootstrap import build_app
from interlock.settings import load_settings
from tests.api.server import ThreadServer
from tests.faults.agents import RUNS
from tests.faults.load import Answer, Load
from tests.faults.test_outage import _check_nothing_lost_nothing_twice
from tests.ha.cluster import PatroniCluster

pytestmark = [pytest.mark.ha, pytest.mark.postgres]

DEADLINE = 1.0  # INTERLOCK_STORE_DEADLINE: a 503 comes this soon
SERVES_WITHIN = 10.0  # seconds from the fault to the first turn served again
CLIENTS = 4
BEFORE, AFTER = 20, 10  # turns acknowledged before the fault, and after the service is back


@dataclass(frozen=True)
class Served:
    url: str
    store: str


@pytest.fixture(scope="module")
def served(patroni: PatroniCluster) -> Iterator[Served]:
    schema = f"ha_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(patroni.url, autocommit=True) as conn:
        conn.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    store = f"{patroni.url}&schema={schema}"
    settings = load_settings(store=store, agents="tests.faults.agents:AGENTS",
                             store_deadline=DEADLINE)
    app: FastAPI = build_app(settings)
    server = ThreadServer(app)
    try:
        yield Served(server.url, store)
    finally:
        server.stop()


def _sends(load: Load, ok: bool = True) -> list[Answer]:
    return [a for a in list(load.answers) if a.what == "send" and (a.status == 200) == ok]


def _first_served(load: Load, since: float) -> float | None:
    """When the first turn sent after `since` was acknowledged."""
    return min((a.ended for a in _sends(load) if a.started >= since), default=None)


def _served_again(load: Load, since: float) -> float | None:
    """When the first turn sent after the last refusal (after `since`) was acknowledged:
    the end of the switch as clients see it (turns already under way on the old primary may
    still finish after the fault, while its backends live on)."""
    refused = [a.ended for a in list(load.answers) if a.status >= 300 and a.started >= since]
    return _first_served(load, max(refused, default=since))


def _through(patroni: PatroniCluster, served: Served, fault: str) -> tuple[Load, float, float]:
    """Load, the fault, load until served again and AFTER more turns; the load, when the
    fault began and when the first turn after it was acknowledged."""
    RUNS.clear()
    load = Load(served.url, clients=CLIENTS).start()
    try:
        patroni.wait(lambda: len(_sends(load)) >= BEFORE, 60, f"{BEFORE} turns before")
        began = time.monotonic()
        old = patroni.primary()
        if fault == "kill":
            patroni.kill_primary()
        else:
            standby = patroni.sync_standby()
            assert standby is not None
            patroni.switchover(to=standby)
            print(f"\npatronictl switchover returned after {time.monotonic() - began:.2f}s",
                  end="")
        promoted = patroni.wait(lambda: (new := patroni.primary()) is not None and
                                new is not old, 30, "a new primary")
        patroni.wait(lambda: _first_served(load, promoted) is not None, SERVES_WITHIN + 20,
                     "turns served again")
        served_then = len(_sends(load))
        patroni.wait(lambda: len(_sends(load)) >= served_then + AFTER, 60, "turns after")
    finally:
        load.stop()
    back = _served_again(load, began)
    assert back is not None
    print(f"\nPatroni named the new primary {promoted - began:.2f}s after the {fault}", end="")
    return load, began, back


def _check_only_503s(load: Load) -> list[Answer]:
    """Every refusal is a 503 store_unavailable with Retry-After; the refusals."""
    refused = [a for a in load.answers if a.status >= 300]
    assert {(a.status, a.code, a.retry_after) for a in refused} <= {
        (503, "store_unavailable", str(int(DEADLINE)))}, refused
    return refused


def _report(what: str, load: Load, began: float, back: float) -> None:
    refused = [a for a in load.answers if a.status >= 300]
    if refused:
        print(f"; 503s from {min(a.started for a in refused) - began:.2f}s to"
              f" {max(a.ended for a in refused) - began:.2f}s", end="")
    print(f"\n{what}: served again {back - began:.2f}s after it; {len(refused)} answers 503"
          f" store_unavailable (slowest {max((a.seconds for a in refused), default=0):.2f}s);"
          f" {len(_sends(load))} turns acknowledged, {sum(RUNS.values())} side effects,"
          f" none twice")


def test_the_primary_killed_is_a_failover_that_loses_nothing(
        patroni: PatroniCluster, served: Served) -> None:
    load, killed, back = _through(patroni, served, "kill")
    _check_only_503s(load)
    assert back - killed < SERVES_WITHIN
    _check_nothing_lost_nothing_twice(served.url, load)
    _report("primary's postmaster SIGKILLed", load, killed, back)


def test_a_planned_switchover_loses_nothing(patroni: PatroniCluster, served: Served) -> None:
    patroni.wait(lambda: patroni.sync_standby() is not None, 90,
                 "the old primary back as the synchronous standby")
    load, began, back = _through(patroni, served, "switchover")
    refused = _check_only_503s(load)
    # From the first refusal: patronictl itself may take seconds to start on a busy machine.
    assert back - min((a.started for a in refused), default=back) < SERVES_WITHIN
    _check_nothing_lost_nothing_twice(served.url, load)
    _report("patronictl switchover", load, began, back)




def test_the_standby_lost_the_primary_keeps_committing(
        patroni: PatroniCluster, served: Served) -> None:
    patroni.wait(lambda: patroni.sync_standby() is not None, 90, "a synchronous standby")
    standby = patroni.sync_standby()
    assert standby is not None
    RUNS.clear()
    load = Load(served.url, clients=CLIENTS).start()
    try:
        patroni.wait(lambda: len(_sends(load)) >= BEFORE, 60, f"{BEFORE} turns before")
        patroni.stop_node(standby)
        stopped = time.monotonic()
        patroni.wait(lambda: len([a for a in _sends(load) if a.started >= stopped]) >= BEFORE,
                     SERVES_WITHIN, f"{BEFORE} turns on the primary alone")
        alone = time.monotonic()
    finally:
        load.stop()
        patroni.start_node(standby)
    _check_only_503s(load)
    _check_nothing_lost_nothing_twice(served.url, load)
    patroni.wait(lambda: patroni.sync_standby() is standby, 90, "the standby back in sync")
    print(f"\nstandby stopped: {BEFORE} turns acknowledged by the primary alone within"
          f" {alone - stopped:.2f}s")
