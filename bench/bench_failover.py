"""Failover time (the primary's postmaster SIGKILLed, or with --whole-node its whole node:
Patroni, postmaster and backends; to the first approval cycle served again), p50/p95 over N
failovers, and the cycle rate with synchronous replication against one node, same run.

    .venv/bin/python -m bench.bench_failover [--failovers 5] [--clients 8] [--seconds 10]
        [--rates 1,32] [--whole-node]

A Patroni pair with etcd from nothing (tests/ha/cluster.py, docs/ha.md's configuration) and a
lone PostgreSQL (tests/faults/cluster.py), both on loopback with `fsync: off`; Interlock
served in process on each through its store URL (the pair's names both nodes with
`target_session_attrs=read-write`), clients doing approval cycles: create a chat, send, approve;
the approved tool has a side effect (tests/ha/cycles.py). A whole node lost is bounded by
Patroni's `ttl` (its leader key must expire), so each such failover takes about `ttl` seconds;
the node is started again after each. Needs Patroni and etcd as .ci/run installs them.
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
from tests.ha.cluster import PatroniCluster, missing
from tests.ha.cycles import CycleLoad, acknowledged
from tests.ha.test_failover import _first_served, _served_again

DEADLINE = 1.0


@contextmanager
def served(url: str) -> Iterator[str]:
    """Interlock on a new schema of the store at `url`; its HTTP base URL."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SQL("CREATE SCHEMA {}").format(Identifier(schema)))
    mark = "&" if "?" in url else "?"
    settings = load_settings(store=f"{url}{mark}schema={schema}",
                             agents="tests.ha.cycles:AGENTS", store_deadline=DEADLINE)
    server = ThreadServer(build_app(settings))
    try:
        yield server.url
    finally:
        server.stop()


def rate(base: str, clients: int, seconds: float) -> float:
    """Approval cycles acknowledged a second (three requests each: create, send, approve)."""
    load = CycleLoad(base, clients=clients).start()
    time.sleep(2)  # warm: pools filled, statements prepared
    start, before = time.monotonic(), len(acknowledged(load))
    time.sleep(seconds)
    done = len(acknowledged(load)) - before
    elapsed = time.monotonic() - start
    load.stop()
    return done / elapsed


def failover(patroni: PatroniCluster, base: str, clients: int,
             whole_node: bool) -> tuple[float, float, int]:
    """One SIGKILL of the primary's postmaster (or of its whole node) under load: seconds to
    Patroni's new primary, to the first approval served again, and the 503s seen."""
    patroni.wait(lambda: patroni.sync_standby() is not None, 120, "a synchronous standby")
    RUNS.clear()
    load = CycleLoad(base, clients=clients).start()
    old = patroni.primary()
    assert old is not None
    try:
        patroni.wait(lambda: len(acknowledged(load)) >= 10, 60, "cycles before the kill")
        killed = time.monotonic()
        if whole_node:
            patroni.kill_node(old)
        else:
            patroni.kill_primary()
        promoted = patroni.wait(lambda: (new := patroni.primary()) is not None and
                                new is not old, patroni.ttl() + 60, "a new primary")
        patroni.wait(lambda: _first_served(load, promoted, "approve") is not None, 60,
                     "served again")
        served_then = len(acknowledged(load))
        patroni.wait(lambda: len(acknowledged(load)) >= served_then + 5, 60, "cycles after")
    finally:
        load.stop()
        if whole_node:
            patroni.start_node(old)
    back = _served_again(load, killed, "approve")
    assert back is not None and max(RUNS.values()) == 1 and load.failures == []
    refused = [a for a in load.answers if a.status >= 300]
    assert {(a.status, a.code) for a in refused} <= {(503, "store_unavailable")}
    return promoted - killed, back - killed, len(refused)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rates", default=None, metavar="N,N",
                        help="client counts at which to compare the synchronous pair's cycle"
                             " rate with one node's (default: --clients); each count is"
                             " measured one node, pair, one node, pair, in one run")
    parser.add_argument("--whole-node", action="store_true",
                        help="SIGKILL the primary's whole node (Patroni too), not its postmaster")
    args = parser.parse_args()
    lacking = missing()
    if lacking is not None:
        raise SystemExit(lacking)
    counts = [int(n) for n in (args.rates or str(args.clients)).split(",")]
    lone = Cluster()
    patroni = PatroniCluster()
    try:
        print(f"pair ready from nothing in {patroni.start():.1f}s")
        with served(lone.url) as single_base, served(patroni.url) as base:
            for clients in counts:
                single, paired = [], []
                for _ in range(2):  # alternated, so the machine's drift hits both alike
                    single.append(rate(single_base, clients, args.seconds))
                    paired.append(rate(base, clients, args.seconds))
                one, two = statistics.mean(single), statistics.mean(paired)
                print(f"approval cycles/s, {clients} clients: one node {one:.1f},"
                      f" synchronous pair {two:.1f} ({two / one:.2f} of one node)", flush=True)
            runs = [failover(patroni, base, args.clients, args.whole_node)
                    for _ in range(args.failovers)]
    finally:
        patroni.remove()
        lone.remove()
    if not runs:
        return
    promoted, back, refused = zip(*runs, strict=True)
    fault = f"the whole node's kill (ttl {patroni.ttl()} s)" if args.whole_node else "the kill"
    for name, values in (("Patroni's new primary", list(promoted)),
                         ("served again", list(back))):
        print(f"{name} after {fault}: p50 {statistics.median(values):.2f}s,"
              f" p95 {_p(values, 0.95):.2f}s, max {max(values):.2f}s over {len(values)}"
              f" ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"503 store_unavailable answers a failover: {', '.join(map(str, refused))};"
          " no side effect twice, nothing else refused")


if __name__ == "__main__":
    main()
