"""The server's database sessions killed mid-group-commit (pg_terminate_backend) under load:
the appends in flight are retried on fresh connections, nothing acknowledged is lost and no
tool runs twice (issue 33)."""

from __future__ import annotations

import httpx
import pytest

from tests.faults.agents import RUNS
from tests.faults.cluster import Cluster
from tests.faults.load import Load
from tests.faults.test_outage import (
    Served,
    _check_nothing_lost_nothing_twice,
    _sent,
    _until,
    served,
)

pytestmark = pytest.mark.postgres
__all__ = ["served"]  # the fixture, shared with the outage test

KILLING = 3.0  # seconds of killing every session caught inside the append function


def test_sessions_killed_mid_group_commit_lose_nothing_and_run_nothing_twice(
    cluster: Cluster, served: Served,
) -> None:
    RUNS.clear()
    load = Load(served.url, clients=8).start()
    _until(lambda: _sent(load) >= 10, 30, "turns before the killing")
    ended = cluster.terminate("append_groups", KILLING)
    before = _sent(load)
    _until(lambda: _sent(load) > before + 5, 10, "turns after the killing")
    load.stop()

    assert ended >= 3  # sessions really died inside group commits
    statuses = {(a.status, a.code) for a in load.answers}
    assert statuses <= {(201, None), (200, None), (503, "store_unavailable")}, statuses
    with httpx.Client(base_url=served.url, timeout=10) as http:
        assert http.get("/readyz").status_code == 200
    _check_nothing_lost_nothing_twice(served.url, load)
    refused = sum(1 for a in load.answers if a.status == 503)
    print(f"\n{ended} sessions killed inside the append function in {KILLING}s;"
          f" {len(load.answers)} answers, {refused} of them 503; acknowledged {_sent(load)}"
          f" turns, {sum(RUNS.values())} side effects, none twice")
