"""Instructions the server executes per banking cycle, counted by callgrind: a figure that
repeats on a machine whose timings vary by a fifth from one run to the next.

    .venv/bin/python -m bench.bench_instructions [--cycles 60] [--baseline DIR] [--keep DIR]

`interlock serve` (PostgreSQL, views on, personal data encrypted: as served) runs under
`valgrind --tool=callgrind` with instrumentation off; after a warm-up the counting is
switched on for `--cycles` cycles from one client, then dumped. About 50 times slower
than native: one figure takes a minute. `--baseline` counts an older checkout in the same
run (`git worktree add --detach ../base REV`). Needs valgrind (Debian's package). The
figure is split between the main thread (the event loop) and the others (the views first):
work done on a timer (the sweeper, a views pass's gathering) is counted per cycle of a
server slowed fifty times, so the other threads' share swings more between runs. It prints
the views' passes a cycle (from `/metrics`, scraped outside the counting): a pass gathers
the commits of 0.1 s, so under callgrind it covers fewer cycles than it does natively, and
each pass has a cost of its own besides its events' (bench/HISTORY.md has the figures).

    .venv/bin/python -m bench.bench_instructions --pass-cost [--cycles 100] [--baseline DIR]

counts that cost apart: the service in process (no HTTP), its views applied by hand, runs
`--cycles` banking cycles three times under callgrind, with none, with a pass after every
tenth cycle and with a pass after every cycle, each pass told the head as a served one is
(by the commits, where the tree takes it). The difference between the last two is
the passes' own cost (their events are the same); what the second costs more than the first,
less its passes' own cost, is what applying a cycle's events costs the views. Whole runs are
counted (start-up and the cycles themselves cancel out), so the figures carry a few hundred
thousand instructions of noise.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import httpx

from bench.bench_http import Figures, Wire, run_wire, three_requests, wire_cycle
from bench.common import scratch_schema

AGENTS = "interlock.examples.banking:AGENTS"
Cycle = Callable[[Wire, Figures], Awaitable[None]]


def count(root: str, cycles: int, server: Sequence[str] | None = None,
          cycle: Cycle = wire_cycle) -> float:
    """Millions of instructions per cycle of the server served from checkout `root`
    (`interlock serve`, or the `server` command given, whose `{store}` is a scratch store)."""
    return count_threads(root, cycles, server, cycle).total


class Count(NamedTuple):
    """Millions of instructions a cycle: the main thread's (the event loop: HTTP, the turn
    loop, sealing; a lone command's store calls run there too) and every other thread's (the
    views, the sweeper, the I/O threads when commands overlap); and the views' passes a
    cycle while counting (None: the server has no `interlock_views_passes_total`)."""

    main: float
    other: float
    passes: float | None

    @property
    def total(self) -> float:
        return self.main + self.other


def count_threads(root: str, cycles: int, server: Sequence[str] | None = None,
                  cycle: Cycle = wire_cycle, keep: str | None = None) -> Count:
    """`count`, split by thread, with the views' passes a cycle; callgrind's files are kept
    in the folder `keep` (for `callgrind_annotate`), else removed."""
    if keep is not None:
        os.makedirs(keep, exist_ok=True)
        for old in glob.glob(os.path.join(keep, "callgrind.out*")):  # not summed again
            os.remove(old)
    with contextlib.nullcontext(keep) if keep else tempfile.TemporaryDirectory() as folder:
        return _count_threads(root, cycles, server, cycle, os.path.join(folder, "callgrind.out"))


def _count_threads(root: str, cycles: int, server: Sequence[str] | None, cycle: Cycle,
                   out: str) -> Count:
    env = {**os.environ, "INTERLOCK_API_KEYS": "", "INTERLOCK_API_KEYS_FILE": "",
           "PYTHONPATH": os.path.abspath(root)}
    with scratch_schema() as store:
        command = server or ["-m", "interlock.cli.main", "serve", "--port", "0",
                             "--store", "{store}", "--agents", AGENTS]
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
             f"--callgrind-out-file={out}", sys.executable,
             *(arg.replace("{store}", store) for arg in command)],
            env=env, cwd=root, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        url = next((m[1] for line in proc.stderr
                    if (m := re.search(r"Uvicorn running on (http://\S+)", line))), None)
        threading.Thread(target=lambda: proc.stderr and proc.stderr.read(), daemon=True).start()
        try:
            assert url, "interlock serve did not start under valgrind"
            run_wire(url, 1, 10, cycle)
            time.sleep(5)  # the views apply the warm-up before counting starts
            passes = _passes(url)  # scraped outside the counting
            _control("--instr=on", proc.pid)
            figures, _, _ = run_wire(url, 1, cycles, cycle)
            time.sleep(1)  # and the counted cycles before it stops
            _control("--dump", proc.pid)
            after = _passes(url)
        finally:
            proc.terminate()
            proc.wait(120)
    main = other = 0
    for path in glob.glob(out + ".1-*"):  # the dump's parts only: not the shutdown after it
        total = sum(int(line.split()[1]) for line in Path(path).read_text().splitlines()
                    if line.startswith("summary:"))
        if path.endswith("-01"):  # callgrind numbers the threads as they start: main first
            main += total
        else:
            other += total
    n = len(figures.resume)
    return Count(main / n / 1e6, other / n / 1e6,
                 None if passes is None or after is None else (after - passes) / n)


def _passes(url: str) -> float | None:
    """The server's `interlock_views_passes_total` (None: an older server without it)."""
    found = re.search(r"^interlock_views_passes_total (\S+)$",
                      httpx.get(f"{url}/metrics", timeout=60).text, re.MULTILINE)
    return None if found is None else float(found[1])


