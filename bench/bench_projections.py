"""Read-side benchmarks on PostgreSQL: catch-up speed, and inbox/decision query latency.

    .venv/bin/python -m bench.bench_projections [--events 100000] [--decisions 1000000]

Runs in a throwaway schema of INTERLOCK_BENCH_POSTGRES (default: the local test database).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import bulk_fill, scratch_schema
from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock, Message, Part, RespondEntry, ToolRequest
from interlock.examples.banking import banking
from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.decisions import DecisionFilter, DecisionsView
from interlock.projections.views.inbox import InboxFilter, InboxView


def _chat(i: int) -> Chat:
    """An approval cycle: 6 events pending, 9 when decided (every other chat)."""
    chat = Chat.start("bankingAgent", actor=f"user{i % 50}", tenant=f"tenant{i % 10}")
    chat.send_message(f"transfer ${i} to savings", actor=f"user{i % 50}")
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=ToolRequest(
        name="userApproval", input={"action": "transfer", "details": f"${i}"}))]))
    ref = chat.batch_calls()[0].ref
    chat.record_interrupted(ref, {"reason": "transfer"})
    chat.finish_turn("interrupted")
    if i % 2:
        chat.resume([RespondEntry(ref=ref, name="userApproval", output={"approved": True})], [],
                    actor=f"approver{i % 7}", tools=banking.tool_map)
        chat.record_model_reply(Message(role="model", content=[Part(text="Done.")]))
        chat.finish_turn("stop")
    return chat


def make_log(app: Interlock, events: int, per_save: int = 64) -> int:
    """Append sealed approval cycles until the log holds `events` events; the head."""
    i = 0
    while (app.recorder.max_notification_id() or 0) < events:
        chats = [_chat(i + k) for k in range(per_save)]
        for chat in chats:
            chat.seal(app.sealer.sign)
        app.save(*chats)  # type: ignore[arg-type]
        i += per_save
    return app.recorder.max_notification_id() or 0


def bench_catch_up(models: SqlReadModels, head: int) -> None:
    for runner in models.runners:
        runner.view.drop()
        runner.view.setup()
        started = time.perf_counter()
        runner.catch_up()
        took = time.perf_counter() - started
        print(f"catch-up {runner.name:<10} {head} events in {took:6.2f}s = "
              f"{head / took:8.0f} events/s", flush=True)
    for runner in models.runners:
        runner.view.drop()
        runner.view.setup()
    started = time.perf_counter()
    models.catch_up()  # every view at once: one read of the log, one decode per event
    took = time.perf_counter() - started
    print(f"catch-up {'all views':<10} {head} events in {took:6.2f}s = "
          f"{head / took:8.0f} events/s", flush=True)


_FILL_DECISIONS = """
INSERT INTO {decisions} SELECT
  md5(((g %% %(chats)s))::text)::uuid::text, g, 'ref-' || g, 'tenant' || (g %% 10),
  'bankingAgent', (ARRAY['userApproval','transferMoney','deploy','deleteData'])[1 + g %% 4],
  (ARRAY['respond','restart'])[1 + g %% 2], '{{"amount": 1}}'::jsonb, 'null'::jsonb,
  '{{"approved": true}}'::jsonb, 'null'::jsonb, 'approver' || (g %% 50), md5(g::text),
  timestamptz '2025-01-01' + g * interval '1 second',
  timestamptz '2025-01-01' + g * interval '1 second' + (g %% 600) * interval '1 second'
FROM generate_series(1, %(n)s) AS g
"""
_FILL_INBOX = """
INSERT INTO {inbox} SELECT
  md5((g %% %(chats)s)::text)::uuid::text, 'ref-' || g, 'tenant' || (g %% 10), 'bankingAgent',
  (ARRAY['userApproval','transferMoney','deploy','deleteData'])[1 + g %% 4],
  '{{"amount": 1}}'::jsonb, '{{"reason": "x"}}'::jsonb,
  timestamptz '2025-01-01' + g * interval '1 second', 'user' || (g %% 50)
FROM generate_series(1, %(n)s) AS g
"""


def fill(models: SqlReadModels, decisions: int, pending: int) -> None:
    started = time.perf_counter()
    bulk_fill(models, [
        (DecisionsView, "decisions", _FILL_DECISIONS, {"n": decisions, "chats": decisions // 20}),
        (InboxView, "inbox", _FILL_INBOX, {"n": pending, "chats": pending // 5})])
    print(f"filled {decisions} decisions and {pending} pending rows in "
          f"{time.perf_counter() - started:.1f}s", flush=True)


def p95_ms(query: Callable[[], Any], runs: int = 200) -> tuple[float, float]:
    query()  # warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        query()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[-1]


def later_page(pages: Callable[[str | None], Any], depth: int) -> str | None:
    cursor = None
    for _ in range(depth):
        cursor = pages(cursor).next_cursor
    return cursor


def bench_queries(models: SqlReadModels) -> None:
    some_chat = models.decisions(DecisionFilter(), limit=1).items[0].chat_id
    inbox_chat = models.inbox(InboxFilter(), limit=1).items[0].chat_id
    cases: dict[str, tuple[Callable[[str | None], Any], int]] = {
        "decisions (no filter)": (lambda c: models.decisions(DecisionFilter(), 50, c), 200),
        "decisions tool": (lambda c: models.decisions(DecisionFilter(tool="deploy"), 50, c), 200),
        "decisions actor": (lambda c: models.decisions(DecisionFilter(actor="approver7"), 50, c),
                            100),
        "decisions tenant+range": (lambda c: models.decisions(DecisionFilter(
            tenant="tenant3", since=_ts("2025-01-03"), until=_ts("2025-01-08")), 50, c), 50),
        "decisions chat": (lambda c: models.decisions(DecisionFilter(chat_id=some_chat), 5, c), 2),
        "inbox (no filter)": (lambda c: models.inbox(InboxFilter(), 50, c), 200),
        "inbox tenant": (lambda c: models.inbox(InboxFilter(tenant="tenant4"), 50, c), 100),
        "inbox tool+age": (lambda c: models.inbox(InboxFilter(
            tool="deploy", older_than=_ts("2025-01-02")), 50, c), 50),
        "inbox chat": (lambda c: models.inbox(InboxFilter(chat_id=inbox_chat), 2, c), 1),
    }
    for name, (pages, depth) in cases.items():
        first = p95_ms(lambda pages=pages: pages(None))  # type: ignore[misc]
        cursor = later_page(pages, depth)
        later = p95_ms(lambda pages=pages, cursor=cursor: pages(cursor))  # type: ignore[misc]
        print(f"{name:<24} first page p50 {first[0]:5.2f} ms p95 {first[1]:5.2f} ms | "
              f"page {depth + 1:>3} p50 {later[0]:5.2f} ms p95 {later[1]:5.2f} ms", flush=True)


def _ts(day: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(f"{day}T00:00:00+00:00")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--pending", type=int, default=100_000)
    args = parser.parse_args()
    with scratch_schema() as store:
        app = build_service(store)
        started = time.perf_counter()
        head = make_log(app, args.events)
        print(f"log: {head} events in {time.perf_counter() - started:.1f}s", flush=True)
        models = open_views(app)
        bench_catch_up(models, head)
        for runner in models.runners:
            runner.view.drop()
            runner.view.setup()
        fill(models, args.decisions, args.pending)
        bench_queries(models)
        models.close()
        app.close()


if __name__ == "__main__":
    main()
