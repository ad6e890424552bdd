"""Operating the views on a bad day: rebuilds, a rebuild under a running server, stuck views."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
import pytest
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from fastapi.testclient import TestClient
from psycopg import sql

from interlock.api.app import make_app
from interlock.domain import Interlock
from interlock.domain.chat.events import UserMessageSent
from interlock.domain.errors import InvalidRequestError
from interlock.projections import (
    READ_MODELS,
    ReadModel,
    SqlReadModels,
    open_read_models,
    open_views,
)
from interlock.projections.engine import cursors
from interlock.projections.engine.sql import SqlView
from interlock.projections.interface import ChatFilter, InboxFilter
from interlock.projections.views.chats import ChatsView
from tests.conftest import PG_URL, pg_schema_url
from tests.projections.conftest import dumps, rebuilt
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


# -- a rebuild while a server runs ---------------------------------------------------------


async def test_a_rebuild_under_a_running_server_keeps_its_views_serving(
    app: Interlock, store: str
) -> None:
    _, position = await seed(app)
    server = open_read_models(app)
    errors: list[BaseException] = []
    stop = threading.Event()

    def read_lists() -> None:
        while not stop.is_set():
            try:
                server.chats(ChatFilter(tenant="bank"))
                server.inbox(InboxFilter(tenant="bank"))
            except Exception as exc:  # noqa: BLE001 - any error is the failure under test
                errors.append(exc)
                return

    reader = threading.Thread(target=read_lists)
    try:
        server.wait(position)
        reader.start()
        _rebuild_all(app)
        _rebuild_all(app)
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        server.wait(app.recorder.max_notification_id())
        stop.set()
        reader.join()
        assert errors == []
        assert not server.stopped()
        assert chat.id in {UUID(c.chat_id) for c in server.chats(ChatFilter()).items}
        assert dumps(server) == rebuilt(app)
    finally:
        stop.set()
        server.close()


def _lock_waiters(store: str) -> int:
    """Sessions of this test's schema waiting on a lock now."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND application_name = %s", (os.environ["PGAPPNAME"],)).fetchone()
    return int(row[0]) if row else 0


async def test_a_reset_waits_for_a_batch_in_flight_instead_of_deadlocking(
    pg_store: str,
) -> None:
    """A batch locks its position, then writes its rows; a reset takes the position first
    too, so it queues behind the batch (it dropped the rows' tables first: a deadlock, one
    of the two aborted, and a rebuild beside a live server failed)."""
    app = app_for(pg_store)
    await seed(app)
    live, rebuilder = open_views(app), open_views(app)
    runner, holding, go = live.runner("decisions"), threading.Event(), threading.Event()
    process = runner._process  # the live batch pauses after its first event, its rows unsent

    def pausing(event: Any, tracking: Tracking) -> None:
        process(event, tracking)
        holding.set()
        go.wait(30)

    runner._process = pausing
    errors: list[BaseException] = []

    def run(step: Callable[[], object]) -> Callable[[], None]:
        def target() -> None:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - any error is the failure under test
                errors.append(exc)
        return target

    batch = threading.Thread(target=run(runner.catch_up))
    reset = threading.Thread(target=run(rebuilder.runner("decisions").view.reset))
    try:
        batch.start()
        assert holding.wait(30)
        reset.start()
        deadline = time.monotonic() + 30
        while _lock_waiters(pg_store) == 0:  # the reset queues behind the batch
            assert time.monotonic() < deadline, "the reset never waited"
            time.sleep(0.01)
        go.set()
        batch.join(60)
        reset.join(60)
        assert errors == []
        assert rebuilder.runner("decisions").view.position() == 0  # the reset came last
        runner._process = process
        live.catch_up()
        assert dumps(live) == rebuilt(app)
    finally:
        go.set()
        live.close()
        rebuilder.close()
        app.close()


async def test_views_whose_tables_vanish_recreate_them_and_catch_up(
    app: Interlock, store: str
) -> None:
    """A rebuild killed between its drop and its create (older versions) leaves no tables."""
    _, position = await seed(app)
    server = open_read_models(app)
    try:
        server.wait(position)
        other = open_views(app)
        other.runners[0].view.drop()
        other.close()
        app.start_chat("bankingAgent", actor="alice", tenant="bank")
        server.wait(app.recorder.max_notification_id(), timeout=10)
        assert not server.stopped()
        assert dumps(server) == rebuilt(app)
    finally:
        server.close()


