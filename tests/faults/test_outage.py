"""PostgreSQL stopped under load and started again: the service fails fast, tells the truth
and comes back by itself (issue 33)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

import httpx
import pytest
from fastapi import FastAPI

from interlock.bootstrap import build_app
from interlock.domain import Interlock
from interlock.settings import load_settings
from tests.api.server import ThreadServer
from tests.faults.agents import RUNS
from tests.faults.cluster import Cluster
from tests.faults.load import Load
from tests.faults.probe import Readiness

pytestmark = pytest.mark.postgres

DEADLINE = 1.0  # INTERLOCK_STORE_DEADLINE for these tests, seconds
SLACK = 0.5  # what an answer may take beyond it (the HTTP round trip, a loaded CI machine)
OUTAGE = 3.0  # seconds PostgreSQL stays stopped
RECOVERY = 10.0  # seconds the service may take to be ready again


@dataclass(frozen=True)
class Served:
    url: str
    service: Interlock


@pytest.fixture
def served(fault_store: str) -> Iterator[Served]:
    settings = load_settings(store=fault_store, agents="tests.faults.agents:AGENTS",
                             store_deadline=DEADLINE)
    app: FastAPI = build_app(settings)
    server = ThreadServer(app)
    try:
        yield Served(server.url, app.state.service)
    finally:
        server.stop()


def _until(check: object, timeout: float, what: str) -> float:
    """Poll `check()` until true; when it became true."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if check():  # type: ignore[operator]
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"{what} not within {timeout}s")


def _sent(load: Load) -> int:
    return sum(1 for a in list(load.answers) if a.what == "send" and a.status == 200)


def test_an_outage_under_load_answers_503_fast_and_the_service_comes_back_by_itself(
    cluster: Cluster, served: Served, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    RUNS.clear()
    readiness = Readiness(served.url).start()
    _until(lambda: readiness.first(200, 0.0) is not None, 10, "ready at start")
    load = Load(served.url).start()
    _until(lambda: _sent(load) >= 20, 30, "20 turns before the outage")

    cluster.stop()
    down = time.monotonic()  # PostgreSQL has stopped: every session is gone
    time.sleep(OUTAGE)  # the fault lasts this long; nothing to wait on but the clock
    during_metrics = _store_metrics(served.url)
    back = time.monotonic()
    cluster.start()
    started = time.monotonic()
    ready = _until(lambda: readiness.first(200, started) is not None, RECOVERY, "ready again")
    assert during_metrics == {"interlock_store_up": 0.0, "interlock_store_outages": 1.0,
                              "interlock_views_failing": 1.0}
    assert _store_metrics(served.url)["interlock_store_up"] == 1.0
    before = _sent(load)
    serving = _until(lambda: _sent(load) > before, RECOVERY, "turns again")
    load.stop()
    readiness.stop()

    during = load.between(down, back)
    assert len(during) >= 20  # the clients kept asking throughout
    assert {(a.status, a.code, a.retry_after) for a in during} == {
        (503, "store_unavailable", "1")}
    assert max(a.seconds for a in during) <= DEADLINE + SLACK
    assert not [a for a in load.answers if a.status >= 500 and a.status != 503]

    assert max(seconds for _, _, seconds in readiness.seen) < 1.0  # always within a second
    outage_probes = [s for sent, s, _ in readiness.seen if down <= sent <= back - 0.2]
    assert outage_probes and set(outage_probes) == {503}
    assert ready - started < RECOVERY and serving - started < RECOVERY

    _check_nothing_lost_nothing_twice(served.url, load)
    _check_one_line_per_change(caplog)
    effects = sum(RUNS.values())
    retried = _retry_what_the_outage_stopped(served, load)
    print(f"\noutage {OUTAGE}s: {len(during)} answers during it, all 503 store_unavailable,"
          f" slowest {max(a.seconds for a in during):.3f}s; readyz slowest"
          f" {max(s for _, _, s in readiness.seen):.3f}s; ready {ready - started:.2f}s and"
          f" serving {serving - started:.2f}s after the start; acknowledged"
          f" {_sent(load)} turns, {effects} side effects; {retried} turns caught mid-way"
          " finished by a retry")


def _check_nothing_lost_nothing_twice(url: str, load: Load) -> None:
    """Every acknowledged chat and turn is in the store; no tool call ran twice."""
    assert max(RUNS.values()) == 1
    paid = {key.split(":")[0] for key in RUNS}
    with httpx.Client(base_url=url, timeout=10) as http:
        for answer in load.answers:
            if answer.what == "create" and answer.status == 201:
                assert http.get(f"/v1/chats/{answer.chat}").status_code == 200
            if answer.what == "send" and answer.status == 200:
                chat = http.get(f"/v1/chats/{answer.chat}").json()
                assert chat["status"] == "idle", chat
                assert answer.chat in paid


def _store_metrics(url: str) -> dict[str, float]:
    """The store's and the views' state as /metrics says it (it answers during an outage)."""
    wanted = ("interlock_store_up", "interlock_store_outages", "interlock_views_failing")
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return {name: float(value) for name, _, value in
            (line.partition(" ") for line in text.splitlines()) if name in wanted}


def _retry_what_the_outage_stopped(served: Served, load: Load) -> int:
    """Each chat whose turn the outage stopped is left retryable, as after a crash (its
    lease is waived here rather than waited for); how many there were."""
    acknowledged = {a.chat for a in load.answers if a.what == "send" and a.status == 200}
    created = {a.chat for a in load.answers if a.what == "create" and a.status == 201}
    stopped = 0
    for chat in sorted(c for c in created - acknowledged if c is not None):
        state = served.service.get_chat(UUID(chat)).status
        if state == "idle" and not served.service.get_chat(UUID(chat)).state.messages:
            continue  # created, never sent to: nothing to finish
        assert state in ("running", "failed"), state
        result = asyncio.run(served.service.retry(UUID(chat), actor="dev", tenant="default",
                                                  stale_after=timedelta(0)))
        assert result.finish_reason == "stop"
        stopped += 1
    return stopped


def _check_one_line_per_change(caplog: pytest.LogCaptureFixture) -> None:
    """The outage is told once when it begins and once when it ends, not per retry."""
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    down = [m for m in lines if m.startswith("store unavailable")]
    up = [m for m in lines if m.startswith("store available again")]
    assert (len(down), len(up)) == (1, 1), lines
    for start in ("views paused", "views resumed", "sweeper paused", "webhook delivery paused",
                  "views: lost the append"):
        assert len([m for m in lines if m.startswith(start)]) <= 1, lines
    # ours say "failed unexpectedly" (with a traceback) for what is no outage; a cause they
    # quote may say it too ("server closed the connection unexpectedly": a pass in flight)
    assert not [r for r in caplog.records
                if r.exc_info or "failed unexpectedly" in r.getMessage()]
    # webhook delivery resumes on its own backoff (up to 30 s), maybe after this window
    for began, ended in (("views paused", "views resumed"), ("sweeper paused", "sweeper resumed")):
        if any(m.startswith(began) for m in lines):  # they back off, then say they resumed
            assert any(m.startswith(ended) for m in lines), lines
