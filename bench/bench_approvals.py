"""Approval costs on PostgreSQL: commits per decision, the sweeper, finding due approvals.

    .venv/bin/python -m bench.bench_approvals [--pending 100000] [--due 10000]
        [--decided 1000000] [--runs 200] [--quick]

1. A vote, a rejection, a withdrawal and an expiry: event-store commits each (target 1).
2. `--due` held calls past their deadline are real chats (their events recorded in bulk);
   the other `--pending` rows are seeded straight into the inbox, not yet due, and
   `--decided` rows into the decision log. The sweeper then expires the due ones through
   its real path (InterruptExpired recorded, the model told); target 10,000 in < 10 s.
   Baseline in the same run: the sweeper one chat at a time (concurrency 1) on extra chats.
3. The sweeper's query for due approvals, p95 (target < 10 ms), before and after.

The service is set up as `interlock serve` sets it up: personal data encrypted under a key
per chat (the erasure key store), the garbage collector tuned.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from uuid import UUID

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pydantic import BaseModel

from bench.common import bulk_fill, scratch_schema
from interlock import Agent, Approval, FunctionModel, ToolContext, tool
from interlock.bootstrap import build_service
from interlock.domain import (
    ApproveEntry,
    Chat,
    Decider,
    Interlock,
    Message,
    ModelRequest,
    ModelResponse,
    Part,
    ToolRequest,
)
from interlock.domain.chat.rules import RejectEntry
from interlock.process import tune_gc
from interlock.projections import SqlReadModels, open_read_models
from interlock.projections.backends.postgres import PostgresViewStore
from interlock.projections.views.decisions import DecisionsView
from interlock.projections.views.inbox import InboxView
from interlock.stores.erasure_keys import KeyStore
from interlock.sweeper import Sweeper
from tests.projections.commits import counting

HOUR = timedelta(hours=1)
POLICY = Approval(roles=["treasury"], quorum=2, expires_in=HOUR)
TOM, ANN = Decider("tom", frozenset({"treasury"})), Decider("ann", frozenset({"treasury"}))


class Pay(BaseModel):
    amount: int


@tool(name="pay", approval=POLICY)
async def pay(input: Pay, ctx: ToolContext) -> dict[str, Any]:
    return {"paid": input.amount}


def _script(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "user":
        part = Part(tool_request=ToolRequest(name="pay", input={"amount": 7}, ref="p1"))
    else:
        part = Part(text="told")
    return ModelResponse(message=Message(role="model", content=[part]))


PAYER = Agent(name="payer", system="", tools=[pay], model=FunctionModel(_script))


def run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


# -- 1. commits per decision --------------------------------------------------------------


def _held(app: Interlock) -> UUID:
    chat = app.start_chat("payer", actor="alice", tenant="t0")
    run(app.send(chat.id, "pay", actor="alice"))
    return chat.id


def bench_commits(app: Interlock, models: SqlReadModels) -> None:
    cases: dict[str, Callable[[UUID], Any]] = {
        "vote (1 of quorum 2)": lambda c: run(app.resume(
            c, votes=[ApproveEntry(ref="p1", name="pay")], actor="tom", decider=TOM)),
        "rejection (+ model's answer)": lambda c: run(app.resume(
            c, votes=[RejectEntry(ref="p1", name="pay", reason="no")], actor="tom", decider=TOM)),
        "withdrawal (+ model's answer)": lambda c: run(app.withdraw(
            c, ["p1"], reason="changed my mind", decider=Decider("alice"))),
    }
    for name, decide in cases.items():
        chat_id = _held(app)
        with counting(app) as seen:
            decide(chat_id)
        print(f"commits: {name:<32} {seen.commits} commit, {seen.events} events", flush=True)
    chat_id = _held(app)
    models.wait(app.recorder.max_notification_id())
    with counting(app) as seen:  # the vote's chat above is still held: two expire
        expired = _sweep_until(Sweeper(app, models), 2, datetime.now(UTC) + 2 * HOUR)
    print(f"commits: {'expiry (sweeper, + answer)':<32} {seen.commits / expired:.0f} commit,"
          f" {seen.events / expired:.0f} events (each of {expired} expiries)", flush=True)


def _sweep_until(sweeper: Sweeper, n: int, at: datetime | None = None) -> int:
    from interlock.domain import application as service_module

    real = getattr(service_module, "now")  # noqa: B009 - put back below
    if at is not None:
        setattr(service_module, "now", lambda: at)  # noqa: B010 - the service's clock, moved on
    try:
        done = 0
        while done < n:
            done += sweeper.sweep(at, limit=n - done)
        return done
    finally:
        setattr(service_module, "now", real)  # noqa: B010


# -- 2. seeding -----------------------------------------------------------------------------


def _due_chat(i: int, held_at: datetime) -> Chat:
    """A chat whose call to `pay` was held at `held_at` (so due an hour later)."""
    chat = Chat.start("payer", actor="alice", tenant=f"t{i % 10}")
    chat.send_message("pay", actor="alice")
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=ToolRequest(
        name="pay", input={"amount": i}, ref="p1"))]))
    chat.hold_for_approval("p1", POLICY.terms(held_at, "alice"))
    chat.finish_turn("interrupted")
    return chat


def seed_due(app: Interlock, n: int, per_save: int = 64) -> None:
    held_at = datetime.now(UTC) - 2 * HOUR
    for start in range(0, n, per_save):
        chats = [_due_chat(i, held_at) for i in range(start, min(n, start + per_save))]
        for chat in chats:
            chat.seal(app.sealer.sign)
        app.save(*chats)


_FILL_INBOX = """
INSERT INTO {inbox} (chat_id, ref, tenant, agent, tool, input, metadata, requested_at,
  requested_by, approval, expires_at, due_at, deciders, voters) SELECT
  md5('pending' || g)::uuid::text, 'p1', 't' || (g %% 10), 'payer', 'pay',
  '{{"amount": 1}}'::json, '{{"approval": {{}}}}'::json, now() - interval '1 minute',
  'alice', NULL, now() + interval '1 day' + (g %% 600) * interval '1 minute',
  now() + interval '1 day' + (g %% 600) * interval '1 minute', ',role:treasury,', ',alice,'
