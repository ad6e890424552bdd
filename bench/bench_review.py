"""Compliance review on PostgreSQL: each shipped query's latency over N decisions, drawing a
sample of 1,000 of them (each sampling method in the same run), an evidence pack of 1,000
real items (written and verified), and with --parquet the Parquet export of N decision-log
rows (time, size and the exporting process's peak memory, beside the JSON Lines export).

    .venv/bin/python -m bench.bench_review [--decisions 1000000] [--items 1000] [--runs 30]
        [--parquet]

The N decisions are review facts written straight into the view (one tenant holds them
all: the worst case for a tenant-scoped query); the pack's items are real chats, sealed and
checkpointed, decided by a respond each. Runs in a throwaway schema of
INTERLOCK_BENCH_POSTGRES (default: the local test database).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.bench_projections import fill
from bench.common import bulk_fill, scratch_schema
from interlock.audit import evidence
from interlock.audit.signing import Signer
from interlock.bootstrap import build_service
from interlock.domain import Chat, Interlock, Message, Part, RespondEntry, ToolRequest
from interlock.domain.review.queries import SHIPPED
from interlock.domain.review.sampling import METHODS
from interlock.domain.review.service import Reviews
from interlock.examples.banking import banking
from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.reviews import ReviewsView
from interlock.reviewing import ReviewDesk

TENANT, REAL = "tenant0", "real"
ACTIVE = {f"approver{i}" for i in range(50)}
_FILL = """
INSERT INTO {review_facts} SELECT
  c.chat, g, 'ref-' || g, %(tenant)s, 'agent' || (g %% 3),
  (ARRAY['pay','transferMoney','deploy','deleteData'])[1 + g %% 4],
  CASE WHEN g %% 10 = 0 THEN 'reject' WHEN g %% 20 = 1 THEN 'edit' WHEN g %% 4 = 3
       THEN 'respond' ELSE 'approve' END,
  a.actor, a.actor, 'user' || (g %% 50), 'user' || (g %% 50), e.editor, e.editor,
  COALESCE(e.editor, 'user' || (g %% 50)),
  timestamptz '2025-01-01' + g * interval '30 second',
  timestamptz '2025-01-01' + g * interval '30 second' + ((g * 7919) %% 900) * interval '1 second',
  ((g * 7919) %% 900)::float8, json_build_object('amount', (g * 104729) %% 20000),
  'fp' || (g %% 3), CASE WHEN g %% 50 = 3 THEN 1 ELSE 0 END,
  CASE WHEN g %% 100 = 5 THEN 1 ELSE 0 END,
  g %% 333331 = 7, e.editor IS NOT NULL, g %% 100 = 5, g %% 50 = 3,
  ('x' || encode(substr(sha256(convert_to(c.chat || '#' || g, 'UTF8')), 1, 8), 'hex'))::bit(64)
    ::bigint,
  g %% 3 <> 0, CASE WHEN g %% 3 <> 0 THEN timestamptz '2025-01-01' + g * interval '30 second' END,
  NULL, NULL, NULL, NULL, false, false, false, false, NULL
FROM generate_series(1::bigint, %(n)s) AS g,
  LATERAL (SELECT md5((g %% %(chats)s)::text)::uuid::text AS chat) AS c,
  LATERAL (SELECT CASE WHEN g %% 100 = 9 THEN 'ghost' || (g %% 3)
                       ELSE 'approver' || (g %% 50) END AS actor) AS a,
  LATERAL (SELECT CASE WHEN g %% 20 = 2 THEN 'editor' || (g %% 5) END AS editor) AS e
