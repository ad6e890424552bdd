"""Approval costs on PostgreSQL: commits per decision, the sweeper, finding due approvals.

    .venv/bin/python -m bench.bench_approvals [--pending 100000] [--due 10000]
        [--decided 1000000] [--runs 200] [--stages [SHARE]] [--quick]

1. A vote, a rejection, a withdrawal and an expiry: event-store commits each (target 1).
2. `--due` held calls past their deadline are real chats (their events recorded in bulk);
   the other `--pending` rows are seeded straight into the inbox, not yet due, and
   `--decided` rows into the decision log. The sweeper then expires the due ones through
   its real path (InterruptExpired recorded, the model told); target 10,000 in < 10 s.
   Baseline in the same run: the sweeper one chat at a time (concurrency 1) on extra chats.
3. The sweeper's query for due approvals, p95 (target < 10 ms), before and after.
4. `--stages SHARE` (0.5 if no share is given): the due query and the inbox queries (the
   console's inbox, "everything pending" and "what I may decide") with that share of the
   seeded pending rows staged (three stages; waiting in stage 1, 2 or 3, the CFO's stage
   skipped for some, escalated for some), against the same rows held under one stage:
   plain, staged, plain again in the same run (the second plain pass shows the noise).

The service is set up as `interlock serve` sets it up: personal data encrypted under a key
per chat (the erasure key store), the garbage collector tuned.
"""

from __future__ import annotations

