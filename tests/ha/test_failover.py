"""Lose the primary under load and lose nothing (issue 47): Interlock on a Patroni pair through
a multi-host URL with `target_session_attrs=read-write`; Patroni decides who is primary, the
service follows by itself, without a restart. The load: CLIENTS clients doing approval cycles
(tests/ha/cycles.py: create a chat, send, approve; the approved tool has a side effect).

1. The primary's postmaster SIGKILLed: Patroni promotes the synchronous standby; clients see
   503 `store_unavailable` with Retry-After meanwhile (never another error), the service
   serves again within SERVES_WITHIN seconds of the kill, every acknowledged step's events
   are in the store and every side effect ran once.
2. The primary's whole node lost (Patroni, PostgreSQL and its backends SIGKILLed together):
   nobody releases the leader key, so the standby is promoted once it expires; the same,
   served again within Patroni's `ttl` plus SERVES_WITHIN.
3. A planned `patronictl switchover`: the same, the gap counted from the first refusal (the
   switchover's own start is patronictl's business).
4. The standby lost: the primary keeps committing (`synchronous_mode_strict: false`,
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
from tests.ha.cluster import PatroniCluster
from tests.ha.cycles import STEPS, CycleLoad, acknowledged, check_nothing_lost_nothing_twice

pytestmark = [pytest.mark.ha, pytest.mark.postgres]

DEADLINE = 1.0  # INTERLOCK_STORE_DEADLINE: a 503 comes this soon
SERVES_WITHIN = 10.0  # seconds from the fault to the first turn served again
CLIENTS = 8
BEFORE, AFTER = 20, 10  # cycles acknowledged before the fault, and after the service is back


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
    settings = load_settings(store=store, agents="tests.ha.cycles:AGENTS",
                             store_deadline=DEADLINE)
    app: FastAPI = build_app(settings)
    server = ThreadServer(app)
    try:
        yield Served(server.url, store)
    finally:
        server.stop()


def _sends(load: Load, ok: bool = True) -> list[Answer]:
    """tests/faults/load.py's turns (`send`), acknowledged or (ok=False) not."""
    return [a for a in list(load.answers) if a.what == "send" and (a.status == 200) == ok]


def _first_served(load: Load, since: float, what: str = "send") -> float | None:
    """When the first `what` (a step: "approve" for a cycle) sent after `since` was
    acknowledged."""
    return min((a.ended for a in list(load.answers)
                if a.what == what and a.status < 300 and a.started >= since), default=None)


def _served_again(load: Load, since: float, what: str = "send") -> float | None:
    """When the first `what` sent after the last refusal (after `since`) was acknowledged:
    the end of the switch as clients see it (requests already under way on the old primary
    may still finish after the fault, while its backends live on)."""
    refused = [a.ended for a in list(load.answers) if a.status >= 300 and a.started >= since]
    return _first_served(load, max(refused, default=since), what)


def _through(patroni: PatroniCluster, served: Served, fault: str) -> tuple[CycleLoad, float, float]:
    """Cycles, the fault, cycles until served again and AFTER more; the load, when the fault
    began and when the first approval sent after the last refusal was acknowledged."""
    RUNS.clear()
    load = CycleLoad(served.url, clients=CLIENTS).start()
    promoted_within = patroni.ttl() + 30 if fault == "node" else 30
    try:
        patroni.wait(lambda: len(acknowledged(load)) >= BEFORE, 60, f"{BEFORE} cycles before")
        began = time.monotonic()
        old = patroni.primary()
        assert old is not None
        if fault == "kill":
            patroni.kill_primary()
        elif fault == "node":
            patroni.kill_node(old)
        else:
            standby = patroni.sync_standby()
            assert standby is not None
            patroni.switchover(to=standby)
            print(f"\npatronictl switchover returned after {time.monotonic() - began:.2f}s",
                  end="")
        promoted = patroni.wait(lambda: (new := patroni.primary()) is not None and
                                new is not old, promoted_within, "a new primary")
        patroni.wait(lambda: _first_served(load, promoted, "approve") is not None,
                     SERVES_WITHIN + 20, "cycles served again")
        served_then = len(acknowledged(load))
        patroni.wait(lambda: len(acknowledged(load)) >= served_then + AFTER, 60, "cycles after")
    finally:
        load.stop()
    back = _served_again(load, began, "approve")
    assert back is not None
    print(f"\nPatroni named the new primary {promoted - began:.2f}s after the {fault}", end="")
    return load, began, back


