import os, sys, threading, time, collections
sys.path.insert(0, os.getcwd())
from bench.common import scratch_schema
from bench.bench_http import run_wire, wire_cycle, free_port, wait_ready
import psycopg
CYCLES=int(os.environ.get('CYCLES', '50'))
counts = collections.Counter()
def _text(query):
    if isinstance(query, bytes):
        return query.decode()
    if isinstance(query, str):
        return query
    return query.as_string(None) if hasattr(query, "as_string") else str(query)
on = False
orig = psycopg.Cursor.execute
def execute(self, query, params=None, **kw):
    if on:
        q = _text(query)
        counts[" ".join(q.split())[:110]] += 1
    return orig(self, query, params, **kw)
psycopg.Cursor.execute = execute
origm = psycopg.Cursor.executemany
def executemany(self, query, params, **kw):
    params = list(params)
    if on:
        q = _text(query)
        counts["MANY "+" ".join(q.split())[:105]] += len(params)
    return origm(self, query, params, **kw)
psycopg.Cursor.executemany = executemany
def main():
    port = free_port()
    with scratch_schema() as store:
        os.environ.update(INTERLOCK_API_KEYS="", INTERLOCK_API_KEYS_FILE="")
        def load():
            global on
            url = f"http://127.0.0.1:{port}"
            wait_ready(url)
            run_wire(url, 1, 20, wire_cycle); time.sleep(1)
            on = True
            run_wire(url, 1, CYCLES, wire_cycle); time.sleep(0.5)
            on = False
            tot = sum(counts.values())
            print(f"statements per cycle {tot/CYCLES:.2f}")
            for k, v in counts.most_common(60):
                print(f"{v/CYCLES:6.2f} {k}")
            os._exit(0)
        threading.Thread(target=load, daemon=True).start()
        from interlock.cli.main import main as cli
        sys.argv = ["interlock", "serve", "--port", str(port), "--store", store, "--agents", "interlock.examples.banking:AGENTS"]
        cli()
main()
