"""How long a chat takes to load, by its length, on PostgreSQL and SQLite.

    .venv/bin/python -m bench.bench_load [--events 10000] [--loads 50]

A chat of N events is written in turns of 4 events (message, model reply, finish, ...);
then loads are timed (p50/p95): `cold` replays the whole log (a chat no command of this
process touched in the last 30 s), `warm` is how a command takes a chat this process
committed: from the cache, brought up to date with one indexed read. Cold loads are timed
with Python's default garbage collection (`gc 700`, the baseline) and then as `interlock
serve` tunes it (`gc 10000`, interlock/process.py).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common import scratch_schema
from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock
from interlock.domain.messages import text_message
from interlock.process import DEFAULT_GC_THRESHOLD, tune_gc


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


def timed_loads(app: Interlock, chat: Chat, loads: int, warm: bool) -> list[float]:
    times = []
    for _ in range(loads):
        if warm:
            app.chats.give(chat)
        t0 = time.perf_counter()
        chat = app._checkout(chat.id, None) if warm else app.get_chat(chat.id)
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--stores", default="postgres,sqlite")
    args = parser.parse_args()
    print(f"{'store':<10}{'events':>8} {'load':>6} {'gc':>6} {'p50':>9} {'p95':>9}   (ms)")
    default = gc.get_threshold()
    for kind in args.stores.split(","):
        with store_url(kind) as url:
            app = build_service(url)
            chat = long_chat(app, args.events)
            for warm, tuned in ((False, False), (False, True), (True, True)):
                gc.set_threshold(*default)
                if tuned:
                    tune_gc()
                times = timed_loads(app, chat, args.loads, warm)
                p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
                label = "warm" if warm else "cold"
                threshold = DEFAULT_GC_THRESHOLD if tuned else default[0]
                print(f"{kind:<10}{chat.version:>8} {label:>6} {threshold:>6} {p50:>9.2f}"
                      f" {p95:>9.2f}", flush=True)
            app.close()


if __name__ == "__main__":
    main()