import argparse
import contextlib
import json
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
from interlock import Agent, Approval, FunctionModel, Stage, ToolContext, tool
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
from interlock.domain.chat.policies import ApprovalState, Vote
from interlock.domain.chat.rules import RejectEntry
from interlock.process import tune_gc
from interlock.projections import SqlReadModels, open_read_models
from interlock.projections.backends.postgres import PostgresViewStore
from interlock.projections.views.decisions import DecisionsView
from interlock.projections.views.inbox import (
    Decidable,
    InboxFilter,
    InboxView,
    _tags,
    _voters,
)
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
  'alice', %(approval)s::json, now() + interval '1 day' + (g %% 600) * interval '1 minute',
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
    approval = json.dumps(_plain_state().model_dump(mode="json"))
    bulk_fill(models, [(InboxView, "inbox", _FILL_INBOX, {"n": pending, "approval": approval}),
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


# -- 4. stages: the due and inbox queries with staged calls -------------------------------

DAY = 24 * HOUR


def _over_100k(input: Pay) -> bool:
    return input.amount > 100_000


STAGED = Approval(stages=[
    Stage("team lead", roles=["lead"], expires_in=DAY),
    Stage("treasury", roles=["treasury"], quorum=2, expires_in=2 * DAY,
          escalate_after=4 * HOUR, escalate_to=["cfo"]),
    Stage("CFO", roles=["cfo"], when=_over_100k, expires_in=2 * DAY),
])
_HELD = datetime.now(UTC) - HOUR  # when the templates below were held


def _plain_state() -> ApprovalState:
    """A seeded row's one-stage call: held, no vote yet (quorum 2 of treasury)."""
    return ApprovalState.opened(POLICY.terms(_HELD, "alice"))


def _staged_states() -> list[tuple[str, int, ApprovalState]]:
    """(what, weight, state): the staged calls seeded, each as the inbox would hold it."""
    def voted(state: ApprovalState, actor: str, stage: int, minutes: int,
              next_stage: int | None = None) -> ApprovalState:
        state.record(Vote(actor=actor, kind="approve", at=_HELD + minutes * timedelta(minutes=1),
                          input_sha256="x", stage=stage), next_stage=next_stage)
        return state

    def held(apply: list[bool]) -> ApprovalState:
        return ApprovalState.opened(STAGED.terms(_HELD, "alice", apply))

    everything, no_cfo = [True, True, True], [True, True, False]
    in_two = voted(held(everything), "lena", 0, 5, next_stage=1)
    in_two_voted = voted(voted(held(no_cfo), "lena", 0, 5, next_stage=1), "tom", 1, 20)
    escalated = voted(held(everything), "lena", 0, 5, next_stage=1)
    escalated.escalated = True
    in_three = voted(voted(voted(held(everything), "lena", 0, 5, next_stage=1), "tom", 1, 20),
                     "ann", 1, 30, next_stage=2)
    return [("stage 1 of 3", 3, held(everything)),
            ("stage 2 of 3", 2, in_two),
            ("stage 2, 1 of 2 votes, CFO skipped", 2, in_two_voted),
            ("stage 2, escalated to the CFO", 1, escalated),
            ("stage 3 of 3 (CFO)", 2, in_three)]


# The seeded rows not yet due (due_at a day on: the real due chats are the only ones due).
_SEEDED = "due_at > now() + interval '1 hour'"
_SET_ROWS = """
UPDATE {{inbox}} SET approval = %(approval)s::json, deciders = %(deciders)s,
  voters = %(voters)s, expires_at = now() + %(expires)s * interval '1 second'
    + (abs(hashtext(chat_id)) %% 600) * interval '1 minute',
  due_at = now() + %(due)s * interval '1 second'
    + (abs(hashtext(chat_id)) %% 600) * interval '1 minute'
WHERE {where}
"""


def _row_values(state: ApprovalState) -> dict[str, Any]:
    """The columns the inbox writes for `state` (its deadlines from now, in seconds): the
    view's own functions, so the seeded rows are what a real held call leaves."""
    terms, at = state.current(), datetime.now(UTC)
    due = [t for t in (terms.expires_at, None if state.escalated else terms.escalate_at) if t]

    def ahead(t: datetime | None) -> float:  # 2 hours at least: never due, still `_SEEDED`
        return max(((t or at + DAY) - at).total_seconds(), 7200.0)

    return {"approval": json.dumps(state.model_dump(mode="json")),
            "deciders": _tags(*state.deciders()), "voters": _voters(state, "alice"),
            "expires": ahead(terms.expires_at), "due": ahead(min(due) if due else None)}


def stage_rows(models: SqlReadModels, share: float) -> dict[str, int]:
    """Stage `share` of the seeded pending rows of the even tenants (by a hash of their
    chat id), in the weights of `_staged_states`; returns how many rows each kind has."""
    store = cast(PostgresViewStore, models.view(InboxView).store)
    states = _staged_states()
    total, low, counts = sum(w for _, w, _ in states), 0.0, {}
    with store.datastore.transaction(commit=True) as curs:
        for what, weight, state in states:
            high = low + share * 1000 * weight / total
            where = (f"{_SEEDED} AND tenant IN ({', '.join(repr(t) for t in STAGED_TENANTS)})"
                     f" AND abs(hashtext(chat_id || 'stage')) %% 1000 >= {low:.0f}"
                     f" AND abs(hashtext(chat_id || 'stage')) %% 1000 < {high:.0f}")
            curs.execute(store._q(_SET_ROWS.format(where=where)), _row_values(state))
            counts[what], low = curs.rowcount, high
    _analyze(store)
    return counts


def unstage_rows(models: SqlReadModels) -> int:
    """The staged seeded rows back to the one-stage call they were seeded as."""
    store = cast(PostgresViewStore, models.view(InboxView).store)
    where = f"{_SEEDED} AND approval->>'stage' IS NOT NULL"
    with store.datastore.transaction(commit=True) as curs:
        curs.execute(store._q(_SET_ROWS.format(where=where)), _row_values(_plain_state()))
        done = curs.rowcount
    _analyze(store)
    return done


def _analyze(store: PostgresViewStore) -> None:
    with store.datastore.get_connection() as conn:
        conn.execute(store._q("VACUUM ANALYZE {inbox}"))


def _who(name: str, role: str) -> Decidable:
    return Decidable(id=name, roles=frozenset({role}), groups=frozenset())


# Rows are staged in the even tenants only: tenant t4's inbox (staged) and t5's (plain),
# the same size, are measured in the same runs, so the machine's load falls on both alike.
STAGED_TENANTS, PLAIN_TENANT = ("t0", "t2", "t4", "t6", "t8"), "t5"
MINE = {"treasury": _who("tess", "treasury"), "team lead": _who("lena", "lead"),
        "CFO": _who("carl", "cfo")}


def _console(view: InboxView, f: InboxFilter) -> None:
    """The console's inbox queries (api/ui/router.py): a page of 50, two counts to 100."""
    view.page(f, 50, None)
    view.count(InboxFilter(tenant=f.tenant), 100)
    if f.decidable_by is not None:
        view.count(f, 100)


def _console_before(view: InboxView, f: InboxFilter) -> None:
    """As the console counted before `InboxView.count`: each count read (and decoded,
    stage and all) up to 101 rows."""
    view.page(f, 50, None)
    view.page(InboxFilter(tenant=f.tenant), 100, None)
    if f.decidable_by is not None:
        view.page(f, 100, None)


def _inbox_cases(view: InboxView, tenant: str) -> dict[str, Callable[[], Any]]:
    cases: dict[str, Callable[[], Any]] = {
        "inbox page, everything": lambda: _console(
            view, InboxFilter(tenant=tenant, partial=True))}
    for name, who in MINE.items():
        f = InboxFilter(tenant=tenant, partial=True, decidable_by=who)
        cases[f"inbox page, mine ({name})"] = lambda f=f: _console(view, f)
    f = InboxFilter(tenant=tenant, partial=True, decidable_by=MINE["treasury"])
    cases["  counting rows (before)"] = lambda: _console_before(view, f)
    return cases


def query_p95s(models: SqlReadModels, runs: int) -> dict[str, float]:
    """p95 ms of the due query and each inbox case in the staged tenant t4 and the plain
    t5 (keys "name@t4"), every case taken in turn each run."""
    view = models.view(InboxView)
    cases: dict[str, Callable[[], Any]] = {
        "due (the sweeper's 500)": lambda: view.due(datetime.now(UTC), 500)}
    for tenant in ("t4", PLAIN_TENANT):
        cases.update({f"{name}@{tenant}": case
                      for name, case in _inbox_cases(view, tenant).items()})
    times: dict[str, list[float]] = {name: [] for name in cases}
    for case in cases.values():
        case()  # warm
    for _ in range(runs):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.quantiles(t, n=20)[-1] for name, t in times.items()}


class _Captured(Exception):
    """A query's statement was captured instead of run."""


def query_plans(models: SqlReadModels) -> dict[str, str]:
    """Each query's plan on the server (tenant t4): its time, the indexes it read, rows
    filtered out."""
    view = models.view(InboxView)
    store = cast(PostgresViewStore, view.store)
    seen: list[tuple[str, dict[str, Any]]] = []

    def capture(template: str, params: dict[str, Any]) -> list[Any]:
        seen.append((template, dict(params)))
        raise _Captured

    queries: list[Callable[[], Any]] = [
        lambda: view.due(datetime.now(UTC), 500),
        lambda: view.query(InboxFilter(tenant="t4", partial=True), 51, None),
        *(lambda who=who: view.query(InboxFilter(tenant="t4", partial=True, decidable_by=who),
                                     51, None) for who in MINE.values()),
        lambda: view.count(InboxFilter(tenant="t4", partial=True,
                                       decidable_by=MINE["treasury"]), 100)]
    real = view._fetch
    view._fetch = capture
    try:
        for query in queries:
            with contextlib.suppress(_Captured):
                query()
    finally:
        view._fetch = real
    names = ["due", "everything", *(f"mine ({n})" for n in MINE), "count (treasury)"]
    return {name: _plan(store, template, params)
            for name, (template, params) in zip(names, seen, strict=True)}


def _plan(store: PostgresViewStore, template: str, params: dict[str, Any]) -> str:
    explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + template
    plan = store.fetch(explain, params)[0]["QUERY PLAN"][0]
    nodes, filtered, todo = [], 0, [plan["Plan"]]
    while todo:
        node = todo.pop()
        todo.extend(node.get("Plans", []))
        nodes.append(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
        filtered += node.get("Rows Removed by Filter", 0)
    return (f"server {plan['Execution Time']:.2f} ms, {' < '.join(nodes)},"
            f" {filtered} rows read and filtered out")


def scrape_counts(models: SqlReadModels) -> str:
    """The metrics' pending gauge over the whole inbox: reading every row (as before
    `pending_by_tool`) against counting in SQL, seconds."""
    view = models.view(InboxView)
    started, cursor, rows = time.perf_counter(), None, 0
    while True:
        page = view.page(InboxFilter(), 500, cursor)
        rows, cursor = rows + len(page.items), page.next_cursor
        if cursor is None:
            break
    read = time.perf_counter() - started
    started = time.perf_counter()
    counted = sum(view.pending_by_tool().values())
    return (f"the metrics' pending gauge: reading {rows} rows {read:.2f}s (before), counting"
            f" {counted} in SQL {time.perf_counter() - started:.3f}s")


def bench_stages(models: SqlReadModels, share: float, runs: int) -> None:
    """Plain, staged, plain again: the due query's p95 each time (staged/plain), and the
    inbox queries' in a staged tenant against a plain one in the same runs."""
    plain = query_p95s(models, runs)
    for name, plan in query_plans(models).items():
        print(f"plan, plain   {name:<18} {plan}", flush=True)
    print(f"plain:  {scrape_counts(models)}", flush=True)
    counts = stage_rows(models, share)
    kinds = ", ".join(f"{n} {what}" for what, n in counts.items())
    print(f"staged {sum(counts.values())} of the seeded pending rows of tenants"
          f" {', '.join(STAGED_TENANTS)}: {kinds}", flush=True)
    staged = query_p95s(models, runs)
    for name, plan in query_plans(models).items():
        print(f"plan, staged  {name:<18} {plan}", flush=True)
    print(f"staged: {scrape_counts(models)}", flush=True)
    print(f"put {unstage_rows(models)} rows back to one stage", flush=True)
    again = query_p95s(models, runs)
    name = "due (the sweeper's 500)"
    base = (plain[name] + again[name]) / 2
    print(f"{name:<32} p95 plain {plain[name]:6.2f} ms, staged {staged[name]:6.2f} ms, plain"
          f" again {again[name]:6.2f} ms: staged/plain {staged[name] / base:.2f}", flush=True)
    for name in _inbox_cases(models.view(InboxView), "t4"):
        mine, other = staged[f"{name}@t4"], staged[f"{name}@{PLAIN_TENANT}"]
        before = (plain[f"{name}@t4"] / plain[f"{name}@{PLAIN_TENANT}"]
                  + again[f"{name}@t4"] / again[f"{name}@{PLAIN_TENANT}"]) / 2
        print(f"{name:<32} p95 staged tenant {mine:6.2f} ms, plain tenant {other:6.2f} ms"
              f" (same runs): {mine / other:.2f}; the same tenants both plain: {before:.2f}",
              flush=True)
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
          flush=True)


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
    parser.add_argument("--stages", type=float, nargs="?", const=0.5, default=None,
                        metavar="SHARE", help="the inbox queries with this share staged")
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
            if args.stages is not None:
                bench_stages(models, args.stages, args.runs)
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
