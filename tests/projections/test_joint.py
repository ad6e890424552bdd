"""The views of a pass commit together, and reuse the positions they committed."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import psycopg
import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.backends import postgres as postgres_backend
from interlock.projections.engine.sql import JointBatchError
from interlock.projections.views.inbox import InboxView
from interlock.projections.views.webhooks import WebhooksView
from tests.conftest import ON_POSTGRES, PG_URL
from tests.projections.conftest import dumps
from tests.projections.flows import banking_flows

pytestmark = pytest.mark.anyio


async def test_a_view_reset_under_traffic_is_caught_up_from_scratch(
    app: Interlock, views: SqlReadModels
) -> None:
    """The pass after a reset reuses the positions it committed (there is new work), so
    the reset view's compare-and-set fails; the one-by-one path rereads and rebuilds it."""
    await banking_flows(app)
    views.catch_up()
    views.view(InboxView).reset()  # a rebuild elsewhere, killed right after its reset
    await banking_flows(app)  # new work: the cached positions are used
    views.catch_up()
    live = dumps(views)
    for runner in views.runners:
        runner.rebuild()
    assert dumps(views) == live
    assert min(views.positions().values()) == app.recorder.max_notification_id()


async def test_a_view_reset_on_an_idle_log_is_caught_up(
    app: Interlock, views: SqlReadModels
) -> None:
    await banking_flows(app)
    views.catch_up()
    before = dumps(views)
    views.view(InboxView).reset()
    views.catch_up()  # nothing new: the positions are read, not reused
    assert dumps(views) == before


@pytest.mark.parametrize("store", [ON_POSTGRES], indirect=True)  # SQLite passes are serialised
async def test_a_write_from_another_thread_during_a_pass_is_a_transaction_of_its_own(
    app: Interlock, views: SqlReadModels
) -> None:
    """The webhook deliverer and the API write a view (leases, secrets) while the views
    thread is inside a pass over it: neither may write into, or end, the other's batch."""
    await banking_flows(app)
    views.catch_up()
    hooks, inbox = views.view(WebhooksView), views.view(InboxView)
    start = hooks.position()
    joint = hooks.store.joint([inbox.store])
    assert joint is not None
    outcome: list[object] = []

    def subscribe() -> None:
        outcome.append(hooks.keep_secret("sub_in_the_pass", "whsec_x"))

    with joint, hooks.batch(start, start):
        other = threading.Thread(target=subscribe)
        other.start()
        other.join(10)
        assert not other.is_alive(), "the other thread waited on this pass"
        assert hooks.secret("sub_in_the_pass") == "whsec_x"  # committed on its own
        hooks.chat_started("chat-in-the-pass", "acme", "bankingAgent")  # still this batch's
    assert len(outcome) == 1
    assert {r["id"] for r in hooks.dump() if r["kind"] == "chat"} >= {"chat-in-the-pass"}
    assert hooks.position() == start


@pytest.mark.parametrize("store", [ON_POSTGRES], indirect=True)  # SQLite has no joint batch
@pytest.mark.parametrize("moved", [0, 1])
async def test_a_joint_batch_whose_position_moved_under_one_view_writes_nothing(
    app: Interlock, views: SqlReadModels, moved: int
) -> None:
    """The views' compare-and-sets are one statement: one that fails (first or second
    part) rolls back every view's rows and positions, and the others' moves with them."""
    await banking_flows(app)
    views.catch_up()
    hooks, inbox = views.view(WebhooksView), views.view(InboxView)
    start = {v: v.position() for v in (hooks, inbox)}
    before = [hooks.dump(), inbox.dump()]
    wrong = (hooks, inbox)[moved]
    joint = hooks.store.joint([inbox.store])
    assert joint is not None
    with pytest.raises(JointBatchError), joint:
        for view in (hooks, inbox):
            expected = start[view] + (1 if view is wrong else 0)  # not where it is
            with view.batch(expected, start[view] + 5):
                if view is hooks:
                    view.chat_started("chat-rolled-back", "acme", "bankingAgent")
    assert [hooks.dump(), inbox.dump()] == before
    assert {v: v.position() for v in (hooks, inbox)} == start
    joint = hooks.store.joint([inbox.store])
    assert joint is not None
    with joint:  # and the same batches from where the views are commit together
        for view in (hooks, inbox):
            with view.batch(start[view], start[view] + 5):
                pass
    assert {v: v.position() for v in (hooks, inbox)} == {v: p + 5 for v, p in start.items()}


