"""The banking cycle (create chat, send, resume) over HTTP vs in-process, on PostgreSQL.

    .venv/bin/python -m bench.bench_http [--cycles 200] [--clients 1,8,32] [--model-latency 100]

One `interlock serve` subprocess (dev mode, loopback) on a fresh schema; clients are
threads with keep-alive httpx connections. The in-process figure runs the same cycle on
the `Interlock` service directly, in the same run, on its own fresh schema, with the read
models running beside it as in the server; "+wait" also waits for the views after each
write (what a write-path read-your-writes would cost; the API waits on reads instead).
`--model-latency MS` puts the banking script behind a model that takes MS per call
(`bench.agents`); the model-bound ideal is then printed beside the measured rate.
`app/tx` is appends per transaction, read from the stored rows (one `xmin` per transaction).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import psycopg
from psycopg import sql

from bench.common import scratch_schema
from interlock.bootstrap import build_service, load_agents
from interlock.domain import Interlock, RespondEntry
from interlock.projections import open_read_models

TEXT = "Transfer $100 to savings."
APPROVE = {"approved": True}


@dataclass
class Figures:
    send: list[float] = field(default_factory=list)
    resume: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, send: float, resume: float) -> None:
        with self.lock:
            self.send.append(send)
            self.resume.append(resume)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def agents_spec(latency_ms: float) -> str:
    if latency_ms <= 0:
        return "interlock.examples.banking:AGENTS"
    os.environ["BENCH_MODEL_LATENCY_MS"] = str(latency_ms)
    return "bench.agents:AGENTS"


def appends_per_transaction(store: str) -> float:
    """Each append is one chat's events in one transaction; a transaction has one xmin."""
    url, schema = store.split("?schema=")
    with psycopg.connect(url) as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT count(DISTINCT (originator_id, xmin::text)), count(DISTINCT xmin::text) "
                "FROM {}.interlock_events"
            ).format(sql.Identifier(schema))
        ).fetchone()
    assert row is not None
    return float(row[0]) / max(1, row[1])


@contextmanager
def serve(store: str, agents: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.cli.main", "serve", "--port", "0", "--store", store,
         "--agents", agents],
        env={**os.environ, "INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": ""},
        stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    url = None
    for line in proc.stderr:
        if match := re.search(r"Uvicorn running on (http://\S+)", line):
            url = match[1]
            break
    threading.Thread(target=lambda: proc.stderr and proc.stderr.read(), daemon=True).start()
    try:
        assert url, "interlock serve did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


def http_cycle(http: httpx.Client, figures: Figures) -> None:
    chat = http.post("/v1/chats", json={"agent": "bankingAgent"}).json()["id"]
    t0 = time.perf_counter()
    sent = http.post(f"/v1/chats/{chat}/messages", json={"text": TEXT}).json()
    t1 = time.perf_counter()
    [interrupt] = sent["interrupts"]
    body = {"respond": [{"ref": interrupt["ref"], "name": interrupt["name"], "output": APPROVE}]}
    done = http.post(f"/v1/chats/{chat}/resume", json=body)
    t2 = time.perf_counter()
    assert done.status_code == 200 and done.json()["finish_reason"] == "stop", done.text
    figures.add(t1 - t0, t2 - t1)


def run_http(url: str, clients: int, cycles: int) -> tuple[Figures, float]:
    figures = Figures()
    sessions = [httpx.Client(base_url=url, timeout=60) for _ in range(clients)]

    def worker(http: httpx.Client, n: int) -> None:
        for _ in range(n):
            http_cycle(http, figures)

    for http in sessions:
        http_cycle(http, Figures())  # warm the connection
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, sessions, [cycles // clients] * clients))
    elapsed = time.perf_counter() - start
    for http in sessions:
        http.close()
    return figures, elapsed


async def local_cycle(
    app: Interlock, figures: Figures, settle: Callable[[int | None], None]
) -> None:
    chat = app.start_chat("bankingAgent", actor="bench")
    t0 = time.perf_counter()
    sent = await app.send(chat.id, TEXT, actor="bench")
    settle(sent.position)
    t1 = time.perf_counter()
    [i] = sent.interrupts
    done = await app.resume(chat.id, respond=[RespondEntry(ref=i.ref, name=i.name, output=APPROVE)],
                            actor="bench")
    settle(done.position)
    t2 = time.perf_counter()
    assert done.finish_reason == "stop"
    figures.add(t1 - t0, t2 - t1)


def run_local(
    store: str, agents: str, clients: int, cycles: int, wait: bool
) -> tuple[Figures, float]:
    """The views run beside the service, as in `interlock serve`; `wait` also waits for them."""
    app = build_service(store, load_agents(agents))
    models = open_read_models(app)
    settle: Callable[[int | None], None] = models.wait if wait else (lambda _: None)

    async def worker(n: int, figures: Figures) -> None:
        for _ in range(n):
            await local_cycle(app, figures, settle)

    async def main() -> tuple[Figures, float]:
        await worker(1, Figures())
        figures = Figures()
        start = time.perf_counter()
        await asyncio.gather(*(worker(cycles // clients, figures) for _ in range(clients)))
        return figures, time.perf_counter() - start

    try:
        return asyncio.run(main())
    finally:
        models.close()
        app.close()


def row(label: str, clients: int, figures: Figures, elapsed: float, per_tx: float) -> str:
    rate = len(figures.resume) / elapsed
    return (f"{label:<18}{clients:>4} {rate:>9.1f} {pct(figures.send, .5):>9.2f} "
            f"{pct(figures.send, .99):>9.2f} {pct(figures.resume, .5):>9.2f} "
            f"{pct(figures.resume, .99):>9.2f} {per_tx:>7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=256)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--model-latency", type=float, default=0.0, metavar="MS",
                        help="each model call takes MS milliseconds (default 0)")
    parser.add_argument("--modes", default="in-process,in-process+wait,http",
                        help="which of in-process, in-process+wait, http to run")
    args = parser.parse_args()
    agents = agents_spec(args.model_latency)
    modes = args.modes.split(",")
    print(f"{'mode':<18}{'cli':>4} {'cycles/s':>9} {'send p50':>9} {'send p99':>9} "
          f"{'res p50':>9} {'res p99':>9} {'app/tx':>7}   (ms)")
    for clients in [int(c) for c in args.clients.split(",")]:
        cycles = max(args.cycles, clients * 8)
        for mode in modes:
            with scratch_schema() as store:
                if mode == "http":
                    with serve(store, agents) as url:
                        figures, elapsed = run_http(url, clients, cycles)
                else:
                    wait = mode.endswith("+wait")
                    figures, elapsed = run_local(store, agents, clients, cycles, wait)
                print(row(mode, clients, figures, elapsed, appends_per_transaction(store)),
                      flush=True)
        if args.model_latency > 0:
            # a cycle makes 3 model calls in a row; `clients` cycles run at once
            ideal = clients / (3 * args.model_latency / 1000)
            print(f"{'model-bound ideal':<18}{clients:>4} {ideal:>9.1f}")


if __name__ == "__main__":
    main()