def _control(action: str, pid: int) -> None:
    subprocess.run(["callgrind_control", action, str(pid)], check=True, capture_output=True)


# The pass-cost run's process: the tree's own service and views, nothing of this checkout's.
_PASSES = """
import asyncio, inspect, sys
from interlock.bootstrap import build_service, load_agents
from interlock.domain import RespondEntry
from interlock.projections import open_read_models
cycles, every = int(sys.argv[1]), int(sys.argv[2])
app = build_service(sys.argv[3], load_agents(sys.argv[4]))
models = open_read_models(app, run=False)
listeners = getattr(app, "commit_listeners", None)  # served: a pass takes the commits
if listeners is not None and hasattr(models, "committed"):  # it saw, decoded, as they were
    listeners.append(models.committed)
told = []  # and is told the head, as an append's notification tells the leader

def catch_up():
    if told and "head" in inspect.signature(models.catch_up).parameters:
        return models.catch_up(head=told[-1])
    return models.catch_up()

if listeners is not None:
    listeners.append(lambda recordings: told.extend(r.notification.id for r in recordings))

async def cycle():
    chat = app.start_chat("bankingAgent", actor="bench")
    sent = await app.send(chat.id, "Transfer $100 to savings.", actor="bench")
    [i] = sent.interrupts
    done = await app.resume(chat.id, respond=[RespondEntry(
        ref=i.ref, name=i.name, output={"approved": True})], actor="bench")
    assert done.finish_reason == "stop"

async def main():
    for _ in range(20):
        await cycle()
    catch_up()
    for n in range(1, cycles + 1):
        await cycle()
        if every and n % every == 0:
            catch_up()

asyncio.run(main())
models.close()
app.close()
"""


class PassCost(NamedTuple):
    """Millions of instructions: one views pass on its own, and applying one cycle's events
    (passes apart)."""

    per_pass: float
    per_cycle: float


