"""PostgreSQL frozen under load (SIGSTOP: it accepts and its kernel acknowledges, nothing
answers): the guard's probe sees it within its deadline and cuts the calls already waiting,
so no request waits for the thaw (issue 33)."""

from __future__ import annotations

import logging
import time

import pytest

from interlock.stores.guard import PROBE_UP
from tests.faults.agents import RUNS
from tests.faults.cluster import Cluster
from tests.faults.load import Load
from tests.faults.probe import Readiness
from tests.faults.test_outage import (
    DEADLINE,
    RECOVERY,
    SLACK,
    Served,
    _check_nothing_lost_nothing_twice,
    _sent,
    _until,
    served,
)

pytestmark = pytest.mark.postgres
__all__ = ["served"]  # the fixture, shared with the outage test

FROZEN = 4.0  # seconds PostgreSQL stays stopped by SIGSTOP
SEEN = PROBE_UP + DEADLINE + SLACK  # by then the guard has called the store down


def test_a_frozen_store_answers_503_within_the_deadline_and_nothing_waits_for_the_thaw(
    cluster: Cluster, served: Served, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    RUNS.clear()
    readiness = Readiness(served.url).start()
    load = Load(served.url).start()
    _until(lambda: _sent(load) >= 10, 30, "turns before the freeze")
    cluster.freeze()
    frozen = time.monotonic()
    try:
        time.sleep(FROZEN)  # the fault lasts this long; nothing to wait on but the clock
    finally:
        thawed = time.monotonic()
        cluster.thaw()
    ready = _until(lambda: readiness.first(200, thawed) is not None, RECOVERY, "ready again")
    before = _sent(load)
    _until(lambda: _sent(load) > before, RECOVERY, "turns again")
    load.stop()
    readiness.stop()

    caught = [a for a in load.answers if a.started < frozen + 0.05]
    assert max(a.ended for a in caught) < frozen + SEEN  # cut, not left waiting for the thaw
    later = load.between(frozen + SEEN, thawed)
    assert len(later) >= 10
    assert {(a.status, a.code) for a in later} == {(503, "store_unavailable")}
    assert max(a.seconds for a in later) <= DEADLINE + SLACK
    assert not [a for a in load.answers if a.status >= 500 and a.status != 503]
    # Within a second, but for this: a lone command runs its store work on the event loop
    # (Interlock.off_loop, to spare a thread hop), and one caught in a frozen store holds
    # the loop, /readyz too, until the guard cuts it. Told in docs/operations.md.
    assert max(seconds for _, _, seconds in readiness.seen) < SEEN
    assert {s for sent, s, _ in readiness.seen if frozen + 0.1 <= sent <= thawed - 0.6} == {503}
    down = [r.getMessage() for r in caplog.records if r.getMessage().startswith(
        "store unavailable")]
    assert down == [f"store unavailable (no answer within {DEADLINE:g}s): store calls answer"
                    " 503 until it is back"]
    _check_nothing_lost_nothing_twice(served.url, load)
    print(f"\nfrozen {FROZEN}s: calls in flight cut after"
          f" {max(a.ended for a in caught) - frozen:.2f}s; {len(later)} answers once seen, all"
          f" 503 within {max(a.seconds for a in later):.3f}s; readyz slowest"
          f" {max(s for _, _, s in readiness.seen):.3f}s; ready {ready - thawed:.2f}s after"
          f" the thaw; acknowledged {_sent(load)} turns, {sum(RUNS.values())} side effects")