FROM generate_series(1, %(n)s) AS g
"""
_FILL_DECISIONS = """
INSERT INTO {decisions} (chat_id, version, ref, tenant, agent, tool, kind, original_input,
  replaced_input, output, resumed_metadata, actor, input_sha256, requested_at, decided_at,
  fingerprint) SELECT
  md5('decided' || (g / 4))::uuid::text, g, 'p' || g, 't' || (g %% 10), 'payer', 'pay',
  (ARRAY['approve','reject','expire','withdraw'])[1 + g %% 4], '{{"amount": 1}}'::json, NULL,
  '{{"outcome": "approved"}}'::json, NULL, 'approver' || (g %% 50), md5(g::text),
  now() - interval '30 days' + g * interval '1 second',
  now() - interval '30 days' + g * interval '1 second' + (g %% 600) * interval '1 second', NULL
FROM generate_series(1, %(n)s) AS g
"""


def fill(models: SqlReadModels, pending: int, decided: int) -> None:
    started = time.perf_counter()
    bulk_fill(models, [(InboxView, "inbox", _FILL_INBOX, {"n": pending}),
                       (DecisionsView, "decisions", _FILL_DECISIONS, {"n": decided})])
    print(f"seeded {pending} pending (not due) and {decided} decided rows in"
          f" {time.perf_counter() - started:.1f}s", flush=True)


# -- 3. the due query -----------------------------------------------------------------------


def due_p95(models: SqlReadModels, runs: int) -> tuple[float, float, int]:
    view = models.view(InboxView)
    found = len(view.due(datetime.now(UTC), 500))
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        view.due(datetime.now(UTC), 500)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[-1], found


def due_plan(models: SqlReadModels) -> str:
    """The server's own time for the due query, and whether it used the partial index."""
    store = cast(PostgresViewStore, models.view(InboxView).store)
    query = ("EXPLAIN (ANALYZE, FORMAT JSON) SELECT due_at, chat_id, ref FROM {inbox}"
             " WHERE due_at <= now() ORDER BY due_at, chat_id, ref LIMIT 500")
    with store.datastore.get_connection() as conn:
        plan = conn.execute(store._q(query)).fetchone()["QUERY PLAN"][0]  # type: ignore[index]
    node = plan["Plan"]
    while node.get("Plans") and "Index" not in node["Node Type"]:
        node = node["Plans"][0]
    index = node.get("Index Name", "")
    return f"server {plan['Execution Time']:.2f} ms, {node['Node Type']} {index}"


