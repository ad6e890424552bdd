"""The library's other id type: a store keyed by text ids appends and reads back through
the recorder's libpq statements as it does with uuids (ids, versions and rows as sent)."""

from __future__ import annotations

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresDatastore
from psycopg.conninfo import conninfo_to_dict

from interlock.stores.postgres import InterlockPostgresRecorder
from tests.conftest import PG_URL

pytestmark = pytest.mark.postgres


def test_text_ids_append_and_read_back(pg_store: str) -> None:
    where = conninfo_to_dict(PG_URL)  # the database the suite was given, not one by name
    schema = pg_store.split("?schema=")[1]
    datastore = PostgresDatastore(
        str(where["dbname"]), str(where.get("host", "127.0.0.1")), str(where.get("port", 5432)),
        str(where.get("user", "postgres")), str(where.get("password", "")),
        schema=schema, originator_id_type="text")
    recorder = InterlockPostgresRecorder(datastore)
    recorder.create_table()
    chat = "chät-1 ✓"
    events = [StoredEvent(chat, v, "interlock:X", b"\x00state %d" % v) for v in (1, 2, 3)]
    ids = recorder.insert_events(events)
    assert recorder.max_notification_id() == ids[-1]
    assert recorder.select_events(chat) == events
    assert recorder.select_events(chat, gt=1, lte=2) == events[1:2]
    assert recorder.select_events(chat, desc=True, limit=2) == events[:0:-1]
    assert recorder.select_events("another") == []
    datastore.close()