def _check_only_503s(load: Load) -> list[Answer]:
    """Every refusal is a 503 store_unavailable with Retry-After; the refusals."""
    refused = [a for a in load.answers if a.status >= 300]
    assert {(a.status, a.code, a.retry_after) for a in refused} <= {
        (503, "store_unavailable", str(int(DEADLINE)))}, refused
    return refused


def _report(what: str, load: CycleLoad, began: float, back: float) -> None:
    refused = [a for a in load.answers if a.status >= 300]
    if refused:
        print(f"; 503s from {min(a.started for a in refused) - began:.2f}s to"
              f" {max(a.ended for a in refused) - began:.2f}s", end="")
    steps = ", ".join(f"{len(acknowledged(load, s))} {s}" for s in STEPS)
    print(f"\n{what}: served again {back - began:.2f}s after it; {len(refused)} answers 503"
          f" store_unavailable (slowest {max((a.seconds for a in refused), default=0):.2f}s);"
          f" {CLIENTS} clients, acknowledged {steps}; {sum(RUNS.values())} side effects,"
          f" none twice")


def test_the_primary_killed_is_a_failover_that_loses_nothing(
        patroni: PatroniCluster, served: Served) -> None:
    load, killed, back = _through(patroni, served, "kill")
    _check_only_503s(load)
    assert back - killed < SERVES_WITHIN
    check_nothing_lost_nothing_twice(served.url, load)
    _report("primary's postmaster SIGKILLed", load, killed, back)


def test_the_primary_node_lost_whole_is_a_failover_within_ttl(
        patroni: PatroniCluster, served: Served) -> None:
    patroni.wait(lambda: patroni.sync_standby() is not None, 90,
                 "the old primary back as the synchronous standby")
    lost = patroni.primary()
    assert lost is not None
    try:
        load, killed, back = _through(patroni, served, "node")
    finally:
        patroni.start_node(lost)  # the machine back: it rejoins as a standby
    _check_only_503s(load)
    assert back - killed < patroni.ttl() + SERVES_WITHIN
    check_nothing_lost_nothing_twice(served.url, load)
    _report(f"primary's whole node SIGKILLed (ttl {patroni.ttl()} s)", load, killed, back)


def test_a_planned_switchover_loses_nothing(patroni: PatroniCluster, served: Served) -> None:
    patroni.wait(lambda: patroni.sync_standby() is not None, 90,
                 "the old primary back as the synchronous standby")
    load, began, back = _through(patroni, served, "switchover")
    refused = _check_only_503s(load)
    # From the first refusal: patronictl itself may take seconds to start on a busy machine.
    assert back - min((a.started for a in refused), default=back) < SERVES_WITHIN
    check_nothing_lost_nothing_twice(served.url, load)
    _report("patronictl switchover", load, began, back)


def test_the_standby_lost_the_primary_keeps_committing(
        patroni: PatroniCluster, served: Served) -> None:
    patroni.wait(lambda: patroni.sync_standby() is not None, 90, "a synchronous standby")
    standby = patroni.sync_standby()
    assert standby is not None
    RUNS.clear()
    load = CycleLoad(served.url, clients=CLIENTS).start()
    try:
        patroni.wait(lambda: len(acknowledged(load)) >= BEFORE, 60, f"{BEFORE} cycles before")
        patroni.stop_node(standby)
        stopped = time.monotonic()
        patroni.wait(lambda: len([a for a in acknowledged(load) if a.started >= stopped])
                     >= BEFORE, SERVES_WITHIN, f"{BEFORE} cycles on the primary alone")
        alone = time.monotonic()
    finally:
        load.stop()
        patroni.start_node(standby)
    _check_only_503s(load)
    check_nothing_lost_nothing_twice(served.url, load)
    patroni.wait(lambda: patroni.sync_standby() is standby, 90, "the standby back in sync")
    print(f"\nstandby stopped: {BEFORE} cycles acknowledged by the primary alone within"
          f" {alone - stopped:.2f}s")
