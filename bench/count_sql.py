"""SQL statements the server runs per banking cycle, by statement (executemany rows count one
each): `python bench/count_sql.py` from the checkout, PYTHONPATH set to it; CYCLES=50.

Counted where they are sent: psycopg's cursors (`DIRECT` marks the store's hot statements
sent through libpq, `PIPE` a views pass's rows and its positions' statement, each one)."""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
from typing import Any

import psycopg

sys.path.insert(0, os.getcwd())
from bench.bench_http import free_port, run_wire, wait_ready, wire_cycle
from bench.common import scratch_schema
from interlock.cli.main import main as cli
from interlock.projections.backends import postgres as view_backend
from interlock.stores import libpq

CYCLES = int(os.environ.get("CYCLES", "50"))
counts: collections.Counter[str] = collections.Counter()
counting = threading.Event()


def _text(query: Any) -> str:
    if isinstance(query, bytes):  # the views' statements are rendered once, as bytes
        return query.decode()
    if isinstance(query, str):
        return query
    return str(query.as_string(None)) if hasattr(query, "as_string") else str(query)


_execute, _executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany


def execute(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
    if counting.is_set():
        counts[" ".join(_text(query).split())[:110]] += 1
    return _execute(self, query, params, **kw)


def executemany(self: Any, query: Any, params: Any, **kw: Any) -> Any:
    params = list(params)
    if counting.is_set():
        counts["MANY " + " ".join(_text(query).split())[:105]] += len(params)
    return _executemany(self, query, params, **kw)


psycopg.Cursor.execute = execute  # type: ignore[method-assign]
psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
_run, _pipelined = libpq.run, view_backend._pipelined


def run(conn: Any, query: bytes, *args: Any, **kw: Any) -> Any:
    if counting.is_set():
        counts["DIRECT " + " ".join(_text(query).split())[:103]] += 1
    return _run(conn, query, *args, **kw)


def pipelined(conn: Any, rows: list[Any], first: Any = None, *args: Any, **kw: Any) -> Any:
    if counting.is_set():
        for query in ([first[0]] if first is not None else []) + [r[1] for r in rows]:
            counts["PIPE " + " ".join(_text(query).split())[:105]] += 1
    return _pipelined(conn, rows, first, *args, **kw)


libpq.run = run  # the store's hot statements (stores/postgres.py calls `libpq.run`)
view_backend._pipelined = pipelined  # a views pass's direct pipeline


def main() -> None:
    port = free_port()
    with scratch_schema() as store:
        os.environ.update(INTERLOCK_API_KEYS="", INTERLOCK_API_KEYS_FILE="")

        def load() -> None:
            url = f"http://127.0.0.1:{port}"
            wait_ready(url)
            run_wire(url, 1, 20, wire_cycle)
            time.sleep(1)
            counting.set()
            run_wire(url, 1, CYCLES, wire_cycle)
            time.sleep(0.5)
            counting.clear()
            print(f"statements per cycle {sum(counts.values()) / CYCLES:.2f}")
            for k, v in counts.most_common(60):
                print(f"{v / CYCLES:6.2f} {k}")
            os._exit(0)

        threading.Thread(target=load, daemon=True).start()
        sys.argv = ["interlock", "serve", "--port", str(port), "--store", store,
                    "--agents", "interlock.examples.banking:AGENTS"]
        cli()


main()