# -- a view that cannot apply an event ---------------------------------------------------


class PoisonView(SqlView):
    """A view that cannot apply a message saying "poison" (it writes its row twice)."""

    view_name = "poison"
    tables = ("poison",)
    ddl = ("CREATE TABLE IF NOT EXISTS {poison} (chat_id text PRIMARY KEY)",)
    dump_sql = "SELECT chat_id FROM {poison} ORDER BY chat_id"

    def poisoned(self, chat_id: str) -> None:
        self._run("INSERT INTO {poison} VALUES (%(c)s)", {"c": chat_id})


class PoisonProjection(Projection[PoisonView]):
    name = "poison"

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Other events write nothing."""

    @process_event.register
    def _message(self, e: UserMessageSent, tracking: Tracking) -> None:
        if e.text == "poison":
            self.view.poisoned(str(e.originator_id))
            self.view.poisoned(str(e.originator_id))


POISONED = (*READ_MODELS, ReadModel(PoisonView, PoisonProjection))


async def test_a_view_stuck_on_an_event_says_so_and_backs_off(
    app: Interlock, store: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, before = await seed(app)
    server = open_read_models(app, read_models=POISONED)
    try:
        server.wait(before)
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        await app.send(chat.id, "poison", actor="alice")
        head = app.recorder.max_notification_id() or 0
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="poison"):
            server.wait(head, timeout=5)
        assert time.monotonic() - started < 2  # a stuck view is no reason to wait
        [stuck] = server.stuck()
        poisoned = [n.id for n in app.recorder.select_notifications(before + 1, 100)
                    if n.topic.endswith("UserMessageSent")]
        assert (stuck.view, stuck.notification_id) == ("poison", poisoned[0])
        assert stuck.topic.endswith("UserMessageSent")
        positions = server.positions()
        assert positions["poison"] == poisoned[0] - 1  # what came before it is kept
        assert all(p == head for name, p in positions.items() if name != "poison")
        assert server.stopped()
        errors = [r for r in caplog.records if r.levelname == "ERROR"]
        assert len(errors) == 1 and str(poisoned[0]) in errors[0].getMessage()
        time.sleep(0.5)  # the live runner passes again on commits: no hot retry
        app.start_chat("bankingAgent", actor="alice", tenant="bank")
        time.sleep(0.3)
        assert server.stuck()[0].attempts <= 2
        response = TestClient(make_app(app, server)).get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["stuck"][0]["view"] == "poison"
        assert body["stuck"][0]["notification_id"] == poisoned[0]
    finally:
        server.close()


# -- hostile cursors ----------------------------------------------------------------------


@pytest.mark.parametrize("at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_cursor_time_outside_utc_is_refused(models: SqlReadModels, at: str) -> None:
    when = datetime.fromisoformat(at)
    with pytest.raises(InvalidRequestError, match="invalid cursor"):
        models.inbox(InboxFilter(), cursor=cursors.encode((when, "c", "r")))
    with pytest.raises(InvalidRequestError, match="invalid cursor"):
        models.chats(ChatFilter(), cursor=cursors.encode((when, "c")))


# -- a lone server's passes -------------------------------------------------------------------


def _heads(app: Interlock, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that read the log's head from now on (`Interlock.position`)."""
    heads: list[str] = []
    position_of = app.position

    def head() -> int:
        heads.append(threading.current_thread().name)
        return position_of()

    monkeypatch.setattr(app, "position", head)
    return heads


def _applied(watcher: SqlReadModels, position: int) -> None:
    """Until every view has applied `position` (read from their tables: no reader waits)."""
    _until(lambda: min(watcher.positions().values()) >= position, 10)


@contextmanager
def _settled_leader(app: Interlock, position: int, monkeypatch: pytest.MonkeyPatch,
                    ) -> Iterator[tuple[SqlReadModels, SqlReadModels, list[str]]]:
    """`app`'s views kept by its leader (no poll during the test) and a watcher reading
    their tables, once the views hold `position` and one more append with no reader
    waiting; and the threads that read the log's head from then on."""
    server = open_read_models(app, poll_interval=60)
    watcher = open_views(app)
    try:
        server.wait(position)
        app.start_chat("bankingAgent", actor="alice", tenant="bank")
        _applied(watcher, app.recorder.max_notification_id() or 0)  # no reader waits now
        yield server, watcher, _heads(app, monkeypatch)
    finally:
        watcher.close()
        server.close()


