"""The views of a pass commit together, and reuse the positions they committed."""

from __future__ import annotations

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels
from interlock.projections.inbox import InboxView
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
