"""The webhooks view reuses whether any subscription exists only at the position it saw it."""

from __future__ import annotations

from uuid import uuid4

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_views
from interlock.projections.views.webhooks import WebhooksView
from tests.projections.flows import banking_flows

pytestmark = pytest.mark.anyio


def _outbox(hooks: WebhooksView) -> int:
    return sum(1 for r in hooks.dump() if r["kind"] == "outbox")


def _subscribe(app: Interlock) -> None:
    app.webhooks.subscribe(uuid4(), tenant="bank", url="http://127.0.0.1:9/hook",
                          events=["interrupt.pending", "interrupt.decided"], actor="alice",
                          secret_sha256="0" * 64)


async def test_a_subscription_another_runner_applied_is_read_not_taken_from_memory(
    app: Interlock, views: SqlReadModels
) -> None:
    """This runner saw no subscription at its position; another runner (a server that led
    meanwhile) applied a subscription and moved the position: this runner's next batch
    starts elsewhere, reads the subscriptions and queues the notifications."""
    await banking_flows(app)
    views.catch_up()
    hooks = views.view(WebhooksView)
    assert _outbox(hooks) == 0
    other = open_views(app)
    try:
        _subscribe(app)
        await banking_flows(app)
        other.catch_up()
    finally:
        other.close()
    queued = _outbox(hooks)
    assert queued > 0
    await banking_flows(app)
    views.catch_up()
    assert _outbox(hooks) > queued


async def test_a_subscription_this_runner_applied_holds_for_its_next_batches(
    app: Interlock, views: SqlReadModels
) -> None:
    hooks = views.view(WebhooksView)
    await banking_flows(app)
    views.catch_up()
    _subscribe(app)
    views.catch_up()  # the subscription alone: no notification in its batch
    assert _outbox(hooks) == 0
    await banking_flows(app)
    views.catch_up()
    assert _outbox(hooks) > 0
    for runner in views.runners:  # and a rebuild starts from nothing, and reads again
        runner.rebuild()
    before = _outbox(hooks)
    await banking_flows(app)
    views.catch_up()
    assert _outbox(hooks) > before
