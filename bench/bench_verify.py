"""`verify --all` speed: events checked per second over a sealed log on PostgreSQL and SQLite.

    .venv/bin/python bench/bench_verify.py [--events 100000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_projections import make_log, scratch_schema

from interlock.domain import Interlock
from interlock.domain.integrity import Verifier


def bench(store: str, events: int) -> None:
    app = Interlock(store=store)
    head = make_log(app, events)
    verifier = Verifier(app.recorder, app.mapper, app.sealer.keys)
    started = time.perf_counter()
    broken = verifier.verify_all()
    took = time.perf_counter() - started
    kind = store.split(":", 1)[0]
    print(f"verify --all {kind:<10} {verifier.checked} events ({head} in log) in {took:5.2f}s = "
          f"{verifier.checked / took:8.0f} events/s, {len(broken)} broken", flush=True)
    app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    with scratch_schema() as store:
        bench(store, args.events)
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{tmp}/verify.db", args.events)


if __name__ == "__main__":
    main()
