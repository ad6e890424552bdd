"""`verify --all` speed: events checked per second over a sealed log on PostgreSQL and SQLite,
alone and against a signed checkpoint (and the cost of taking that checkpoint).

    .venv/bin/python bench/bench_verify.py [--events 100000] [--rounds 3]

`verify --all` reads the log with interlock/audit/reading.py; the recorder API reader
(the library's select_notifications) runs beside it as the baseline.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_projections import make_log, scratch_schema

from interlock.audit import reading
from interlock.audit.checkpoint_log import CheckpointLog, against_checkpoint, take_checkpoint
from interlock.audit.checkpoints import check_sequence
from interlock.audit.integrity import Verifier
from interlock.audit.signing import Signer, public_key
from interlock.bootstrap import build_service


def _rate(label: str, kind: str, checked: int, took: float, broken: int) -> None:
    print(f"{label:<26} {kind:<10} {checked} events in {took:5.2f}s = "
          f"{checked / took:8.0f} events/s, {broken} broken", flush=True)


def bench(store: str, events: int, rounds: int) -> None:
    app = build_service(store)
    make_log(app, events)
    kind = store.split(":", 1)[0]
    rates: dict[str, list[float]] = {"recorder API": [], "fast reader": []}
    for _ in range(rounds):  # alternating, so that the machine's noise falls on both
        for label, verifier in (("recorder API", Verifier(app.recorder, app.mapper,
                                                          app.sealer.keys)),
                                ("fast reader", reading.verifier(app, app.sealer.keys))):
            started = time.perf_counter()
            broken = verifier.verify_all()
            took = time.perf_counter() - started
            _rate(f"verify --all, {label}", kind, verifier.checked, took, len(broken))
            rates[label].append(verifier.checked / took)
    slow, fast = (sorted(r)[len(r) // 2] for r in rates.values())
    print(f"{'fast / recorder API':<26} {kind:<10} {fast / slow:.2f} (medians)", flush=True)

    signer, log = Signer.generate(), CheckpointLog(app.factory.aggregate_recorder("checkpoints"))
    started = time.perf_counter()
    cp = take_checkpoint(log, reading.verifier(app, app.sealer.keys),
                         key_id=signer.key_id, sign=signer.sign,
                         now=lambda: datetime.now(UTC).isoformat())
    print(f"{'first checkpoint':<26} {kind:<10} {cp.statement['chats']} chats in "
          f"{time.perf_counter() - started:5.2f}s", flush=True)

    kid, check = public_key(signer.public.hex())
    started = time.perf_counter()
    checkpoints = log.all()
    assert check_sequence(checkpoints, kid, check) is None
    verifier = reading.verifier(app, app.sealer.keys)
    broken = verifier.verify_all({h.chat_id: h.version for h in checkpoints[-1].heads})
    broken += against_checkpoint(checkpoints[-1], verifier)
    _rate("verify --all + checkpoint", kind, verifier.checked, time.perf_counter() - started,
          len(broken))
    app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with scratch_schema() as store:
        bench(store, args.events, args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        bench(f"sqlite:///{tmp}/verify.db", args.events, args.rounds)


if __name__ == "__main__":
    main()