async def test_a_pass_goes_up_to_the_head_it_was_told_of_and_sees_other_processes(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass woken by this process's commits goes up to the id their notifications
    announced, without asking the store where the log ends (a round trip a pass). Another
    process's append is read as before: the head it announces is not this process's to
    vouch for."""
    app, other = app_for(pg_store), app_for(pg_store)
    _, position = await seed(app)
    try:
        with _settled_leader(app, position, monkeypatch) as (server, watcher, heads):
            mine = app.start_chat("bankingAgent", actor="alice", tenant="bank")
            _applied(watcher, app.recorder.max_notification_id() or 0)
            assert "interlock-views" not in heads  # the pass read no head
            theirs = other.start_chat("bankingAgent", actor="bob", tenant="bank")
            again = app.start_chat("bankingAgent", actor="alice", tenant="bank")
            _applied(watcher, app.recorder.max_notification_id() or 0)
            chats = {r["chat_id"] for r in watcher.view(ChatsView).dump()}
            assert {str(mine.id), str(theirs.id), str(again.id)} <= chats
            last = other.start_chat("bankingAgent", actor="bob", tenant="bank")  # past all
            started = time.monotonic()
            server.wait(other.recorder.max_notification_id() or 0, timeout=10)
            assert time.monotonic() - started < 5
            assert str(last.id) in {r["chat_id"] for r in watcher.view(ChatsView).dump()}
    finally:
        other.close()
        app.close()


async def test_an_append_that_announces_no_head_makes_the_pass_read_it(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recorder of before (a server not yet upgraded) NOTIFYs without the newest id: the
    leader's next pass reads the log's head instead of trusting the last one it was told."""
    app = app_for(pg_store)
    _, position = await seed(app)
    try:
        with _settled_leader(app, position, monkeypatch) as (_, watcher, heads):
            app.start_chat("bankingAgent", actor="alice", tenant="bank")  # announced
            _applied(watcher, app.recorder.max_notification_id() or 0)
            assert "interlock-views" not in heads
            with psycopg.connect(PG_URL, autocommit=True) as conn:  # a NOTIFY of before
                conn.execute(sql.SQL("NOTIFY {}").format(
                    sql.Identifier(app.recorder.channel_name)))
            _until(lambda: "interlock-views" in heads, 10)
    finally:
        app.close()


@pytest.fixture
def other_schema() -> Iterator[str]:
    """Another store in another schema of the same database: its events table has the same
    name, so its appends NOTIFY on the same channel."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield pg_schema_url(schema)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


async def test_another_store_s_appends_on_the_same_channel_move_no_view_past_its_log(
    pg_store: str, other_schema: str
) -> None:
    """The channel is named after the events table, not the schema: another store's ids,
    higher than this log's, are heard as heads. The views still stop at their own log's
    head, and this store's next append reaches them."""
    app, other = app_for(pg_store), app_for(other_schema)
    assert app.recorder.channel_name == other.recorder.channel_name
    _, position = await seed(app)
    server = open_read_models(app, poll_interval=60)
    watcher = open_views(app)
    try:
        server.wait(position)
        for _ in range(3):
            await seed(other)  # the other log grows well past this one
        assert (other.recorder.max_notification_id() or 0) > position + 5
        time.sleep(0.5)  # heard, and a pass run
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        head = app.recorder.max_notification_id() or 0
        _applied(watcher, head)
        assert max(watcher.positions().values()) == head
        assert str(chat.id) in {r["chat_id"] for r in watcher.view(ChatsView).dump()}
    finally:
        watcher.close()
        server.close()
        other.close()
        app.close()


@pytest.mark.parametrize("payload", ["999999", "\u00b2", "9" * 5000, "-1", ""])
async def test_a_stray_notify_on_the_channel_neither_moves_nor_stops_the_views(
    pg_store: str, payload: str
) -> None:
    """Any session may NOTIFY the channel, with any payload: a number past the log, a digit
    `int` refuses (a superscript, more digits than it converts), a sign, nothing."""
    app = app_for(pg_store)
    _, position = await seed(app)
    server = open_read_models(app, poll_interval=60)
    watcher = open_views(app)
    try:
        server.wait(position)
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (app.recorder.channel_name, payload))
        time.sleep(0.5)
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        head = app.recorder.max_notification_id() or 0
        _applied(watcher, head)
        assert max(watcher.positions().values()) == head
        assert str(chat.id) in {r["chat_id"] for r in watcher.view(ChatsView).dump()}
        assert not server.stopped()
    finally:
        watcher.close()
        server.close()
        app.close()