"""


def p95_ms(query: Callable[[], Any], runs: int) -> tuple[float, float]:
    query()  # warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        query()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), statistics.quantiles(times, n=20)[-1]


def _chat(i: int) -> Chat:
    """A decided approval: the requester asks, an approver responds."""
    chat = Chat.start("bankingAgent", actor=f"user{i % 50}", tenant=REAL)
    chat.send_message(f"transfer ${i} to savings", actor=f"user{i % 50}")
    chat.record_model_reply(Message(role="model", content=[Part(tool_request=ToolRequest(
        name="userApproval", input={"action": "transfer", "details": f"${i}"}))]))
    ref = chat.batch_calls()[0].ref
    chat.record_interrupted(ref, {"reason": "transfer"})
    chat.finish_turn("interrupted")
    chat.resume([RespondEntry(ref=ref, name="userApproval", output={"approved": True})], [],
                actor=f"approver{i % 7}", tools=banking.tool_map)
    chat.record_model_reply(Message(role="model", content=[Part(text="Done.")]))
    chat.finish_turn("stop")
    return chat


def real_chats(app: Interlock, count: int, per_save: int = 64) -> None:
    for start in range(0, count, per_save):
        chats = [_chat(i) for i in range(start, min(count, start + per_save))]
        for chat in chats:
            chat.seal(app.sealer.sign)
        app.save(*chats)  # type: ignore[arg-type]


def bench_queries(desk: ReviewDesk, runs: int) -> None:
    for name in SHIPPED:
        bound = desk.bind(TENANT, name)
        found = len(desk.view.facts(TENANT, bound.node, 50).items)
        p50, p95 = p95_ms(lambda b=bound: desk.view.facts(TENANT, b.node, 50),  # type: ignore[misc]
                          runs)
        print(f"query {name:<22} first 50 ({found:>2} found) p50 {p50:7.2f} ms  "
              f"p95 {p95:7.2f} ms", flush=True)


def bench_sampling(desk: ReviewDesk, decisions: int, runs: int) -> None:
    """Each method, before (sha256-v1) and after (mix64-v2), in turns within one run."""
    node = desk.bind(TENANT, "custom", custom="kind != 'expire'").node
    for strata in ((), ("actor",)):
        for method in METHODS:
            sizes = [len(desk.view.sample(TENANT, node, strata, 1000, "check", method)[0])]
            p50, p95 = p95_ms(lambda s=strata, m=method: desk.view.sample(  # type: ignore[misc]
                TENANT, node, s, 1000, "bench", m), max(3, runs // 5))
            print(f"sample 1,000 of {decisions:,} strata={','.join(strata) or '-':<6} "
                  f"{method:<10} p50 {p50:7.0f} ms  p95 {p95:7.0f} ms", flush=True)
            assert sizes == [1000]


def bench_pack(app: Interlock, desk: ReviewDesk, items: int) -> None:
    started = time.perf_counter()
    review = desk.open(REAL, "auditor", "custom", custom="kind = 'respond'", size=items, seed="b")
    opened = time.perf_counter() - started
    for item in review.state.items:  # every assessment in one commit: setup, not measured
        review.assess(item.n, actor="auditor", verdict="ok", note="")
    review.sign_off(actor="head")
    desk.reviews.save(review)
    with tempfile.TemporaryDirectory() as tmp:
        signer, pub = Signer.generate(), Path(tmp) / "cp.pub"
        pub.write_text(signer.public.hex())
        pack = Path(tmp) / "evidence.zip"
        started = time.perf_counter()
        evidence.write(app, review.id, signer, pack)
        wrote = time.perf_counter() - started
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "tools/verify_export.py", str(pack),
                               "--public-key", str(pub)], capture_output=True, text=True,
                              check=False)
        checked = time.perf_counter() - started
        print(f"review of {items} items opened in {opened:.2f} s; evidence pack "
              f"{pack.stat().st_size / 1e6:.1f} MB written in {wrote:.2f} s (checkpoint "
              f"included), verified offline in {checked:.2f} s: {done.stdout.strip()}",
              flush=True)


_MEASURED = ("import resource, sys; from interlock.cli.main import main; code = main(sys.argv[1:]);"
             " print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr);"
             " sys.exit(code)")


def bench_export(store: str, models: SqlReadModels, decisions: int) -> None:
    """Each export of the decision log in a process of its own: its time and peak RSS."""
    fill(models, decisions, 5)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, out in (("parquet", Path(tmp) / "export"), ("jsonl", Path(tmp) / "d.jsonl")):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _MEASURED, "audit", "export",
                                   "--format", fmt, "--output", str(out), "--store", store],
                                  check=True, capture_output=True, text=True)
            took = time.perf_counter() - started
            peak_kb = int(done.stderr.strip().splitlines()[-1])
            size = sum(f.stat().st_size for f in out.iterdir()) if out.is_dir() \
                else out.stat().st_size
            print(f"export {fmt:<7} {decisions:,} decisions in {took:5.1f} s, "
                  f"{size / 1e6:6.1f} MB, peak RSS {peak_kb / 1024:4.0f} MB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--parquet", action="store_true", help="measure the Parquet export")
    args = parser.parse_args()
    with scratch_schema() as store:
        app = build_service(store)
        real_chats(app, args.items)
        models = open_views(app)
        models.catch_up()
        started = time.perf_counter()
        bulk_fill(models, [(ReviewsView, "review_facts", _FILL,
                            {"n": args.decisions, "chats": max(1, args.decisions // 20),
                             "tenant": TENANT})])
        print(f"filled {args.decisions:,} review facts in {time.perf_counter() - started:.1f}s",
              flush=True)
        desk = ReviewDesk(Reviews(app), models.view(ReviewsView), ACTIVE)
        bench_queries(desk, args.runs)
        bench_sampling(desk, args.decisions, args.runs)
        bench_pack(app, desk, args.items)
        if args.parquet:
            bench_export(store, models, args.decisions)
        models.close()
        app.close()


if __name__ == "__main__":
    main()
