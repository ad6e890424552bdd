"""The views of a pass commit together, and reuse the positions they committed."""

from __future__ import annotations

import threading

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.views.inbox import InboxView
from interlock.projections.views.webhooks import WebhooksView
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


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # SQLite passes are serialised
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