@contextmanager
def _leader_and_follower(store: str) -> Iterator[tuple[Interlock, SqlReadModels,
                                                     SqlReadModels]]:
    """Two processes' views on `store` (no poll during the test): the first leads, once it
    has made a pass, and the second follows; the leader's app."""
    first, second = app_for(store), app_for(store)
    leader = open_read_models(first, poll_interval=60)
    follower = None
    try:
        _until(lambda: not leader.stopped() and leader.passes() > 0, 10)
        follower = open_read_models(second, poll_interval=60)
        live = follower._live
        assert live is not None and live.leader is not None
        _until(lambda: live.following, 10)
        yield first, leader, follower
    finally:
        if follower is not None:
            follower.close()
        leader.close()
        second.close()
        first.close()


async def test_a_follower_keeps_none_of_the_appends_it_hears(pg_store: str) -> None:
    """A follower asks for the lead on its LISTEN connection every second; the appends
    heard meanwhile are dropped, not kept on the connection for as long as it follows."""
    with _leader_and_follower(pg_store) as (first, _, follower):
        for _ in range(20):
            first.start_chat("bankingAgent", actor="alice", tenant="bank")
        time.sleep(2.5)  # two asks for the lead on the follower's connection
        waker = follower._live.leader._waker  # type: ignore[union-attr]
        assert len(waker.connection._notifies_backlog) < 20  # psycopg's queue of unread ones


@pytest.fixture
def ascii_store() -> Iterator[str]:
    """A store in a SQL_ASCII database (initdb's default under the C locale): psycopg reads
    its NOTIFY payloads as ASCII, and any session may send one with other bytes."""
    name = f"interlock_ascii_{uuid.uuid4().hex[:8]}"
    admin = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C'"
                             " LC_CTYPE 'C' TEMPLATE template0").format(sql.Identifier(name)))
    try:
        yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(admin)


async def test_a_notify_payload_the_connection_cannot_decode_stops_no_views(
    ascii_store: str,
) -> None:
    """psycopg decodes a payload as it reads it, in the leader's wait and in a follower's
    ask for the lead: neither thread may die of it; the next append reaches the views."""
    with _leader_and_follower(ascii_store) as (first, leader, follower):
        with psycopg.connect(ascii_store, autocommit=True) as conn:
            conn.execute("SELECT pg_notify(%s, convert_from('\\xe9'::bytea, 'SQL_ASCII'))",
                         (first.recorder.channel_name,))
        time.sleep(2.5)  # heard by the leader's wait, and by the follower's next ask
        first.start_chat("bankingAgent", actor="alice", tenant="bank")
        leader.wait(first.recorder.max_notification_id(), timeout=10)  # TimeoutError: stuck
        assert not leader.stopped() and not follower.stopped()
        assert all(m._live is not None and m._live._thread.is_alive()
                   for m in (leader, follower))


# -- a runner in another process -------------------------------------------------------------


async def test_a_runner_process_wakes_on_notify_not_on_its_poll(pg_store: str) -> None:
    app = app_for(pg_store)
    _, position = await seed(app)
    cmd = [sys.executable, "-m", "interlock.cli.main", "projections", "run", "--poll", "30",
           "--store", pg_store]
    worker = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    watcher = open_views(app)
    try:
        _until(lambda: min(watcher.positions().values()) >= position, 60)  # startup, loaded CI
        time.sleep(0.5)  # the runner is now waiting: 30 s if it polled
        chat = app.start_chat("bankingAgent", actor="alice", tenant="bank")
        head = app.recorder.max_notification_id() or 0
        started = time.monotonic()
        _until(lambda: min(watcher.positions().values()) >= head, 5)
        assert time.monotonic() - started < 2
        assert str(chat.id) in {r["chat_id"] for r in watcher.view(ChatsView).dump()}
    finally:
        worker.terminate()
        worker.communicate(timeout=10)
        watcher.close()
        app.close()


def _until(done: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.02)