def timed_sweep(app: Interlock, models: SqlReadModels, n: int,
                concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds of this process to expire `n` due calls."""
    sweeper = Sweeper(app, models, batch=500, concurrency=concurrency)
    started, cpu = time.perf_counter(), time.process_time()
    _sweep_until(sweeper, n)
    return time.perf_counter() - started, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pending", type=int, default=100_000, help="pending approvals in all")
    parser.add_argument("--due", type=int, default=10_000, help="of them, due now")
    parser.add_argument("--decided", type=int, default=1_000_000)
    parser.add_argument("--baseline", type=int, default=1000, help="due chats swept one by one")
    parser.add_argument("--concurrency", type=int, default=64, help="chats swept at once")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="a smoke test: small sizes")
    args = parser.parse_args()
    if args.quick:
        args.pending, args.due, args.decided, args.baseline, args.runs = 2000, 200, 20_000, 50, 20
    with scratch_schema() as store:
        app = build_service(store, [PAYER])
        app.protect_personal_data(KeyStore.open(app))  # personal data encrypted, as served
        models = open_read_models(app, poll_interval=0.05)
        tune_gc()  # as `interlock serve` and `interlock projections run` do
        try:
            bench_commits(app, models)
            started = time.perf_counter()
            seed_due(app, args.due + args.baseline)
            models.wait(app.recorder.max_notification_id(), timeout=600)
            print(f"recorded {args.due + args.baseline} held chats past their deadline and"
                  f" caught the views up in {time.perf_counter() - started:.1f}s", flush=True)
            fill(models, args.pending - args.due - args.baseline, args.decided)
            p50, p95, found = due_p95(models, args.runs)
            print(f"due query, {found} due in page:  p50 {p50:.2f} ms  p95 {p95:.2f} ms"
                  f"  {'ok' if p95 < 10 else 'OVER 10 ms'} ({due_plan(models)})", flush=True)
            before, cpu = timed_sweep(app, models, args.baseline, concurrency=1)
            print(f"sweeper, one at a time (baseline): {args.baseline} expiries in {before:.2f}s"
                  f" = {args.baseline / before:.0f}/s, {cpu / args.baseline * 1000:.1f} ms CPU"
                  " each", flush=True)
            took, cpu = timed_sweep(app, models, args.due, concurrency=args.concurrency)
            ratio = (args.due / took) / (args.baseline / before)
            print(f"sweeper, {args.concurrency} chats at once: {args.due} expiries in {took:.2f}s"
                  f" = {args.due / took:.0f}/s ({ratio:.1f}x baseline), {cpu / args.due * 1000:.1f}"
                  f" ms CPU each  {'ok' if took < 10 else 'OVER 10 s'}", flush=True)
            models.wait(app.recorder.max_notification_id(), timeout=600)
            p50, p95, found = due_p95(models, args.runs)
            print(f"due query, {found} due (after):   p50 {p50:.2f} ms  p95 {p95:.2f} ms"
                  f"  {'ok' if p95 < 10 else 'OVER 10 ms'} ({due_plan(models)})", flush=True)
            print(f"load average while measuring: {os.getloadavg()[0]:.1f}"
                  f" on {os.cpu_count()} cores", flush=True)
        finally:
            models.close()
            app.close()


if __name__ == "__main__":
    main()