def pass_cost(root: str, cycles: int) -> PassCost:
    """`PassCost` of the checkout `root`, from three whole runs under callgrind (in parallel:
    callgrind counts instructions, not time)."""
    every = {0: 0, 10: cycles // 10, 1: cycles}  # a pass every n cycles: passes
    env = {**os.environ, "PYTHONPATH": os.path.abspath(root)}
    with tempfile.TemporaryDirectory() as folder, scratch_schema() as a, scratch_schema() as b, \
            scratch_schema() as c:
        procs = {}
        try:
            for n, store in zip(every, (a, b, c), strict=True):
                with open(f"{folder}/{n}.err", "w") as err:  # the child keeps its own copy
                    procs[n] = subprocess.Popen(
                        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/{n}.out",
                         sys.executable, "-c", _PASSES, str(cycles), str(n), store, AGENTS],
                        env=env, cwd=root, stdout=subprocess.DEVNULL, stderr=err)
            for n, proc in procs.items():
                if proc.wait() != 0:
                    raise SystemExit(f"the pass-cost run (a pass every {n or 'no'} cycles) failed:"
                                     f"\n{Path(f'{folder}/{n}.err').read_text()[-2000:]}")
        finally:
            for proc in procs.values():  # a failed run ends the others
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        total = {n: sum(int(line.split()[1]) for line in Path(f"{folder}/{n}.out").read_text()
                        .splitlines() if line.startswith("summary:")) for n in every}
    per_pass = (total[1] - total[10]) / (every[1] - every[10])
    per_cycle = (total[10] - total[0] - every[10] * per_pass) / cycles
    return PassCost(per_pass / 1e6, per_cycle / 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--cycles", type=int, default=None,
                        help="cycles counted (default 60; 100 with --pass-cost)")
    parser.add_argument("--baseline", metavar="DIR", help="an older checkout, counted too")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep callgrind's files in DIR, one a thread (callgrind_annotate"
                             " DIR/callgrind.out.1-01 is the event loop's counted part)")
    parser.add_argument("--three-requests", action="store_true",
                        help="count the cycle as three requests (create, send, resume), as it"
                             " was before a chat could be started with its message")
    parser.add_argument("--pass-cost", action="store_true",
                        help="count a views pass's own cost apart from a cycle's (in process)")
    args = parser.parse_args()
    if args.cycles is not None and args.cycles < (20 if args.pass_cost else 1):
        parser.error(f"--cycles must be at least {20 if args.pass_cost else 1}"
                     f"{' with --pass-cost (a pass every tenth cycle)' if args.pass_cost else ''}")
    if args.pass_cost and args.keep:
        parser.error("--keep keeps the served count's files; --pass-cost counts in a"
                     " temporary folder it removes")
    if args.pass_cost:
        _print_pass_cost(args.cycles or 100, args.baseline)
        return
    args.cycles = args.cycles or 60
    cycle = three_requests if args.three_requests else wire_cycle
    here = count_threads(".", args.cycles, cycle=cycle, keep=args.keep)
    print(f"{'this checkout':<16} {here.total:8.2f} M instructions a cycle (1 client, as served)"
          f"; event loop {here.main:.2f}, other threads {here.other:.2f}{_per_pass(here)}")
    if args.baseline:
        before = count_threads(args.baseline, args.cycles, cycle=cycle,
                               keep=args.keep and os.path.join(args.keep, "baseline"))
        print(f"{'baseline':<16} {before.total:8.2f} M instructions a cycle; event loop "
              f"{before.main:.2f}, other threads {before.other:.2f}{_per_pass(before)}; this "
              f"checkout is {here.total / before.total:.3f} of it")


def _print_pass_cost(cycles: int, baseline: str | None) -> None:
    here = pass_cost(".", cycles)
    print(f"{'this checkout':<16} a views pass {here.per_pass:.2f} M instructions of its own; "
          f"a cycle's events {here.per_cycle:.2f} M (in process, {cycles} cycles)")
    if baseline:
        before = pass_cost(baseline, cycles)
        print(f"{'baseline':<16} a views pass {before.per_pass:.2f} M instructions of its own; "
              f"a cycle's events {before.per_cycle:.2f} M; this checkout's pass is "
              f"{here.per_pass / before.per_pass:.3f} of it")


def _per_pass(count: Count) -> str:
    return "" if count.passes is None else f"; {count.passes:.2f} views passes a cycle"

if __name__ == "__main__":
    main()