@pytest.mark.parametrize("store", [ON_POSTGRES], indirect=True)  # SQLite has no joint batch
@pytest.mark.parametrize("moved", [False, True])
async def test_a_joint_pass_is_one_round_trip_and_a_refused_one_leaves_its_connection_idle(
    app: Interlock, views: SqlReadModels, moved: bool, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """BEGIN, the compare-and-set, the rows and COMMIT go in one pipeline: one wait for
    PostgreSQL's answer. Refused, the transaction is rolled back as the connection's context
    ends, before it goes back to the pool (which would warn)."""
    await banking_flows(app)
    views.catch_up()
    hooks, inbox = views.view(WebhooksView), views.view(InboxView)
    start = {v: v.position() for v in (hooks, inbox)}
    waits: list[object] = []
    wait = psycopg.Connection.wait

    def counted(conn: psycopg.Connection[Any], gen: Any, *args: Any, **kwargs: Any) -> Any:
        waits.append(gen)
        return wait(conn, gen, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "wait", counted)
    joint = hooks.store.joint([inbox.store])
    assert joint is not None
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        try:
            with joint:
                for view in (hooks, inbox):
                    with view.batch(start[view] + moved, start[view] + 5):
                        view.chat_started("chat-in-one-trip", "acme", "bankingAgent")
        except JointBatchError:
            assert moved
    assert len(waits) == 1 + moved  # the pipeline; refused, the ROLLBACK
    assert not [r for r in caplog.records if "rolling back" in r.getMessage()]
    chats = {r["id"] for r in hooks.dump() if r["kind"] == "chat"}
    assert ("chat-in-one-trip" in chats) is not moved


@pytest.mark.parametrize("store", [ON_POSTGRES], indirect=True)  # SQLite has no joint batch
@pytest.mark.parametrize("how", ["ok", "moved", "a_later_lot_fails"])
async def test_a_joint_pass_over_several_lots_commits_all_or_nothing(
    app: Interlock, views: SqlReadModels, how: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past SYNC_ROWS statements the pass's one transaction spans several synced lots: a
    moved position (the first lot) or a row failing in a later lot, after BEGIN and the
    first rows ran, leaves no row and no position moved, and no session in a transaction."""
    monkeypatch.setattr(postgres_backend, "SYNC_ROWS", 3)  # BEGIN, the check, a row | ...
    await banking_flows(app)
    views.catch_up()
    hooks, inbox = views.view(WebhooksView), views.view(InboxView)
    start = {v: v.position() for v in (hooks, inbox)}
    joint = hooks.store.joint([inbox.store])
    assert joint is not None
    try:
        with joint:
            for view in (hooks, inbox):
                moved = how == "moved" and view is inbox
                with view.batch(start[view] + moved, start[view] + 5):
                    if view is hooks:
                        for k in range(7):
                            view.chat_started(f"chat-lot-{k}", "acme", "bankingAgent")
                        if how == "a_later_lot_fails":
                            view.store.run("SELECT 1 / %(zero)s::int", {"zero": "0"})
    except JointBatchError:
        assert how != "ok"
    else:
        assert how == "ok"
    written = {r["id"] for r in hooks.dump() if r["kind"] == "chat"} & {
        f"chat-lot-{k}" for k in range(7)}
    moved_to = {v: p + 5 for v, p in start.items()} if how == "ok" else start
    assert (len(written), {v: v.position() for v in (hooks, inbox)}) == (
        7 if how == "ok" else 0, moved_to)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        idle_in_transaction = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%%'"
            " AND application_name = %s", (os.environ["PGAPPNAME"],)).fetchone()
    assert idle_in_transaction == (0,)
