"""Processes sharing a PostgreSQL store elect one to apply the views; the others read them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from interlock.domain import Interlock
from interlock.projections import SqlReadModels, open_read_models
from interlock.projections.engine.live import LiveRunner
from interlock.projections.views.chats import ChatsView
from tests.projections.flows import app_for, seed

pytestmark = pytest.mark.anyio


def _live(models: object) -> LiveRunner:
    live = getattr(models, "_live", None)
    assert isinstance(live, LiveRunner)
    return live


def _until(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)


def _leads(models: object) -> None:
    """Wait until `models`' runner holds the views' lock."""
    _until(lambda: bool(_live(models).leader and _live(models).leader.leading), 10)


async def _writes_reach_views(app: Interlock, models: SqlReadModels) -> None:
    """Chats written through `app` are listed by `models` once it has waited for them."""
    chats, _ = await seed(app)
    models.wait(app.recorder.max_notification_id())
    assert {str(c) for c in chats} <= {r["chat_id"] for r in models.view(ChatsView).dump()}


async def test_one_process_applies_the_views_and_a_follower_reads_its_own_writes(
    pg_store: str,
) -> None:
    """Two servers on one store: one leads; a write made through the other is visible to
    its next read (it waits for the leader), and each event was applied once (no view's
    position ever fought over: the follower never ran a batch)."""
    first, second = app_for(pg_store), app_for(pg_store)
    a = open_read_models(first)
    _leads(a)
    b = open_read_models(second)
    try:
        time.sleep(0.2)  # b has tried to lead by now, and lost
        assert _live(b).following
        chats, position = await seed(second)  # written through the follower
        b.wait(second.recorder.max_notification_id())  # read-your-writes via the leader
        assert min(b.positions().values()) >= position
        assert _live(b)._seen == 0  # the follower never applied a batch itself
        assert b._fresh == {}  # nor kept its commits' events for a pass it never runs
        listed = {r["chat_id"] for r in b.view(ChatsView).dump()}
        assert {str(c) for c in chats} <= listed
    finally:
        b.close()
        a.close()
        second.close()
        first.close()


async def test_a_follower_takes_over_when_the_leader_stops(pg_store: str) -> None:
    first, second = app_for(pg_store), app_for(pg_store)
    a = open_read_models(first)
    _leads(a)
    b = open_read_models(second)
    try:
        time.sleep(0.2)
        assert _live(b).following
        a.close()  # the leader goes away (a crash ends its session: the same for the lock)
        first.close()
        _until(lambda: not _live(b).following, 10)
        await _writes_reach_views(second, b)
    finally:
        b.close()
        second.close()


async def test_a_leader_whose_connection_dies_is_elected_again_and_the_views_go_on(
    pg_store: str,
) -> None:
    """The connection holding the lock and LISTENing is killed (a database restart, a
    proxy timeout): the lock is gone with it, the runner gives the broken connection back
    and takes part in the next election, and new writes still reach the views."""
    import psycopg

    from interlock.projections.backends.postgres import ViewLeader

    app = app_for(pg_store)
    models = open_read_models(app)
    try:
        _leads(models)
        leader = _live(models).leader
        assert isinstance(leader, ViewLeader) and leader._waker is not None
        pid = leader._waker.connection.info.backend_pid
        with psycopg.connect(pg_store.split("?")[0], autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _until(lambda: leader._waker is not None and leader.leading
               and leader._waker.connection.info.backend_pid != pid, 10)
        await _writes_reach_views(app, models)
    finally:
        models.close()
        app.close()
