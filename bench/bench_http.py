"""The banking cycle (a chat started with its message, then resumed) over HTTP vs in-process.

    .venv/bin/python -m bench.bench_http [--cycles 200] [--clients 1,8,32] [--model-latency 100]

One `interlock serve` subprocess (dev mode, loopback) on PostgreSQL, on a fresh schema;
clients are keep-alive HTTP/1.1 connections spoken by hand on one event loop (`Wire`), two
requests a cycle (`wire_cycle`; a server from before Dec 2026 is sent three). The in-process
cycle starts the chat, then sends its message. `--baseline DIR`
serves the "before" rows from an older checkout in the same run, with each `--workers`
count its `serve` takes (`--workers` came in 2026-11-30). The in-process figure runs the
same cycle on the `Interlock` service directly, in the same run, on its own fresh schema,
with the read models running beside it as in the server; "+wait" also waits for the views
after each write (what a write-path read-your-writes would cost; the API waits on reads
instead).
`--model-latency MS` puts the banking script behind a model that takes MS per call
(`bench.agents`); the model-bound ideal is then printed beside the measured rate.
`app/tx` is appends per transaction, read from the stored rows (one `xmin` per transaction).
Mode `http floor` sends three `GET /healthz` a cycle through the same server: the cost of
the framework and middleware alone, the part of a cycle no change to the service removes.
`all cpu` is what every core of the machine spent per cycle (PostgreSQL, the server, the
load generator), and `ceiling` the rate the machine's cores allow at that cost. `srv cs` is
the server's context switches a cycle (every thread, workers included): each is a wait or a
GIL handoff between the event loop, the I/O threads, the group commit and the views.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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


def paid_not_once(store: str) -> int:
    """Chats whose transfer did not complete exactly once (a duplicate effect, or a cycle
    that never paid): each completed call of `transferMoney` is counted by its ref."""
    url, schema = store.split("?schema=")
    events = sql.Identifier(schema, "interlock_events")
    query = sql.SQL(
        "WITH e AS (SELECT originator_id AS chat, topic, convert_from(state, 'UTF8')::jsonb AS s"
        " FROM {events} WHERE topic IN ('interlock:ChatStarted', 'interlock:ToolRequested',"
        " 'interlock:ToolCompleted')),"
        " asked AS (SELECT chat, s->>'ref' AS ref FROM e WHERE topic = 'interlock:ToolRequested'"
        " AND s->>'name' = 'transferMoney'),"
        " done AS (SELECT chat, s->>'ref' AS ref FROM e WHERE topic = 'interlock:ToolCompleted')"
        " SELECT count(*) FROM (SELECT c.chat, count(done.ref) AS n FROM e AS c"
        " LEFT JOIN asked ON asked.chat = c.chat"
        " LEFT JOIN done ON done.chat = asked.chat AND done.ref = asked.ref"
        " WHERE c.topic = 'interlock:ChatStarted' GROUP BY c.chat) AS paid WHERE n <> 1"
    ).format(events=events)
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def machine_busy() -> float:
    """CPU seconds every core of the machine spent busy (PostgreSQL, server and load
    generator alike), from /proc/stat: what a 2-core machine's ceiling is made of."""
    with open("/proc/stat") as f:
        user, nice, system, _, _, irq, softirq, steal = (int(v) for v in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def family(pid: int) -> Iterator[tuple[int, list[str]]]:
    """The process and its children (uvicorn's workers), each with its /proc stat fields
    after the name."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(entry) == pid or int(fields[1]) == pid:  # fields[1]: the parent's pid
            yield int(entry), fields


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children."""
    tick = os.sysconf("SC_CLK_TCK")
    return sum((int(f[11]) + int(f[12])) / tick for _, f in family(pid))


def switches(pid: int) -> int:
    """Context switches, voluntary and not, of every thread of a process and its children:
    each is a GIL handoff or a wait, and they grow with the server's thread traffic."""
    total = 0
    for member, _ in family(pid):
        try:
            for tid in os.listdir(f"/proc/{member}/task"):
                with open(f"/proc/{member}/task/{tid}/status") as f:
                    total += sum(int(line.split()[1]) for line in f
                                 if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")))
        except OSError:
            continue  # a thread or process that ended meanwhile
    return total


@contextmanager
def serve(
    store: str, agents: str, workers: int = 1, root: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> Iterator[tuple[str, int]]:
    """`interlock serve` on `store`; from the checkout `root` instead of this one if given."""
    port = "0" if workers == 1 else str(free_port())  # uvicorn's workers need a fixed port
    more = [] if workers == 1 else ["--workers", str(workers)]
    env = {**os.environ, "INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": "",
           **(extra_env or {})}
    if root is not None:
        env["PYTHONPATH"] = os.path.abspath(root)
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.cli.main", "serve", "--port", port, "--store", store,
         "--agents", agents, *more],
        env=env, cwd=root,
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
        if workers > 1:
            wait_ready(url)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


class Wire:
    """One keep-alive HTTP/1.1 connection spoken by hand: a load generator that costs the
    bench process little, so the server's figure is the server's (httpx costs ~2 ms a
    request in Python, which on 2 cores would take CPU from the server being measured)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.opens: bool | None = None  # the server opens a chat with its message (None: ask)

    @classmethod
    async def open(cls, url: str) -> Wire:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post(self, path: str, body: object) -> tuple[int, Any]:
        data = json.dumps(body).encode()
        self.writer.write(b"POST %s HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json"
                          b"\r\ncontent-length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
        return await self._answer()

    async def get(self, path: str) -> tuple[int, Any]:
        self.writer.write(b"GET %s HTTP/1.1\r\nhost: bench\r\n\r\n" % path.encode())
        return await self._answer()

    async def _answer(self) -> tuple[int, Any]:
        status = int((await self.reader.readline()).split(b" ", 2)[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, json.loads(await self.reader.readexactly(length))

    def close(self) -> None:
        self.writer.close()


async def wire_cycle(wire: Wire, figures: Figures) -> None:
    """The banking cycle as a client runs it: the chat opened with its message (one request),
    then the payment approved. A server older than that (Dec 2026: a baseline) refuses the
    `text` (422) on the wire's first cycle, a warm-up one, and is sent `three_requests`."""
    if wire.opens is False:
        await three_requests(wire, figures)
        return
    t0 = time.perf_counter()
    status, opened = await wire.post("/v1/chats", {"agent": "bankingAgent", "text": TEXT})
    t1 = time.perf_counter()
    if status == 422 and wire.opens is None:
        wire.opens = False
        await three_requests(wire, figures)
        return
    wire.opens = True
    assert status == 201, opened
    await _approve(wire, figures, opened["id"], opened, t1 - t0)


async def three_requests(wire: Wire, figures: Figures) -> None:
    """The cycle as three requests: the chat created, its message sent, the payment approved
    (`bench_instructions --three-requests`: as the issue's starting commit was measured)."""
    status, created = await wire.post("/v1/chats", {"agent": "bankingAgent"})
    assert status in (200, 201), created
    t0 = time.perf_counter()
    status, sent = await wire.post(f"/v1/chats/{created['id']}/messages", {"text": TEXT})
    assert status == 200, sent
    await _approve(wire, figures, created["id"], sent, time.perf_counter() - t0)


async def _approve(wire: Wire, figures: Figures, chat: str, asked: Any, send: float) -> None:
    """The cycle's last request: the payment `asked` for approved; its figures added."""
    [interrupt] = asked["interrupts"]
    body = {"respond": [{"ref": interrupt["ref"], "name": interrupt["name"], "output": APPROVE}]}
    t0 = time.perf_counter()
    status, done = await wire.post(f"/v1/chats/{chat}/resume", body)
    resumed = time.perf_counter() - t0
    assert status == 200 and done["finish_reason"] == "stop", done
    figures.add(send, resumed)


async def floor_cycle(wire: Wire, figures: Figures) -> None:
    """Three requests that do no work (`GET /healthz`) through the same server stack: what
    a cycle's three requests cost before the service does anything (the framework floor)."""
    t0 = time.perf_counter()
    for _ in range(2):
        status, _ = await wire.get("/healthz")
        assert status == 200
    t1 = time.perf_counter()
    status, _ = await wire.get("/healthz")
    assert status == 200
    figures.add(t1 - t0, time.perf_counter() - t1)


def run_wire(
    url: str, clients: int, cycles: int,
    cycle: Callable[[Wire, Figures], Awaitable[None]] = wire_cycle,
) -> tuple[Figures, float, float]:
    """The cycles over `clients` connections; figures, seconds, and this process's CPU seconds."""

    async def main() -> tuple[Figures, float, float]:
        wires = [await Wire.open(url) for _ in range(clients)]
        await asyncio.gather(*(cycle(w, Figures()) for w in wires))  # warm
        figures = Figures()

        async def worker(wire: Wire, n: int) -> None:
            for _ in range(n):
                await cycle(wire, figures)

        cpu, start = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(w, cycles // clients) for w in wires))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        for wire in wires:
            wire.close()
        return figures, elapsed, cpu

    return asyncio.run(main())


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str) -> None:
    for _ in range(200):
        try:
            if httpx.get(f"{url}/readyz").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("interlock serve did not become ready")


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


def row(label: str, clients: int, figures: Figures, elapsed: float, per_tx: float,
        server_cpu: float | None = None, client_cpu: float | None = None,
        all_cpu: float | None = None, server_switches: int | None = None,
        paid_off: int | None = None) -> str:
    n = len(figures.resume)
    cpu = "" if server_cpu is None else f" {server_cpu / n * 1000:>8.2f}"
    cpu += "" if client_cpu is None else f" {client_cpu / n * 1000:>8.2f}"
    if all_cpu is not None:  # and the rate this machine's cores would allow at that cost
        cpu += f" {all_cpu / n * 1000:>8.2f} {(os.cpu_count() or 1) / (all_cpu / n):>8.1f}"
    if server_switches is not None:
        cpu += f" {server_switches / n:>7.0f}"
    if paid_off is not None:
        cpu += f" {paid_off:>7d}"
    return (f"{label:<18}{clients:>4} {n / elapsed:>9.1f} {pct(figures.send, .5):>9.2f} "
            f"{pct(figures.send, .99):>9.2f} {pct(figures.resume, .5):>9.2f} "
            f"{pct(figures.resume, .99):>9.2f} {per_tx:>7.2f}{cpu}")


def _has_workers(root: str) -> bool:
    """Whether the checkout `root`'s `interlock serve` takes `--workers` (from 2026-11-30)."""
    try:
        with open(os.path.join(root, "interlock", "cli", "serve.py")) as source:
            return '"--workers"' in source.read()
    except FileNotFoundError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=256)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--model-latency", type=float, default=0.0, metavar="MS",
                        help="each model call takes MS milliseconds (default 0)")
    parser.add_argument("--modes", default="in-process,in-process+wait,http",
                        help="which of in-process, in-process+wait, http, http gc700, http floor"
                        " to run (gc700: the server with Python's default garbage collection;"
                        " floor: three GET /healthz a cycle, the framework's own cost)")
    parser.add_argument("--workers", default="1",
                        help="server processes for the http mode, a comma list (default 1)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also serve from this older checkout (the 'before' rows), e.g. "
                        "`git worktree add --detach ../base cdd90c6`")
    args = parser.parse_args()
    agents = agents_spec(args.model_latency)
    modes = args.modes.split(",")
    if args.baseline and "http" in modes:
        modes.insert(modes.index("http"), "http before")
    print(f"{'mode':<18}{'cli':>4} {'cycles/s':>9} {'send p50':>9} {'send p99':>9} "
          f"{'res p50':>9} {'res p99':>9} {'app/tx':>7} {'srv cpu':>8} {'gen cpu':>8}"
          f" {'all cpu':>8} {'ceiling':>8} {'srv cs':>7} {'paid≠1':>7}"
          "   (ms; ceiling: cycles/s at all cpu; srv cs: server context switches a cycle;"
          " paid≠1: chats whose transfer did not complete exactly once)")
    for clients in [int(c) for c in args.clients.split(",")]:
        cycles = max(args.cycles, clients * 8)
        for mode in modes:
            http = mode.startswith("http")
            for workers in [int(w) for w in args.workers.split(",")] if http else [1]:
                label = mode if workers == 1 else f"{mode} x{workers}"
                if mode == "http before" and workers > 1 and not _has_workers(args.baseline):
                    print(f"{label:<18}{clients:>4}   (the baseline's serve has no --workers)")
                    continue
                root = args.baseline if mode == "http before" else None
                with scratch_schema() as store:
                    if http:
                        env = {"INTERLOCK_GC_THRESHOLD": "0"} if mode.endswith("gc700") else {}
                        with serve(store, agents, workers, root, env) as (url, pid):
                            cycle = floor_cycle if mode.endswith("floor") else wire_cycle
                            run_wire(url, clients, clients * 2, cycle)  # warm every worker
                            before, busy = cpu_seconds(pid), machine_busy()
                            switched = switches(pid)
                            figures, elapsed, gen_cpu = run_wire(url, clients, cycles, cycle)
                            server_cpu = cpu_seconds(pid) - before
                            switched = switches(pid) - switched
                            busy = machine_busy() - busy
                        paid = None if cycle is floor_cycle else paid_not_once(store)
                        print(row(label, clients, figures, elapsed,
                                  appends_per_transaction(store), server_cpu, gen_cpu, busy,
                                  switched, paid),
                              flush=True)
                    else:
                        wait = mode.endswith("+wait")
                        cpu = time.process_time()
                        figures, elapsed = run_local(store, agents, clients, cycles, wait)
                        cpu = time.process_time() - cpu
                        print(row(label, clients, figures, elapsed,
                                  appends_per_transaction(store), cpu), flush=True)
        if args.model_latency > 0:
            # a cycle makes 3 model calls in a row; `clients` cycles run at once
            ideal = clients / (3 * args.model_latency / 1000)
            print(f"{'model-bound ideal':<18}{clients:>4} {ideal:>9.1f}")


if __name__ == "__main__":
    main()
