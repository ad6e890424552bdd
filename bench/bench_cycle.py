"""Banking cycles per second on memory, SQLite and PostgreSQL, in process.

One cycle = new chat, send "Transfer $500 to savings." (interrupt), resume with an
approval (respond), the agent calls transferMoney and answers. Prints cycles/s, the
commits (transactions) and events one cycle writes, and, as a baseline measured in
the same run, a stock eventsourcing Aggregate save on the same store.

    python -m bench.bench_cycle --cycles 1000 --stores memory,sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate

from bench.common import scratch_schema
from interlock.bootstrap import build_service
from interlock.domain import Interlock, RespondEntry
from interlock.examples.banking import AGENTS
from interlock.stores.urls import store_env


class Counter(Aggregate):
    def __init__(self) -> None:
        self.n = 0


class Baseline(Application[Any]):
    name = "Baseline"


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"
    else:
        with scratch_schema() as url:
            yield url


async def cycle(app: Interlock) -> None:
    chat = app.start_chat("bankingAgent", actor="alice")
    sent = await app.send(chat.id, "Transfer $500 to savings.", actor="alice")
    [interrupt] = sent.interrupts
    done = await app.resume(
        chat.id,
        actor="bob",
        respond=[RespondEntry(ref=interrupt.ref, name=interrupt.name, output={"approved": True})],
    )
    assert done.finish_reason == "stop", done


def count_commits(app: Interlock) -> dict[str, int]:
    counts = {"commits": 0, "events": 0}
    insert = app.recorder.insert_events

    def counting(stored: Any, **kw: Any) -> Any:
        counts["commits"] += 1
        counts["events"] += len(stored)
        return insert(stored, **kw)

    app.recorder.insert_events = counting  # type: ignore[method-assign]
    return counts


def bench_cycles(url: str, cycles: int) -> tuple[float, float, float]:
    app = build_service(url, AGENTS)
    asyncio.run(_run(app, max(20, cycles // 10)))  # warm up: tables, prepared statements
    counts = count_commits(app)
    started = time.perf_counter()
    asyncio.run(_run(app, cycles))
    elapsed = time.perf_counter() - started
    app.close()
    return cycles / elapsed, counts["commits"] / cycles, counts["events"] / cycles


async def _run(app: Interlock, n: int) -> None:
    for _ in range(n):
        await cycle(app)


def bench_baseline(url: str, saves: int) -> float:
    env = store_env(url)
    if "POSTGRES_DBNAME" in env:
        env["PERSISTENCE_MODULE"] = "eventsourcing.postgres"  # the library's own recorder
    app = Baseline(env)
    for _ in range(50):
        app.save(Counter())
    started = time.perf_counter()
    for _ in range(saves):
        app.save(Counter())
    elapsed = time.perf_counter() - started
    app.close()
    return saves / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    args = parser.parse_args()
    print(
        f"{'store':<9} {'cycles/s':>9} {'commits/cycle':>14} {'events/cycle':>13} "
        f"{'stock saves/s':>14} {'cycle = N saves':>16}"
    )
    for kind in args.stores.split(","):
        with store_url(kind) as url:
            rate, commits, events = bench_cycles(url, args.cycles)
        with store_url(kind) as url:
            baseline = bench_baseline(url, args.cycles * 2)
        print(
            f"{kind:<9} {rate:>9.0f} {commits:>14.2f} {events:>13.2f} {baseline:>14.0f} "
            f"{baseline / rate:>16.2f}"
        )


if __name__ == "__main__":
    main()
