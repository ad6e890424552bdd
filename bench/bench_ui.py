"""Console page latency on PostgreSQL with 10,000 pending interrupts and 1,000,000 decisions.

    .venv/bin/python -m bench.bench_ui [--decisions 1000000] [--pending 10000] [--runs 200]

Rows are seeded straight into the read-model tables (as bench_projections does); a few real
chats are recorded too, so the interrupt and chat pages read real event streams. Each page is
fetched over HTTP from a real uvicorn server with a signed-in session; target p95 < 50 ms.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import cast

import httpx
from psycopg import sql

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.bench_projections import fill, make_log
from bench.common import scratch_schema
from interlock.api.app import make_app
from interlock.api.auth import AuthConfig
from interlock.bootstrap import build_service
from interlock.examples.banking import AGENTS
from interlock.projections import SqlReadModels, open_views
from interlock.projections.backends.postgres import PostgresViewStore
from interlock.projections.interface import DecisionFilter, InboxFilter
from interlock.projections.views.decisions import DecisionsView
from interlock.stores.console_sessions import open_sessions
from tests.api.server import ThreadServer

KEYS = {"key-reviewer": {"id": "reviewer", "tenant": "tenant4",
                         "roles": ["approver", "auditor"]}}


def summarise(models: SqlReadModels) -> None:
    """The seeded rows bypassed the projection: rebuild the statistics summary from them."""
    view = models.view(DecisionsView)
    store = cast(PostgresViewStore, view.store)
    started = time.perf_counter()
    with store.datastore.transaction(commit=True) as curs:
        curs.execute(store._q("DELETE FROM {decision_stats}"))
    view.setup()  # an empty summary beside decisions: summarised again, as on an upgrade
    with store.datastore.get_connection() as conn:
        conn.execute(store._q("ANALYZE {decision_stats}"))
    print(f"summarised the decisions in {time.perf_counter() - started:.1f}s", flush=True)


BASELINE = ("decisions, actor + kind", "stats, one actor", "stats, one day",
            "stats, whole tenant")
NEW_INDEXES = ("decisions_tenant_actor_idx", "decisions_tenant_tool_idx",
               "decisions_tenant_kind_idx")


def baseline(c: httpx.Client, models: SqlReadModels, pages: dict[str, str],
             runs: int) -> dict[str, float]:
    """p95 of the pages this work changed, as before it: without the new indexes, and with
    percentiles computed from every matching row (the summary's counts still used)."""
    view = models.view(DecisionsView)
    store = cast(PostgresViewStore, view.store)
    with store.datastore.transaction(commit=True) as curs:
        for name in NEW_INDEXES:
            index = sql.Identifier(store.datastore.schema, f"interlock_{name}")
            curs.execute(sql.SQL("DROP INDEX {}").format(index))
    view.exact_up_to = 10**12
    try:
        found = {name: p95(c, pages[name], runs)[1] for name in BASELINE}
    finally:
        del view.exact_up_to
        view.setup()  # the indexes again
    for name, took in found.items():
        print(f"baseline {name:<19} p95 {took:7.2f} ms", flush=True)
    return found


def queries(models: SqlReadModels, runs: int) -> None:
    """The read-model calls behind the pages, without HTTP or templates."""
    t4, day = "tenant4", datetime(2025, 1, 3, tzinfo=UTC)
    calls: dict[str, Callable[[], object]] = {
        "inbox page (50)": lambda: models.inbox(InboxFilter(tenant=t4), 50),
        "decisions, actor + kind": lambda: models.decisions(
            DecisionFilter(tenant=t4, actor="approver14", kind="respond"), 50),
        "stats, one actor": lambda: models.decision_stats(
            DecisionFilter(tenant=t4, actor="approver14")),
        "stats, one day": lambda: models.decision_stats(
            DecisionFilter(tenant=t4, since=day, until=day + timedelta(days=1))),
        "stats, whole tenant": lambda: models.decision_stats(DecisionFilter(tenant=t4)),
    }
    for name, call in calls.items():
        call()
        times = []
        for _ in range(runs):
            started = time.perf_counter()
            call()
            times.append((time.perf_counter() - started) * 1000)
        print(f"query: {name:<21} p50 {statistics.median(times):7.2f} ms"
              f"  p95 {statistics.quantiles(times, n=20)[-1]:7.2f} ms", flush=True)


def sign_in(c: httpx.Client) -> None:
    token = re.search(r'name="csrf" value="([^"]+)"', c.get("/ui/sign-in").text)
    assert token is not None
    answer = c.post("/ui/sign-in", data={"csrf": token[1], "api_key": "key-reviewer"})
    assert answer.status_code == 303, answer.text


def p95(c: httpx.Client, path: str, runs: int) -> tuple[float, float, int]:
    c.get(path)  # warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = c.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    return statistics.median(times), statistics.quantiles(times, n=20)[-1], len(answer.content)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with scratch_schema() as store:
        app = build_service(store, AGENTS)
        make_log(app, 600)  # ~100 real approval cycles, half of them still pending
        models = open_views(app)
        models.catch_up()
        fill(models, args.decisions, args.pending)
        summarise(models)
        real = models.inbox(InboxFilter(tenant="tenant4", agent="bankingAgent",
                                        tool="userApproval", older_than=None), 1000)
        mine = next(r for r in real.items if not r.ref.startswith("ref-"))
        server = ThreadServer(make_app(app, models, AuthConfig.from_mapping(KEYS),
                                       sessions=open_sessions(app)))
        pages = {
            "inbox, oldest first": "/ui/inbox",
            "inbox, newest, tool + age": "/ui/inbox?order=newest&tool=deploy&age=1d",
            "inbox rows (polled)": "/ui/inbox/rows?order=oldest",
            "one interrupt": f"/ui/chats/{mine.chat_id}/interrupts/{mine.ref}",
            "chat (timeline, chain)": f"/ui/chats/{mine.chat_id}",
            "decisions, first page": "/ui/decisions",
            "decisions, actor + kind": "/ui/decisions?actor=approver14&kind=respond",
            "decisions, time range": "/ui/decisions?since=2025-01-03T00:00&until=2025-01-04",
            "stats, one actor": "/ui/decisions/stats?actor=approver14",
            "stats, one day": "/ui/decisions/stats?since=2025-01-03&until=2025-01-04",
            "stats, whole tenant": "/ui/decisions/stats",
        }
        try:
            with httpx.Client(base_url=server.url) as c:
                sign_in(c)
                nxt = re.search(r'href="/ui/decisions\?&amp;cursor=([^"]+)"',
                                c.get("/ui/decisions").text)
                if nxt:
                    pages["decisions, page 2"] = f"/ui/decisions?cursor={nxt[1]}"
                print(f"{args.pending} pending, {args.decisions} decisions (tenant4 sees 1/10)",
                      flush=True)
                before = baseline(c, models, pages, max(10, args.runs // 10))
                queries(models, args.runs)
                p50, floor, _ = p95(c, "/healthz", args.runs)
                print(f"{'floor: GET /healthz':<28} p50 {p50:7.2f} ms  p95 {floor:7.2f} ms"
                      f"  (this process and machine, no query)", flush=True)
                for name, path in pages.items():
                    runs = args.runs if "whole tenant" not in name else max(10, args.runs // 10)
                    p50, p95_, size = p95(c, path, runs)
                    verdict = "ok" if p95_ < 50 else "OVER 50 ms"
                    gain = f"  {before[name] / p95_:5.1f}x baseline" if name in before else ""
                    print(f"{name:<28} p50 {p50:7.2f} ms  p95 {p95_:7.2f} ms  {size:>7} B"
                          f"  {verdict}{gain}", flush=True)
        finally:
            server.stop()
            models.close()
            app.close()


if __name__ == "__main__":
    main()
