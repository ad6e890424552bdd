"""How long a chat takes to load, by its length, on PostgreSQL and SQLite.

    .venv/bin/python -m bench.bench_load [--events 10000] [--loads 50]

A chat of N events is written in turns of 3 events (message, model reply, finish), or
with `--shape tools` in turns of 6 (message, a reply asking for a transfer, its request
and completion, the reply, finish: a chat of N events then has N/6 tool calls), its text
drawn from a vocabulary (`prose`), with personal data encrypted as `interlock serve`
stores it. Then loads are timed (p50/p95): `log` replays the whole log (the baseline: no
snapshot); `cold` is a chat no command of this process touched in the last 30 s (its
sealed snapshot, then the events after it: `replayed` of them); `warm` is how a command
takes a chat this process committed: from the cache, brought up to date with one indexed
read. Each chat length is also run just short of its next snapshot (the most events a
load replays). Cold loads are timed with Python's default garbage collection (`gc 700`)
and as `interlock serve` tunes it (`gc 10000`, interlock/process.py).
"""

from __future__ import annotations

import argparse
import gc
import random
import string
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.common import scratch_schema
from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock
from interlock.domain.chat.messages import Message, Part, ToolRequest, text_message
from interlock.domain.storage.snapshots import EVERY
from interlock.process import DEFAULT_GC_THRESHOLD, tune_gc
from interlock.stores.erasure_keys import KeyStore


@contextmanager
def store_url(kind: str) -> Iterator[str]:
    if kind == "postgres":
        with scratch_schema() as url:
            yield url
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/load.db"


_RANDOM = random.Random(13)
_WORDS = ["".join(_RANDOM.choices(string.ascii_lowercase, k=_RANDOM.randint(2, 9)))
          for _ in range(5000)]


def prose(words: int) -> str:
    """Text that repeats as a chat's does (a vocabulary), not as one sentence over again
    would: a snapshot compresses it about 4 times, not 40."""
    return " ".join(_RANDOM.choices(_WORDS, k=words))


def long_chat(app: Interlock, events: int, chat: Chat | None = None,
              shape: str = "text") -> Chat:
    chat = chat or Chat.start("bench", actor="bench", tenant="default")
    while chat.version < events:
        chat.send_message(prose(20), actor="bench")
        if shape == "tools":
            ask = ToolRequest(name="transfer", input={
                "to": prose(2), "amount": _RANDOM.randrange(10**6)})
            chat.record_model_reply(Message(role="model", content=[Part(tool_request=ask)]))
            ref = chat.state.batch[-1]
            chat.record_completed(ref, {"ok": True, "id": _RANDOM.randrange(10**12),
                                        "note": prose(8)})
        chat.record_model_reply(text_message("model", prose(30)), None)
        chat.finish_turn("stop")
        app.commit(chat)
    return chat


def timed_loads(app: Interlock, chat: Chat, loads: int, how: str) -> list[float]:
    times = []
    store = app.snapshot_store
    for _ in range(loads):
        if how == "warm":
            app.chats.give(chat)
        if how == "log":
            app.snapshot_store = None
        t0 = time.perf_counter()
        chat = app.store.checkout(chat.id, None) if how == "warm" else app.get_chat(chat.id)
        times.append((time.perf_counter() - t0) * 1000)
        app.snapshot_store = store
    return sorted(times)


def replayed(app: Interlock, chat: Chat) -> int:
    kept = app.snapshot_store.get(chat.id) if app.snapshot_store is not None else None
    return chat.version - (kept.version if kept is not None else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=50)
    parser.add_argument("--log-loads", type=int, default=5, help="whole-log loads (slow)")
    parser.add_argument("--stores", default="postgres,sqlite")
    parser.add_argument("--shape", default="text,tools",
                        help="text: turns without tools; tools: a tool call every turn")
    args = parser.parse_args()
    print(f"{'store':<10}{'shape':<6}{'events':>8} {'calls':>6} {'replayed':>9} {'load':>5}"
          f" {'gc':>6} {'p50':>9} {'p95':>9}   (ms)")
    default = gc.get_threshold()
    cases = [(kind, shape, most) for kind in args.stores.split(",")
             for shape in args.shape.split(",")
             for most in (False, True)]  # then just short of the next snapshot: most replayed
    for kind, shape, most in cases:
        with store_url(kind) as url:
            app = build_service(url)
            app.protect_personal_data(KeyStore.open(app))  # as `interlock serve` runs it
            chat = long_chat(app, args.events, shape=shape)
            while most and replayed(app, chat) < EVERY - 6:
                chat = long_chat(app, chat.version + 1, chat, shape)
            runs = [("log", True, args.log_loads), ("cold", False, args.loads),
                    ("cold", True, args.loads), ("warm", True, args.loads)]
            for how, tuned, loads in runs:
                gc.set_threshold(*default)
                if tuned:
                    tune_gc()
                times = timed_loads(app, chat, loads, how)
                p50, p95 = times[len(times) // 2], times[int(len(times) * 0.95)]
                threshold = DEFAULT_GC_THRESHOLD if tuned else default[0]
                print(f"{kind:<10}{shape:<6}{chat.version:>8} {len(chat.state.calls):>6}"
                      f" {replayed(app, chat):>9} {how:>5} {threshold:>6} {p50:>9.2f}"
                      f" {p95:>9.2f}", flush=True)
            app.close()


if __name__ == "__main__":
    main()
