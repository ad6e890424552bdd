"""What the stack costs a served cycle before Interlock does anything: instruction floors.

    .venv/bin/python -m bench.bench_floor [--cycles 60]

Counted by callgrind like `bench_instructions`, so the figures compare with its own:

- `http`: the cycle's three requests answered by FastAPI under uvicorn (httptools) with
  Interlock's request and response models and canned answers (bench/floor_app.py): no
  store, auth, views, access log or middleware of ours.
- `store`: eventsourcing's own PostgreSQL recorder (no Interlock code) storing the 12
  events a banking cycle records, as Interlock stores them, in the cycle's 4 transactions,
  and reading the chat back twice (the cycle's two loads), rows only, nothing decoded;
  then the same with the recorder Interlock serves with (one call per group commit).
- `served`: the real served cycle (`interlock serve`, as `bench_instructions` counts it).

Every process is tuned as `interlock serve` tunes itself (`interlock.process.tune_gc`).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from bench.bench_http import APPROVE, TEXT
from bench.bench_instructions import count
from bench.common import scratch_schema
from interlock.process import tune_gc

# Events per transaction: create; send; resume's write-ahead (the decision and the reply that
# requests the side-effecting tool, with its ToolRequested); the rest of its turn.
CHAT_SAVES = (1, 5, 3, 3)


def http_floor(cycles: int) -> float:
    return count(".", cycles, ["-m", "bench.floor_app", "--port", "0"])


def store_floor(cycles: int, recorder: str = "library") -> float:
    """Millions of instructions per cycle of the library's recorder alone (in a process of
    its own under callgrind, counting switched on around the counted cycles)."""
    out = os.path.join(tempfile.mkdtemp(), "callgrind.out")
    with scratch_schema() as store:
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={out}", sys.executable, "-m", "bench.bench_floor",
             "--store-worker", store, "--cycles", str(cycles), "--recorder", recorder],
            check=True, capture_output=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    total = sum(int(line.split()[1]) for path in glob.glob(out + "*")
                for line in Path(path).read_text().splitlines() if line.startswith("summary:"))
    return total / cycles / 1e6


def _cycle_states() -> list[tuple[str, bytes]]:
    """The topics and stored bytes of one real banking cycle's 12 events."""
    from interlock.bootstrap import build_service
    from interlock.domain import RespondEntry
    from interlock.examples.banking import AGENTS

    service = build_service("memory://", AGENTS)

    async def cycle() -> uuid.UUID:
        chat = service.start_chat("bankingAgent", actor="bench")
        sent = await service.send(chat.id, TEXT, actor="bench")
        [i] = sent.interrupts
        await service.resume(chat.id, respond=[RespondEntry(ref=i.ref, name=i.name,
                                                            output=APPROVE)], actor="bench")
        return chat.id

    chat_id = asyncio.run(cycle())
    stored = [service.mapper.to_stored_event(e) for e in service.events.get(chat_id)]
    return [(s.topic, s.state) for s in stored]


def store_worker(store: str, cycles: int, which: str) -> None:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

    states = _cycle_states()
    assert len(states) == sum(CHAT_SAVES), "the banking cycle records 12 events"
    url = urlparse(store)
    datastore = PostgresDatastore(
        dbname=url.path.lstrip("/"), host=url.hostname or "127.0.0.1", port=url.port or 5432,
        user=url.username or "postgres", password="", schema=parse_qs(url.query)["schema"][0])
    recorder = PostgresApplicationRecorder(datastore, events_table_name="floor_events")
    if which == "interlock":  # the recorder Interlock serves with (group commit, one call)
        from interlock.bootstrap import build_service

        datastore.close()
        service = build_service(store)
        recorder = service.recorder  # type: ignore[assignment]
        datastore = recorder.datastore
    else:
        recorder.create_table()

    def one() -> None:
        chat, version = uuid.uuid4(), 0
        for n, size in enumerate(CHAT_SAVES):
            if n in (1, 2):  # send and resume load the chat first
                recorder.select_events(chat)
            batch = states[version:version + size]
            recorder.insert_events([StoredEvent(chat, version + k + 1, topic, state)
                                    for k, (topic, state) in enumerate(batch)])
            version += size

    tune_gc()  # as `interlock serve` does once loaded
    for _ in range(10):
        one()
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
    for _ in range(cycles):
        one()
    subprocess.run(["callgrind_control", "--dump", pid], check=True, capture_output=True)
    datastore.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=60)
    parser.add_argument("--store-worker", metavar="STORE", help=argparse.SUPPRESS)
    parser.add_argument("--recorder", default="library", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.store_worker:
        store_worker(args.store_worker, args.cycles, args.recorder)
        return
    http, library = http_floor(args.cycles), store_floor(args.cycles)
    ours, served = store_floor(args.cycles, "interlock"), count(".", args.cycles)
    rows = [("http floor", http, "FastAPI + uvicorn answering with our models"),
            ("store floor", library, "eventsourcing's PostgreSQL recorder"),
            ("our recorder", ours, f"{ours / library:.2f} of the library's"),
            ("served", served, f"http floor + our recorder are {(http + ours) / served:.2f}"
                               " of it")]
    for name, figure, note in rows:
        print(f"{name:<13} {figure:7.2f} M instructions a cycle ({note})")


if __name__ == "__main__":
    main()
