"""The one-round-trip PostgreSQL recorder: ordered ids, refused conflicts, racing start-ups."""

from __future__ import annotations

import threading

import pytest
from eventsourcing.persistence import IntegrityError

from interlock.bootstrap import build_service
from interlock.domain import Chat
from interlock.projections import open_views
from interlock.stores.postgres import InterlockPostgresRecorder


def test_appends_return_ascending_ids_and_conflicts_write_nothing(pg_store: str) -> None:
    app = build_service(pg_store)
    assert type(app.recorder) is InterlockPostgresRecorder
    chat = Chat.start("ops", actor="a", tenant="t")
    chat.send_message("one", actor="a")
    first = app.commit(chat)
    stale = app.get_chat(chat.id)
    chat.finish_turn("stop")
    chat.send_message("two", actor="a")
    second = app.commit(chat)
    assert first is not None and second is not None and second == first + 2
    ids = [n.id for n in app.recorder.select_notifications(None, 10)]
    assert ids == sorted(ids) and len(ids) == 4
    stale.finish_turn("stop")
    with pytest.raises(IntegrityError):
        app.recorder.insert_events([app.mapper.to_stored_event(e) for e in stale.collect_events()])
    assert len(app.recorder.select_notifications(None, 10)) == 4


def test_racing_start_ups_on_a_fresh_schema_all_succeed(pg_store: str) -> None:
    """Events, snapshots and views: every table, type and function created once."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def start() -> None:
        barrier.wait(timeout=10)
        try:
            app = build_service(pg_store)
            open_views(app).close()
            app.close()
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
