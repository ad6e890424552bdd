"""Operating the views on a bad day: rebuilds, a rebuild under a running server, stuck views."""

from __future__ import annotations

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_views
from tests.projections.conftest import dumps
from tests.projections.flows import app_for, seed

pytestmark = pytest.mark.anyio


def _rebuild_all(app: Interlock) -> None:
    """What `interlock projections rebuild all` does: one set of views, each rebuilt."""
    models = open_views(app)
    try:
        for runner in models.runners:
            runner.rebuild()
    finally:
        models.close()


async def test_a_server_starts_after_two_rebuilds(app: Interlock, store: str) -> None:
    _, position = await seed(app)
    first = open_views(app)
    first.catch_up()
    before = dumps(first)
    first.close()
    _rebuild_all(app)
    _rebuild_all(app)
    for _ in range(2):  # each start checks the tracking tables' migration marker
        started = app_for(store)
        try:
            views = open_views(started)
            assert views.catch_up() == position
            assert dumps(views) == before
            views.close()
        finally:
            started.close()


async def test_a_rebuild_twice_in_one_process_keeps_the_marker(
    app: Interlock, store: str
) -> None:
    await seed(app)
    models: SqlReadModels = open_views(app)
    try:
        for runner in models.runners:
            runner.rebuild()
            runner.rebuild()
    finally:
        models.close()
    again = open_views(app)
    assert again.catch_up() == (app.recorder.max_notification_id() or 0)
    again.close()
