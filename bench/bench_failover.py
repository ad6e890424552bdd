"""Failover time (the primary's postmaster SIGKILLed, to the first turn served again), p50/p95
over N failovers, and the cycle rate with synchronous replication against one node, same run.

    .venv/bin/python -m bench.bench_failover [--failovers 5] [--clients 4] [--seconds 10]

A Patroni pair with etcd from nothing (tests/ha/cluster.py, docs/ha.md's configuration) and a
lone PostgreSQL (tests/faults/cluster.py), both on loopback with `fsync: off`; Interlock
served in process on each through its store URL (the pair's names both nodes with
`target_session_attrs=read-write`), clients creating a chat and sending it a turn whose tool
has a side effect (tests/faults/load.py). Needs Patroni and etcd as .ci/run installs them.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.sql import SQL, Identifier

from interlock.bootstrap import build_app
from interlock.settings import load_settings
from tests.api.server import ThreadServer
from tests.faults.agents import RUNS
from tests.faults.cluster import Cluster
from tests.faults.load import Load
from tests.ha.cluster import PatroniCluster, missing
from tests.ha.test_failover import _first_served, _sends, _served_again

DEADLINE = 1.0


@contextmanager
def served(url: str) -> Iterator[str]:
    """Interlock on a new schema of the store at `url`; its HTTP base URL."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    mark = "&" if "?" in url else "?"
    settings = load_settings(store=f"{url}{mark}schema={schema}",
                             agents="tests.faults.agents:AGENTS", store_deadline=DEADLINE)
    server = ThreadServer(build_app(settings))
    try:
        yield server.url
    finally:
        server.stop()


def rate(base: str, clients: int, seconds: float) -> float:
    """Turns acknowledged a second (each after its chat's creation: two requests)."""
    load = Load(base, clients=clients).start()
    time.sleep(2)  # warm: pools filled, statements prepared
    start, before = time.monotonic(), len(_sends(load))
    time.sleep(seconds)
    done = len(_sends(load)) - before
    elapsed = time.monotonic() - start
    load.stop()
    return done / elapsed


def failover(patroni: PatroniCluster, base: str, clients: int) -> tuple[float, float, int]:
    """One SIGKILL of the primary's postmaster under load: seconds to Patroni's new primary,
    to the first turn served again, and the 503s seen."""
    patroni.wait(lambda: patroni.sync_standby() is not None, 120, "a synchronous standby")
    RUNS.clear()
    load = Load(base, clients=clients).start()
    try:
        patroni.wait(lambda: len(_sends(load)) >= 10, 60, "turns before the kill")
        old, killed = patroni.kill_primary(), time.monotonic()
        promoted = patroni.wait(lambda: (new := patroni.primary()) is not None and
                                new is not old, 60, "a new primary")
        patroni.wait(lambda: _first_served(load, promoted) is not None, 60, "served again")
        served_then = len(_sends(load))
        patroni.wait(lambda: len(_sends(load)) >= served_then + 5, 60, "turns after")
    finally:
        load.stop()
    back = _served_again(load, killed)
    assert back is not None and max(RUNS.values()) == 1
    refused = [a for a in load.answers if a.status >= 300]
    assert {(a.status, a.code) for a in refused} <= {(503, "store_unavailable")}
    return promoted - killed, back - killed, len(refused)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    lacking = missing()
    if lacking is not None:
        raise SystemExit(lacking)
    lone = Cluster()
    patroni = PatroniCluster()
    try:
        print(f"pair ready from nothing in {patroni.start():.1f}s")
        with served(lone.url) as base:
            single = rate(base, args.clients, args.seconds)
        with served(patroni.url) as base:
            paired = rate(base, args.clients, args.seconds)
            print(f"turns/s, {args.clients} clients: one node {single:.1f}, synchronous pair"
                  f" {paired:.1f} ({paired / single:.0%})")
            runs = [failover(patroni, base, args.clients) for _ in range(args.failovers)]
    finally:
        patroni.remove()
        lone.remove()
    promoted, back, refused = zip(*runs, strict=True)
    for name, values in (("Patroni's new primary", list(promoted)),
                         ("served again", list(back))):
        print(f"{name} after the kill: p50 {statistics.median(values):.2f}s,"
              f" p95 {_p(values, 0.95):.2f}s, max {max(values):.2f}s over {len(values)}")
    print(f"503 store_unavailable answers a failover: {', '.join(map(str, refused))};"
          " no side effect twice, nothing else refused")


if __name__ == "__main__":
    main()
