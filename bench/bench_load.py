"""How long a chat takes to load, by its length, on PostgreSQL and SQLite.

    .venv/bin/python -m bench.bench_load [--events 10000] [--loads 50]

A chat of N events is written in turns of 4 events (message, model reply, finish, ...);
then `get_chat` is timed (p50/p95), the way each command loads its chat.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common import scratch_schema
from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock
from interlock.domain.messages import text_message


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "postgres":
        with scratch_schema() as url:
            yield url
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/load.db"


def long_chat(app: Interlock, events: int) -> Chat:
    chat = Chat.start("bench", actor="bench", tenant="default")
    while chat.version < events:
        chat.send_message("How much is in savings?", actor="bench")
        chat.record_model_reply(text_message("model", "There is $1,000 in savings."), None)
        chat.finish_turn("stop")
        app.commit(chat)
    return chat


def timed_loads(app: Interlock, chat: Chat, loads: int) -> list[float]:
    times = []
    for _ in range(loads):
        t0 = time.perf_counter()
        app.get_chat(chat.id)
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--stores", default="postgres,sqlite")
    args = parser.parse_args()
    print(f"{'store':<10}{'events':>8} {'load p50':>9} {'load p95':>9}   (ms)")
    for kind in args.stores.split(","):
        with store_url(kind) as url:
            app = build_service(url)
            chat = long_chat(app, args.events)
            times = timed_loads(app, chat, args.loads)
            p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
            print(f"{kind:<10}{chat.version:>8} {p50:>9.2f} {p95:>9.2f}")
            app.close()


if __name__ == "__main__":
    main()
