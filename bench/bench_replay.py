"""replay-test throughput on recorded banking chats on PostgreSQL, against running them.

Records N chats (the five conversations of tests/replay/corpus.py in turn: small, large with
an override, declined, treasury held for two votes, treasury small) in process on a fresh
PostgreSQL schema: that is the cycle rate. Then replay-tests them all with the unchanged
agents (each must be identical) and prints chats/s, the ratio to the cycle rate (target >= 1:
replaying costs no more than running) and the resident memory over the replay (flat: the
scratch service is dropped every 200 chats and the store is read a page at a time).

    python -m bench.bench_replay --chats 10000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.common import scratch_schema
from interlock.examples.banking import AGENTS
from interlock.replay import ReplayOptions, replay_test
from tests.replay.corpus import record, served

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def run(chats: int) -> dict[str, float]:
    with scratch_schema() as store:
        app = served(store)
        started = time.perf_counter()
        asyncio.run(record(app, chats))
        cycle_rate = chats / (time.perf_counter() - started)
        app.close()
        samples: list[float] = []

        def sample(done: int) -> None:
            if done % max(chats // 20, 1) == 0:
                samples.append(rss_mb())

        started = time.perf_counter()
        report = replay_test(store, ReplayOptions(agents=AGENTS), progress=sample)
        replay_rate = chats / (time.perf_counter() - started)
    assert report.identical == chats, report.summary()
    warm = samples[len(samples) // 4] if samples else rss_mb()
    return {"cycles/s": cycle_rate, "replayed/s": replay_rate,
            "ratio": replay_rate / cycle_rate, "rss at 25% MB": warm,
            "rss at end MB": samples[-1] if samples else rss_mb(),
            "rss max MB": max(samples, default=rss_mb())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=10_000, help="recorded chats (10000)")
    args = parser.parse_args()
    figures = run(args.chats)
    print(f"{args.chats} chats on PostgreSQL: recorded {figures['cycles/s']:.1f} chats/s in "
          f"process, replay-tested {figures['replayed/s']:.1f} chats/s, ratio "
          f"{figures['ratio']:.2f}; resident memory {figures['rss at 25% MB']:.0f} MB at 25 %, "
          f"{figures['rss at end MB']:.0f} MB at the end (max {figures['rss max MB']:.0f} MB)")


if __name__ == "__main__":
    main()
