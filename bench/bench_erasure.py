"""The cost of erasable personal data: banking cycles/s with and without the key store.

Runs bench_cycle's cycle on a service with personal data stored in plaintext, and on
one that encrypts it under per-chat keys (as `interlock serve` does), in alternating
rounds in one process so that the machine's noise falls on both alike.

    python -m bench.bench_erasure --cycles 300 --rounds 3 --stores sqlite,postgres
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.bench_cycle import _run, store_url
from interlock.bootstrap import build_service
from interlock.domain import Interlock
from interlock.examples.banking import AGENTS
from interlock.stores.erasure_keys import KeyStore


def service(url: str, protected: bool) -> Interlock:
    app = build_service(url, AGENTS)
    if protected:
        app.protect_personal_data(KeyStore.open(app))
    return app


def rate(app: Interlock, cycles: int) -> float:
    started = time.perf_counter()
    asyncio.run(_run(app, cycles))
    return cycles / (time.perf_counter() - started)


def bench(kind: str, cycles: int, rounds: int) -> None:
    with store_url(kind) as url:
        apps = {False: service(url, False), True: service(url, True)}
        for app in apps.values():
            asyncio.run(_run(app, max(20, cycles // 10)))  # warm up: tables, statements
        rates: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(rounds):
            for protected, app in apps.items():
                rates[protected].append(rate(app, cycles))
        for app in apps.values():
            app.close()
    plain, secret = (sorted(rates[p])[len(rates[p]) // 2] for p in (False, True))
    print(f"{kind:<9} {plain:>10.0f} {secret:>10.0f} {secret / plain:>8.2f}  "
          f"(rounds: {[round(r) for r in rates[False]]} vs {[round(r) for r in rates[True]]})",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stores", default="memory,sqlite,postgres")
    args = parser.parse_args()
    print(f"{'store':<9} {'plain c/s':>10} {'erasable':>10} {'ratio':>8}  (median of rounds)")
    for kind in args.stores.split(","):
        bench(kind, args.cycles, args.rounds)


if __name__ == "__main__":
    main()
